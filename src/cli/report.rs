//! `memprints report`: a thin wrapper around [`crate::report::cli`], which keeps its arguments
//! and `execute` for now. Here: `--out` is checked against the inputs first, and the exit code
//! becomes an [`ExitStatus`]; a closed stdout it meets comes back as an error the dispatcher
//! turns into a quiet success.

use std::io::Write;

use super::args::check_out_not_input;
use super::{ExitStatus, Output};
pub use crate::report::cli::ReportArgs;

/// Runs `report`.
pub fn run(args: ReportArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    if let Some(path) = &args.out {
        check_out_not_input(path, &args.inputs)?;
    }
    out.flush()?;
    Ok(match crate::report::cli::execute(args)? {
        0 => ExitStatus::Success,
        _ => ExitStatus::Failure,
    })
}
