//! `memprints status`: what instrumentation the tree holds, per file and group, with the ranks,
//! detail layers and snapshot folder in effect, whether an interrupted run left anything, and
//! whether another run is changing the tree right now.

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

/// Runs `status`: 0 fully instrumented, 1 clean, 2 partial or an interrupted run pending, 75
/// another run changing the tree right now (what it left is that run's work, not an interruption).
pub fn run(args: StatusArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    let repo = args.repo.open()?;
    // The lock is read before and after the rest: a run that starts or ends meanwhile is still
    // seen, so its journal is never called an interrupted run's.
    let busy_before = memprints_commit::holder(&repo.root);
    let status = status::scan(&repo)?;
    let pending =
        memprints_commit::pending(&repo.root, &memprints_codemod::pithtrain::TARGET_FOLDERS);
    let busy = busy_before.or_else(|| memprints_commit::holder(&repo.root));
    let pending = pending.filter(|_| busy.is_none());
    if args.json {
        let mut json = serde_json::to_value(&status)?;
        if let Some(busy) = &busy {
            json["busy"] = serde_json::to_value(busy)?;
        }
        if let Some(pending) = &pending {
            json["interrupted"] = pending.to_string().into();
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        if let Some(busy) = &busy {
            writeln!(out, "memprints: {busy}")?;
        }
        let text = StatusText {
            root: &repo.root,
            status: &status,
            pending: pending.as_ref(),
        };
        write!(out, "{text}")?;
    }
    Ok(match status.state {
        _ if busy.is_some() => ExitStatus::Busy,
        _ if pending.is_some() => ExitStatus::Partial,
        State::Complete => ExitStatus::Success,
        State::Absent => ExitStatus::Failure,
        State::Partial | State::Edited => ExitStatus::Partial,
    })
}
