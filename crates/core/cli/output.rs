//! The one writer every command prints through: stdout for what the command answers (diffs,
//! listings, JSON), stderr for notes and warnings.
//!
//! Contract:
//! - A closed stdout (`memprints status | head -1`: `EPIPE`) is not an error. Output stops
//!   there, quietly, and the command finishes its work (a `remove | head -1` still removes
//!   every file) and exits as it would have.
//! - Any other failure to write stdout (`> /dev/full`: `ENOSPC`) is an error that names stdout,
//!   returned to the command, which stops there; what it had already written to files stays
//!   as the commit left it (all or nothing), so the tree is consistent. A command that changed
//!   the tree says so first ([`Output::wrote_files`]), so that such a failure is told as "the
//!   tree was changed, the summary was lost" (exit code 3), not as a command that did nothing.
//! - Writing stderr never fails a command: if stderr itself is gone there is nobody to tell.
//!
//! Style, the one styling layer (`anstyle`, what clap uses; `anstream` decides): messages on
//! stderr start with a coloured `error:`, `warning:`, `hint:` or `note:`, and diffs are coloured
//! (`+` green, `-` red, `@@` cyan), each stream only when it is a terminal, `NO_COLOR` is unset
//! and `--color` is not `never` (`--color always` colours pipes too). A long answer (a
//! `--dry-run` diff) goes through a pager at a terminal, like git's: `$PAGER`, else `less -FRX`;
//! never into a pipe, nor with `--no-pager`.

use std::io::{self, Write};
use std::process::{Child, Command, Stdio};

use anstyle::{AnsiColor, Style};

/// When to colour (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ColorChoice {
    /// Colour a stream that is a terminal, unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always colour, also into pipes and files.
    Always,
    /// Never colour.
    Never,
}

impl ColorChoice {
    /// Makes this the choice every stream of the process is coloured by.
    pub fn apply(self) {
        anstream::ColorChoice::write_global(match self {
            ColorChoice::Auto => anstream::ColorChoice::Auto,
            ColorChoice::Always => anstream::ColorChoice::Always,
            ColorChoice::Never => anstream::ColorChoice::Never,
        });
    }

    /// The choice the process runs under ([`Self::apply`]).
    pub fn current() -> Self {
        match anstream::ColorChoice::global() {
            anstream::ColorChoice::Auto => ColorChoice::Auto,
            anstream::ColorChoice::Never => ColorChoice::Never,
            _ => ColorChoice::Always,
        }
    }
}

/// The styles of the prefixes and of diff lines.
pub mod style {
    use super::{AnsiColor, Style};
    /// `error:`.
    pub const ERROR: Style = AnsiColor::Red.on_default().bold();
    /// `warning:`.
    pub const WARNING: Style = AnsiColor::Yellow.on_default().bold();
    /// `hint:`.
    pub const HINT: Style = AnsiColor::Cyan.on_default().bold();
    /// `note:`.
    pub const NOTE: Style = Style::new().bold();
    /// A diff's added line.
    pub const ADDED: Style = AnsiColor::Green.on_default();
    /// A diff's removed line.
    pub const REMOVED: Style = AnsiColor::Red.on_default();
    /// A diff's `@@` hunk header.
    pub const HUNK: Style = AnsiColor::Cyan.on_default();
    /// A diff's `---`/`+++` file header, and a summary's first words.
    pub const HEADER: Style = Style::new().bold();
}

/// Where the command's text goes.
pub struct Output {
    stdout: Sink,
    stderr: Sink,
    stdout_closed: bool,
    files_written: Option<usize>,
    stdout_color: bool,
    stderr_color: bool,
    pager_allowed: bool,
    pager: Option<Child>,
}

enum Sink {
    Stdout(io::Stdout),
    Stderr(io::Stderr),
    Memory(Vec<u8>),
    Other(Box<dyn Write>),
}

impl Sink {
    fn writer(&mut self) -> &mut dyn Write {
        match self {
            Sink::Stdout(s) => s,
            Sink::Stderr(s) => s,
            Sink::Memory(v) => v,
            Sink::Other(w) => w.as_mut(),
        }
    }
}

/// True when `stream` is coloured under the process's [`ColorChoice`] (a terminal, `NO_COLOR`,
/// `CLICOLOR_FORCE`: anstream's rules).
fn colours<S: anstream::stream::RawStream>(stream: &S) -> bool {
    anstream::AutoStream::choice(stream) != anstream::ColorChoice::Never
}

/// A stdout write that failed for another reason than a closed pipe.
#[derive(Debug)]
struct StdoutError(io::Error);

impl std::fmt::Display for StdoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot write to stdout: {}", self.0)
    }
}

impl std::error::Error for StdoutError {}

/// The I/O error that failed a stdout write, when `err` is (or was caused by) one.
pub fn stdout_failure(err: &anyhow::Error) -> Option<&io::Error> {
    err.chain().find_map(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref()?.downcast_ref::<StdoutError>())
            .map(|StdoutError(e)| e)
    })
}

impl Output {
    /// The process's stdout and stderr.
    pub fn stdio() -> Self {
        Output {
            stdout_color: colours(&io::stdout()),
            stderr_color: colours(&io::stderr()),
            stdout: Sink::Stdout(io::stdout()),
            stderr: Sink::Stderr(io::stderr()),
            stdout_closed: false,
            files_written: None,
            pager_allowed: true,
            pager: None,
        }
    }

    /// Both streams kept in memory, for tests: read them with [`Self::stdout_text`] and
    /// [`Self::stderr_text`].
    pub fn memory() -> Self {
        Output {
            stdout: Sink::Memory(Vec::new()),
            stderr: Sink::Memory(Vec::new()),
            stdout_closed: false,
            files_written: None,
            stdout_color: false,
            stderr_color: false,
            pager_allowed: false,
            pager: None,
        }
    }

    /// stdout goes to `stdout`, stderr is kept in memory: for tests of failing writers.
    pub fn to_writer(stdout: impl Write + 'static) -> Self {
        Output {
            stdout: Sink::Other(Box::new(stdout)),
            stderr: Sink::Memory(Vec::new()),
            stdout_closed: false,
            files_written: None,
            stdout_color: false,
            stderr_color: false,
            pager_allowed: false,
            pager: None,
        }
    }

    /// What went to stdout, for an output made by [`Self::memory`].
    pub fn stdout_text(&self) -> String {
        match &self.stdout {
            Sink::Memory(v) => String::from_utf8_lossy(v).into_owned(),
            _ => String::new(),
        }
    }

    /// What went to stderr, for an output made by [`Self::memory`] or [`Self::to_writer`].
    pub fn stderr_text(&self) -> String {
        match &self.stderr {
            Sink::Memory(v) => String::from_utf8_lossy(v).into_owned(),
            _ => String::new(),
        }
    }

    /// True when stdout is the process's own and a terminal (for `--color auto`), or a pager
    /// that shows on the terminal.
    pub fn stdout_is_terminal(&self) -> bool {
        use std::io::IsTerminal;
        self.pager.is_some() || matches!(&self.stdout, Sink::Stdout(s) if s.is_terminal())
    }

    /// True once a reader closed stdout.
    pub fn stdout_closed(&self) -> bool {
        self.stdout_closed
    }

    /// Records that the command has changed `files` files of the tree (a commit, a recovery).
    pub fn wrote_files(&mut self, files: usize) {
        *self.files_written.get_or_insert(0) += files;
    }

    /// How many files the command has changed, once it has changed any.
    pub fn files_written(&self) -> Option<usize> {
        self.files_written.filter(|&n| n > 0)
    }

    /// True when what goes to stdout is coloured ([`Self::paint`] does it).
    pub fn stdout_color(&self) -> bool {
        self.stdout_color
    }

    /// `text` in `style` when stdout is coloured, else as it is.
    pub fn paint(&self, style: Style, text: impl std::fmt::Display) -> String {
        if self.stdout_color {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    /// `<kind>: <line>` on stderr, the prefix in `style` when stderr is coloured.
    fn prefixed(&mut self, kind: &str, style: Style, line: impl std::fmt::Display) {
        let prefix = if self.stderr_color {
            format!("{style}{kind}:{style:#}")
        } else {
            format!("{kind}:")
        };
        let _ = writeln!(self.stderr.writer(), "{prefix} {line}");
    }

    /// `error: <line>` on stderr.
    pub fn error(&mut self, line: impl std::fmt::Display) {
        self.prefixed("error", style::ERROR, line);
    }

    /// `warning: <line>` on stderr.
    pub fn warning(&mut self, line: impl std::fmt::Display) {
        self.prefixed("warning", style::WARNING, line);
    }

    /// `hint: <line>` on stderr: what to do about the error or warning above it.
    pub fn hint(&mut self, line: impl std::fmt::Display) {
        self.prefixed("hint", style::HINT, line);
    }

    /// `note: <line>` on stderr.
    pub fn note(&mut self, line: impl std::fmt::Display) {
        self.prefixed("note", style::NOTE, line);
    }

    /// Lets [`Self::start_pager`] start one (`false` for `--no-pager`).
    pub fn allow_pager(&mut self, allowed: bool) {
        self.pager_allowed = allowed;
    }

    /// From here on, stdout goes through a pager, when stdout is a terminal and paging is
    /// allowed: `$PAGER` (none when empty or `cat`), else `less -FRX`, which quits at once
    /// when the text fits the screen. A pager that cannot start is no pager.
    pub fn start_pager(&mut self) {
        if !self.pager_allowed || self.pager.is_some() || !self.stdout_is_terminal() {
            return;
        }
        let pager = std::env::var("PAGER").unwrap_or_else(|_| "less -FRX".into());
        if pager.trim().is_empty() || pager.trim() == "cat" {
            return;
        }
        let child = Command::new("sh")
            .args(["-c", &pager])
            .env(
                "LESS",
                std::env::var("LESS").unwrap_or_else(|_| "FRX".into()),
            )
            .stdin(Stdio::piped())
            .spawn();
        if let Ok(mut child) = child
            && let Some(stdin) = child.stdin.take()
        {
            let _ = io::stdout().flush();
            self.stdout = Sink::Other(Box::new(stdin));
            self.pager = Some(child);
        }
    }

    /// Closes the pager's input and waits for the user to quit it; nothing without a pager.
    pub fn finish(&mut self) {
        if let Some(mut child) = self.pager.take() {
            let _ = self.stdout.writer().flush();
            self.stdout = Sink::Memory(Vec::new());
            let _ = child.wait();
        }
    }

    /// `text` on stderr as it is.
    pub fn stderr(&mut self, text: impl std::fmt::Display) {
        let _ = write!(self.stderr.writer(), "{text}");
    }

    /// Applies the contract to one stdout operation.
    fn stdout_op(&mut self, op: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> io::Result<()> {
        if self.stdout_closed {
            return Ok(());
        }
        match op(self.stdout.writer()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.stdout_closed = true;
                Ok(())
            }
            Err(e) => Err(io::Error::new(e.kind(), StdoutError(e))),
        }
    }
}

/// Writing to an `Output` writes stdout, under the contract in the module documentation.
impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stdout_op(|w| w.write_all(buf))?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.stdout_op(|w| w.write_all(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stdout_op(|w| w.flush())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that fails every write with `kind`, counting the attempts.
    struct Failing(io::ErrorKind, std::rc::Rc<std::cell::Cell<usize>>);

    impl Write for Failing {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            self.1.set(self.1.get() + 1);
            Err(io::Error::from(self.0))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_stops_the_output_quietly_and_is_not_an_error() {
        let attempts = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut out = Output::to_writer(Failing(io::ErrorKind::BrokenPipe, attempts.clone()));
        writeln!(out, "first").unwrap();
        writeln!(out, "second").unwrap();
        out.flush().unwrap();
        assert!(out.stdout_closed());
        assert_eq!(
            attempts.get(),
            1,
            "nothing is written after the pipe closed"
        );
        assert_eq!(out.stderr_text(), "");
    }

    #[test]
    fn a_full_disk_is_an_error_that_names_stdout() {
        let attempts = std::rc::Rc::new(std::cell::Cell::new(0));
        let mut out = Output::to_writer(Failing(io::ErrorKind::StorageFull, attempts));
        let err = writeln!(out, "line").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        assert!(
            err.to_string().starts_with("cannot write to stdout: "),
            "{err}"
        );
        assert!(!out.stdout_closed());
    }

    #[test]
    fn notes_warnings_errors_and_hints_go_to_stderr_with_their_kind() {
        let mut out = Output::memory();
        writeln!(out, "answer").unwrap();
        out.note("took over a stale lock");
        out.warning("detail layer 1 will print nowhere");
        out.error("no such file");
        out.hint("pass --config PATH");
        assert_eq!(out.stdout_text(), "answer\n");
        assert_eq!(
            out.stderr_text(),
            "note: took over a stale lock\nwarning: detail layer 1 will print nowhere\n\
             error: no such file\nhint: pass --config PATH\n"
        );
    }

    #[test]
    fn colour_wraps_only_what_it_styles_and_never_a_memory_output() {
        let mut out = Output::memory();
        assert_eq!(out.paint(style::ADDED, "+x"), "+x");
        out.stdout_color = true;
        out.stderr_color = true;
        assert_eq!(out.paint(style::ADDED, "+x"), "\x1b[32m+x\x1b[0m");
        out.error("bad");
        assert_eq!(out.stderr_text(), "\x1b[1m\x1b[31merror:\x1b[0m bad\n");
    }
}
