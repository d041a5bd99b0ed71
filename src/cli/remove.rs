//! `memprints remove`: takes every memory print out again, from the tree alone, keeping the
//! user's own edits; a file edited inside inserted code stays as it is (exit code 2).

use std::io::Write;

use clap::Args;

use super::args::{RepoArg, lock_and_recover};
use super::{ExitStatus, Output, print_diffs};
use crate::codemod::{self, summary::RemoveSummary};
use crate::write;

/// `remove`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct RemoveArgs {
    /// Print the unified diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print what was restored as JSON (see the README's "JSON output").
    #[arg(long)]
    pub json: bool,
    /// Print no listing; files left as they are are still named on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
}

/// Runs `remove`.
pub fn run(args: RemoveArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    write::ignore_sigxfsz();
    let repo = args.repo.open()?;
    let lock = lock_and_recover(&repo.root, "remove", out)?;
    let summary = match codemod::plan_remove(&repo)? {
        None => RemoveSummary::nothing(repo.root.clone()),
        Some(removal) => {
            let replacements = removal.replacements();
            if !args.dry_run {
                write::write_all(&lock, &replacements, &write::Options::default())?;
            } else if !args.json {
                print_diffs(&replacements, out)?;
            }
            RemoveSummary::of_removal(repo.root.clone(), &removal, !args.dry_run)
        }
    };
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
    } else if !args.quiet {
        write!(out, "{summary}")?;
    }
    for file in &summary.files {
        if let Some(why) = &file.left_alone {
            out.note(format_args!("left {} as it is: {why}", file.path));
        }
    }
    Ok(if summary.is_partial() {
        ExitStatus::Partial
    } else {
        ExitStatus::Success
    })
}
