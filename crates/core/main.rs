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
    cap_malloc_arenas();
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

/// Caps glibc's malloc at 8 arenas, before any thread starts. By default each thread gets an
/// arena of its own, up to 8 per core, and a report on a folder reads on every core; each
/// arena keeps free space of its own, so the more cores, the more memory. 10,000 logs, text,
/// peak RSS: 194 MiB on 2 cores; on 16, 234-242 MiB with glibc's default against the 256 MiB
/// the report must stay under, 212-221 MiB with 8. Past 8 busy threads the arenas' share stops
/// growing. The cap costs time where threads share arenas (16 cores, that folder: 0.69 s median
/// against 0.56 s; the 1,024-file one stays at 0.65-0.74x grep's time). 4 arenas saved little
/// more and cost more time; 1 arena (until b50f904) cost 15% of the time in its lock
/// (bench/results/scale-2026-12-05-device16-arenas.txt). A limit set in the environment
/// (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`) is left to rule.
fn cap_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none()
        && !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.arena_max"))
    {
        // SAFETY: mallopt only sets a parameter of the allocator; no thread runs yet.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 8);
        }
    }
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
