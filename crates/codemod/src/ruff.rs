//! The skill's last step: `ruff check --fix` and `ruff format` on the files memprints changed,
//! with the external `ruff` from PATH (skipped, with a note, when there is none).

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::instrument::{AddPlan, FileChange};

/// What running ruff did. In JSON: `"status": "missing"`, or `"status": "ran"` with `changed`
/// and `failures`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RuffOutcome {
    /// ruff is not on PATH.
    Missing,
    /// ruff ran; these files changed (they should not).
    Ran {
        /// The files, relative to the root, whose bytes ruff changed.
        changed: Vec<String>,
        /// One line per ruff command that failed: `ruff check: <its output>`.
        failures: Vec<String>,
    },
}

/// Finds `ruff` on PATH.
pub fn find_ruff() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ruff"))
        .find(|p| p.is_file())
}

/// Runs `ruff check --fix` then `ruff format` on `files` (relative to `root`); with no files it
/// runs nothing (ruff given no file would check the whole tree).
pub fn run(root: &Path, files: &[String]) -> RuffOutcome {
    let Some(ruff) = find_ruff() else {
        return RuffOutcome::Missing;
    };
    if files.is_empty() {
        return RuffOutcome::Ran {
            changed: Vec::new(),
            failures: Vec::new(),
        };
    }
    let before: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap_or_default())
        .collect();
    let mut failures = Vec::new();
    for args in [
        &["check", "--fix", "--quiet", "--no-cache"][..],
        &["format", "--quiet", "--no-cache"][..],
    ] {
        match Command::new(&ruff)
            .args(args)
            .args(files)
            .current_dir(root)
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => failures.push(format!(
                "ruff {}: {}",
                args[0],
                String::from_utf8_lossy(&out.stdout).trim().to_string()
                    + String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => failures.push(format!("ruff {}: {e}", args[0])),
        }
    }
    let changed = files
        .iter()
        .zip(before)
        .filter(|(f, text)| std::fs::read_to_string(root.join(f)).unwrap_or_default() != *text)
        .map(|(f, _)| f.clone())
        .collect();
    RuffOutcome::Ran { changed, failures }
}

/// The ruff step after a written `add`: which changed files it skipped, and what ruff did on
/// the others.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RuffStep {
    /// Changed files that were not ruff-formatted before `add`: ruff would reformat the user's
    /// own lines in them, so the step leaves them out.
    pub skipped: Vec<String>,
    /// What running ruff on the rest did.
    #[serde(flatten)]
    pub outcome: RuffOutcome,
}

/// Runs the skill's ruff step on the files `plan` changed that were ruff-formatted before.
pub fn after_add(root: &Path, plan: &AddPlan) -> RuffStep {
    let (formatted, skipped): (Vec<&FileChange>, Vec<&FileChange>) = plan
        .files
        .iter()
        .filter(|f| f.updated != f.original)
        .partition(|f| f.was_formatted);
    let rel = |files: Vec<&FileChange>| files.iter().map(|f| f.rel.clone()).collect::<Vec<_>>();
    let skipped = rel(skipped);
    RuffStep {
        skipped,
        outcome: run(root, &rel(formatted)),
    }
}

impl RuffStep {
    /// True when ruff changed a file memprints wrote, or failed.
    pub fn has_warnings(&self) -> bool {
        matches!(&self.outcome, RuffOutcome::Ran { changed, failures } if !changed.is_empty() || !failures.is_empty())
    }
}

/// One line each: the skipped files, then ruff's outcome.
impl fmt::Display for RuffStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.skipped {
            writeln!(
                f,
                "note: {file} was not ruff-formatted before; skipped the ruff step on it so your own lines stay as they were"
            )?;
        }
        match &self.outcome {
            RuffOutcome::Missing => writeln!(
                f,
                "note: ruff is not on PATH; skipped `ruff check --fix` and `ruff format`"
            ),
            RuffOutcome::Ran { changed, failures } => {
                if changed.is_empty() && failures.is_empty() {
                    writeln!(f, "ruff check --fix and ruff format: no changes")?;
                }
                for file in changed {
                    writeln!(
                        f,
                        "warning: ruff changed {file} after memprints wrote it (please report this)"
                    )?;
                }
                for failure in failures {
                    writeln!(f, "warning: {failure}")?;
                }
                Ok(())
            }
        }
    }
}
