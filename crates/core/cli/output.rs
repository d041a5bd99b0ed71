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

use std::io::{self, Write};

/// Where the command's text goes.
pub struct Output {
    stdout: Sink,
    stderr: Sink,
    stdout_closed: bool,
    files_written: Option<usize>,
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
            stdout: Sink::Stdout(io::stdout()),
            stderr: Sink::Stderr(io::stderr()),
            stdout_closed: false,
            files_written: None,
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
        }
    }

    /// stdout goes to `stdout`, stderr is kept in memory: for tests of failing writers.
    pub fn to_writer(stdout: impl Write + 'static) -> Self {
        Output {
            stdout: Sink::Other(Box::new(stdout)),
            stderr: Sink::Memory(Vec::new()),
            stdout_closed: false,
            files_written: None,
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

    /// True when stdout is the process's own and a terminal (for `--color auto`).
    pub fn stdout_is_terminal(&self) -> bool {
        use std::io::IsTerminal;
        matches!(&self.stdout, Sink::Stdout(s) if s.is_terminal())
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

    /// `memprints: <line>` on stderr.
    pub fn note(&mut self, line: impl std::fmt::Display) {
        let _ = writeln!(self.stderr.writer(), "memprints: {line}");
    }

    /// `memprints: warning: <line>` on stderr.
    pub fn warning(&mut self, line: impl std::fmt::Display) {
        self.note(format_args!("warning: {line}"));
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
    fn notes_and_warnings_go_to_stderr_with_the_program_name() {
        let mut out = Output::memory();
        writeln!(out, "answer").unwrap();
        out.note("note: took over a stale lock");
        out.warning("detail layer 1 will print nowhere");
        assert_eq!(out.stdout_text(), "answer\n");
        assert_eq!(
            out.stderr_text(),
            "memprints: note: took over a stale lock\nmemprints: warning: detail layer 1 will print nowhere\n"
        );
    }
}
