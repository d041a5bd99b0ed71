//! `memprints snapshot`: a thin wrapper around [`crate::snapshot::cli`], which keeps its
//! arguments and `execute` for now. Here: `--out` is checked against the inputs first, and the
//! exit code (1: some inputs unreadable) becomes an [`ExitStatus`].

use std::io::Write;

use super::args::check_out_not_input;
use super::{ExitStatus, Output};
pub use crate::snapshot::cli::SnapshotArgs;
use crate::snapshot::cli::SnapshotCommand;

/// Runs `snapshot` or `snapshot diff`.
pub fn run(args: SnapshotArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    match &args.command {
        Some(SnapshotCommand::Diff { a, b, output }) => {
            if let Some(path) = &output.out {
                check_out_not_input(path, &[a.clone(), b.clone()])?;
            }
        }
        None => {
            if let Some(path) = &args.output.out {
                check_out_not_input(path, &args.inputs)?;
            }
        }
    }
    out.flush()?;
    Ok(match crate::snapshot::cli::execute(args)? {
        0 => ExitStatus::Success,
        _ => ExitStatus::Failure,
    })
}
