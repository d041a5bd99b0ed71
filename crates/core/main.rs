//! The `memprints` binary: parses the command line, runs the command
//! ([`memprints::cli::run`]), and ends the process the one way every command ends: one line on
//! stderr for an error or a panic (never a backtrace), and the exit code of its
//! [`ExitStatus`](memprints::cli::ExitStatus).

use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::ExitCode;

use clap::Parser;
use memprints::cli::{self, Cli, ExitStatus, Output, exit};

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(exit::report_panic));
    // Usage errors, --help and --version: clap prints them and exits (2, 0, 0).
    let cli = Cli::parse();
    cli.color.apply();
    let mut out = Output::stdio();
    out.allow_pager(!cli.no_pager);
    let status = match catch_unwind(AssertUnwindSafe(|| run(cli, &mut out))) {
        Ok(status) => status,
        // The hook has said what the panic was.
        Err(_) => ExitStatus::InternalError,
    };
    out.finish();
    status.into()
}

/// Runs the command and flushes stdout; an error becomes its line on stderr.
fn run(cli: Cli, out: &mut Output) -> ExitStatus {
    let result = cli::run(cli, out).and_then(|status| {
        out.flush()?;
        Ok(status)
    });
    match result {
        Ok(status) => status,
        Err(err) => exit::report_error(&err, out),
    }
}
