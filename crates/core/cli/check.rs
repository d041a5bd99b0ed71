//! `memprints check [FILES…]`: fails (exit 1) when memory prints are in the given files or, with
//! none given, in the tree's target files, naming each file and its groups; a tree with none of
//! the target files is an error (exit 1), not a clean tree. The
//! `memprints-check` pre-commit hook runs it on the staged Python files.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::args::{RepoArg, input_file};
use super::{ExitStatus, Output};
use memprints_codemod::check;

/// `check`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Files to check [default: the six files of the tree that `add` edits].
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
}

/// Runs `check`.
pub fn run(args: CheckArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    let findings = if args.files.is_empty() {
        check::tree(&args.repo.open()?)?
    } else {
        for file in &args.files {
            input_file(
                "FILE",
                file,
                "pass Python files to check, e.g. pithtrain/modules/training.py, or none to check the six files `add` edits",
            )?;
        }
        check::files(&args.files)?
    };
    if findings.is_empty() {
        return Ok(ExitStatus::Success);
    }
    for finding in &findings {
        writeln!(out, "{finding}")?;
    }
    writeln!(
        out,
        "memprints: memory prints in {} file{}; take them out with `memprints remove` before committing",
        findings.len(),
        if findings.len() == 1 { "" } else { "s" }
    )?;
    Ok(ExitStatus::Failure)
}
