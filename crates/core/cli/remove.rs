//! `memprints remove`: takes every memory print out again, from the tree alone, keeping the
//! user's own edits, from whichever files hold prints; a file edited inside inserted code stays
//! as it is (exit code 2) unless `--force`, which takes those edits out with the prints.

use std::io::Write;

use clap::Args;

use super::args::{RepoArg, lock_and_recover};
use super::{ExitStatus, Output, print_diffs};
use memprints_codemod::{self, LeftAlone, summary::RemoveSummary};

/// `remove`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct RemoveArgs {
    /// Print the unified diff and write nothing (with --force: also the lines you edited that
    /// would go).
    #[arg(long)]
    pub dry_run: bool,
    /// Also restore files where you edited inside inserted code: your edits there go with the
    /// prints (see them first with --dry-run --force).
    #[arg(long)]
    pub force: bool,
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
    memprints_commit::ignore_sigxfsz();
    let repo = args.repo.open()?;
    let lock = lock_and_recover(&repo.root, "remove", out)?;
    let summary = match memprints_codemod::plan_remove(&repo, args.force)? {
        None => RemoveSummary::nothing(repo.root.clone()),
        Some(removal) => {
            let replacements = removal.replacements();
            if !args.dry_run {
                memprints_commit::write_all(
                    &lock,
                    &replacements,
                    &memprints_commit::Options::default(),
                )?;
                out.wrote_files(replacements.len());
            } else if !args.json {
                print_diffs(&replacements, out)?;
                for file in removal.files.iter().filter(|f| f.forced.is_some()) {
                    print_forced(file, out)?;
                }
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
            out.note(format_args!(
                "left {} as it is: {why}; undo those edits and run `memprints remove` again, or run `memprints remove --force` to take them out with the prints (`--dry-run --force` shows which lines go)",
                file.path
            ));
        }
    }
    Ok(if summary.is_partial() {
        ExitStatus::Partial
    } else {
        ExitStatus::Success
    })
}

/// For `--dry-run --force`: which of the user's lines inside inserted code go with the prints.
fn print_forced(file: &memprints_codemod::FileRemoval, out: &mut Output) -> anyhow::Result<()> {
    match &file.forced {
        Some(LeftAlone::Edited { .. }) if !file.user_lines_removed.is_empty() => {
            writeln!(
                out,
                "memprints: --force also takes out these lines of {} that you edited:",
                file.rel
            )?;
            for (line, text) in &file.user_lines_removed {
                writeln!(out, "  {}:{line}: {text}", file.rel)?;
            }
        }
        Some(why) => writeln!(
            out,
            "memprints: --force restores {} although {why}",
            file.rel
        )?,
        None => {}
    }
    Ok(())
}
