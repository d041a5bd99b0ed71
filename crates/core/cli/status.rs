//! `memprints status`: what instrumentation the tree holds, per file and group, with the ranks,
//! detail layers and snapshot folder in effect, and whether an interrupted run left anything.

use std::io::Write;

use clap::Args;

use super::args::RepoArg;
use super::{ExitStatus, Output};
use memprints_codemod::instrument::status::{self, State};
use memprints_codemod::summary::StatusText;

/// `status`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
}

/// Runs `status`: 0 fully instrumented, 1 clean, 2 partial or an interrupted run pending.
pub fn run(args: StatusArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    let repo = args.repo.open()?;
    let status = status::scan(&repo)?;
    let pending =
        memprints_commit::pending(&repo.root, &memprints_codemod::pithtrain::TARGET_FOLDERS);
    if args.json {
        let mut json = serde_json::to_value(&status)?;
        if let Some(pending) = &pending {
            json["interrupted"] = pending.to_string().into();
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        let text = StatusText {
            root: &repo.root,
            status: &status,
            pending: pending.as_ref(),
        };
        write!(out, "{text}")?;
    }
    Ok(match status.state {
        _ if pending.is_some() => ExitStatus::Partial,
        State::Complete => ExitStatus::Success,
        State::Absent => ExitStatus::Failure,
        State::Partial | State::Edited => ExitStatus::Partial,
    })
}
