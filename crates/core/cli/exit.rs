//! How a command ends: a typed [`ExitStatus`], the one place it becomes a process exit code, and
//! the one place an error becomes the line a user reads.
//!
//! | status | code | when |
//! |---|---|---|
//! | `Success` | 0 | the command did its job; `status`: fully instrumented; `check`: no prints |
//! | `Failure` | 1 | the command ran and the answer is "no": `status` on a clean tree, `check` found prints, `snapshot` with some inputs unreadable |
//! | `Partial` | 2 | part of the work could not be done: `remove` left an edited file, `status` on a partial tree or an interrupted run |
//! | `Error` | 1 | bad input or environment stopped it; one line on stderr says what to do |
//! | `Unreported` | 3 | `add`/`remove` changed the tree, then writing stdout failed (a full disk); stderr says how many files were written |
//! | `InternalError` | 70 | a memprints bug (`EX_SOFTWARE`); one line on stderr asks for a report |
//! | `Busy` | 75 | `status`: another memprints is changing the tree right now (`EX_TEMPFAIL`: run it again) |
//!
//! Command-line syntax errors are clap's and exit 2, as clap's always do.

use std::process::ExitCode;

use super::{Output, output};

/// An error a user caused, with what to do about it: `error: <message>` then `hint: <hint>`.
#[derive(Debug)]
pub struct Hinted {
    /// What went wrong, naming the option or argument it came from.
    pub message: String,
    /// What to do instead.
    pub hint: String,
}

impl std::fmt::Display for Hinted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Hinted {}

/// `error: <message>` and `hint: <hint>`, as an error a command returns.
pub fn hinted(message: impl Into<String>, hint: impl Into<String>) -> anyhow::Error {
    Hinted {
        message: message.into(),
        hint: hint.into(),
    }
    .into()
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// It did its job.
    Success,
    /// It ran and the answer is "no".
    Failure,
    /// Part of the work could not be done.
    Partial,
    /// Bad input or environment stopped it.
    Error,
    /// The tree was changed, but what was done could not be written to stdout.
    Unreported,
    /// Another run is changing the tree right now.
    Busy,
    /// A memprints bug stopped it.
    InternalError,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> Self {
        ExitCode::from(status.code())
    }
}

impl ExitStatus {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Success => 0,
            ExitStatus::Failure | ExitStatus::Error => 1,
            ExitStatus::Partial => 2,
            ExitStatus::Unreported => 3,
            ExitStatus::InternalError => 70,
            ExitStatus::Busy => 75,
        }
    }
}

/// Says what stopped a command, on stderr, and how it ends:
/// - a closed stdout anywhere in the chain (the report and snapshot commands write it
///   themselves): nothing is said, and it is a success;
/// - stdout failing after the command changed the tree: `error: the tree was changed
///   (N files written), but writing the summary to stdout failed: …`, and [`ExitStatus::Unreported`];
/// - a memprints bug ([`memprints_codemod::Error::is_bug`]): `error: internal error: …`;
/// - anything else: `error: …`, the error and its causes on one line, then `hint: …` on the
///   next when the error carries one ([`Hinted`]).
pub fn report_error(err: &anyhow::Error, out: &mut Output) -> ExitStatus {
    let closed_pipe = err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    });
    if closed_pipe {
        return ExitStatus::Success;
    }
    if let (Some(files), Some(stdout)) = (out.files_written(), output::stdout_failure(err)) {
        out.error(format_args!(
            "the tree was changed ({}), but writing the summary to stdout failed: {stdout}",
            match files {
                1 => "1 file written".to_string(),
                n => format!("{n} files written"),
            }
        ));
        return ExitStatus::Unreported;
    }
    let bug = err.chain().any(|cause| {
        cause
            .downcast_ref::<memprints_codemod::Error>()
            .is_some_and(memprints_codemod::Error::is_bug)
    });
    let message = one_line(err);
    if bug {
        out.error(format_args!("internal error: {message}"));
        return ExitStatus::InternalError;
    }
    out.error(message);
    if let Some(hinted) = err.chain().find_map(|c| c.downcast_ref::<Hinted>()) {
        out.hint(&hinted.hint);
    }
    ExitStatus::Error
}

/// The error and its causes, `: `-separated, each cause once: one that an outer message already
/// says (an error that prints its `source` in its own text) is not said again.
fn one_line(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// Says what a panic was, in one line and without a backtrace, and asks for a report. Installed
/// as the panic hook by the binary; only the first panic is told (a panic in a worker thread is
/// often followed by one in the thread that joins it).
pub fn report_panic(info: &std::panic::PanicHookInfo) {
    static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if TOLD.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    let place = info
        .location()
        .map(|l| format!(" at {}:{}", l.file(), l.line()))
        .unwrap_or_default();
    let message = message.lines().next().unwrap_or_default().to_string();
    Output::stdio().error(format_args!(
        "internal error: {message}{place}; this is a memprints bug, please report it"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_the_message_already_says_is_not_said_twice() {
        #[derive(Debug, thiserror::Error)]
        #[error("cannot run `x`: {source}; pass --python")]
        struct Says {
            source: std::io::Error,
        }
        let err = anyhow::Error::from(Says {
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
        assert_eq!(
            one_line(&err),
            "cannot run `x`: permission denied; pass --python"
        );
        let chained = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::NotFound))
            .context("reading a.log");
        assert_eq!(one_line(&chained), "reading a.log: entity not found");
    }

    #[test]
    fn a_closed_pipe_deep_in_an_error_chain_is_a_quiet_success() {
        let err = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("cannot write the report to stdout");
        let mut out = Output::memory();
        assert_eq!(report_error(&err, &mut out), ExitStatus::Success);
        assert_eq!(out.stderr_text(), "");
    }

    #[test]
    fn a_hinted_error_says_what_to_do_on_the_next_line() {
        let mut out = Output::memory();
        let err = hinted("--config nope.json: no such file", "pass a config.json");
        assert_eq!(report_error(&err, &mut out), ExitStatus::Error);
        assert_eq!(
            out.stderr_text(),
            "error: --config nope.json: no such file\nhint: pass a config.json\n"
        );
    }

    #[test]
    fn a_bug_is_told_apart_from_a_user_error_and_exits_differently() {
        let mut out = Output::memory();
        let bug = anyhow::Error::from(memprints_codemod::Error::bug(
            "a.py",
            "overlapping edits",
            "",
        ));
        assert_eq!(report_error(&bug, &mut out), ExitStatus::InternalError);
        let user =
            anyhow::Error::from(memprints_codemod::Error::NotInstrumented { root: "/t".into() });
        assert_eq!(report_error(&user, &mut out), ExitStatus::Error);
        let text = out.stderr_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("error: internal error: a.py: overlapping edits"),
            "{text}"
        );
        assert!(lines[0].contains("please report it"), "{text}");
        assert!(
            lines[1].starts_with("error: /t: nothing to update"),
            "{text}"
        );
        assert_ne!(ExitStatus::InternalError.code(), ExitStatus::Error.code());
    }
}
