//! The skill's last step, `ruff check --fix` and `ruff format`, with the external `ruff` from
//! PATH (skipped, with a note, when there is none), run so that it never touches a line the
//! user wrote.
//!
//! Contract: ruff runs on the planned text through stdin, before anything is written, and only
//! on files that were ruff-formatted before `add`. `ruff check --fix` selects only the rules
//! that flag a line memprints inserted; a result is kept only when every line it changes or
//! removes is an inserted one and `remove` still gives back the original bytes (else the
//! planned text stays and a warning says why). What ruff reports on the user's own lines is
//! named in a warning and left as it is: `add` never removes or changes a line it did not
//! insert.

use std::collections::BTreeSet;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::instrument::strip::strip;
use crate::instrument::{AddPlan, FileChange};
use crate::pithtrain::Repo;
use memprints_python::PySource;

/// What running ruff did. In JSON: `"status": "missing"`, or `"status": "ran"` with `changed`,
/// `left_to_you` and `failures`.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum RuffOutcome {
    /// ruff is not on PATH.
    Missing,
    /// ruff ran.
    Ran {
        /// The files, relative to the root, whose inserted lines ruff changed (it should not:
        /// memprints inserts ruff-clean code).
        changed: Vec<String>,
        /// What ruff reports on lines memprints did not insert, one line each, left to the user.
        left_to_you: Vec<String>,
        /// One line per ruff command that failed or whose result would have changed the user's
        /// lines: `ruff check: <why>`.
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

/// One diagnostic of `ruff check --output-format json`, the fields read.
#[derive(Debug, serde::Deserialize)]
struct Diagnostic {
    code: Option<String>,
    message: String,
    location: Location,
    end_location: Location,
    fix: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, serde::Deserialize)]
struct Location {
    row: usize,
}

impl Diagnostic {
    /// The 1-based rows its range covers.
    fn rows(&self) -> std::ops::RangeInclusive<usize> {
        self.location.row..=self.end_location.row.max(self.location.row)
    }
}

/// ruff run on one file's text through stdin, from the tree's root (so its settings apply).
struct Ruff<'a> {
    exe: &'a Path,
    root: &'a Path,
    rel: &'a str,
}

impl Ruff<'_> {
    /// Runs `ruff ARGS --stdin-filename REL -` on `text`; its stdout, or the failure's line.
    fn pipe(&self, args: &[&str], text: &str) -> Result<String, String> {
        let what = args[0];
        let mut child = Command::new(self.exe)
            .args(args)
            .args(["--no-cache", "--stdin-filename", self.rel, "-"])
            .current_dir(self.root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("ruff {what}: {e}"))?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = text.to_owned();
        let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child
            .wait_with_output()
            .map_err(|e| format!("ruff {what}: {e}"))?;
        let _ = feeder.join();
        if !out.status.success() {
            return Err(format!(
                "ruff {what} on {}: {}",
                self.rel,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        String::from_utf8(out.stdout).map_err(|e| format!("ruff {what}: {e}"))
    }

    fn diagnostics(&self, text: &str) -> Result<Vec<Diagnostic>, String> {
        let json = self.pipe(
            &[
                "check",
                "--no-fix",
                "--output-format",
                "json",
                "--exit-zero",
            ],
            text,
        )?;
        serde_json::from_str(&json).map_err(|e| format!("ruff check: unreadable output: {e}"))
    }
}

/// The 1-based lines of `updated` that are not lines of `original` (inserted or rewritten).
fn inserted_lines(original: &str, updated: &str) -> BTreeSet<usize> {
    similar::TextDiff::from_lines(original, updated)
        .ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal)
        .flat_map(|op| op.new_range())
        .map(|i| i + 1)
        .collect()
}

/// The first line of `before` that `after` changes or removes and that is not in `ours`.
fn first_foreign_change(before: &str, after: &str, ours: &BTreeSet<usize>) -> Option<usize> {
    similar::TextDiff::from_lines(before, after)
        .ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal)
        .flat_map(|op| op.old_range())
        .map(|i| i + 1)
        .find(|row| !ours.contains(row))
}

/// One file through the ruff step: the text to write, and what to say.
struct FileOutcome {
    text: String,
    changed: bool,
    left_to_you: Vec<String>,
    failures: Vec<String>,
}

fn one_file(exe: &Path, repo: &Repo, file: &FileChange) -> FileOutcome {
    let ruff = Ruff {
        exe,
        root: &repo.root,
        rel: &file.rel,
    };
    let mut outcome = FileOutcome {
        text: file.updated.clone(),
        changed: false,
        left_to_you: Vec::new(),
        failures: Vec::new(),
    };
    let ours = inserted_lines(&file.original, &outcome.text);
    let diagnostics = match ruff.diagnostics(&outcome.text) {
        Ok(d) => d,
        Err(e) => {
            outcome.failures.push(e);
            return outcome;
        }
    };
    let codes: BTreeSet<&str> = diagnostics
        .iter()
        .filter(|d| d.fix.is_some() && d.rows().any(|row| ours.contains(&row)))
        .filter_map(|d| d.code.as_deref())
        .collect();
    if !codes.is_empty() {
        let select = codes.into_iter().collect::<Vec<_>>().join(",");
        match ruff.pipe(
            &["check", "--fix", "--exit-zero", "--select", &select],
            &outcome.text,
        ) {
            Ok(fixed) => adopt(repo, file, "check --fix", fixed, &mut outcome),
            Err(e) => outcome.failures.push(e),
        }
    }
    match ruff.pipe(&["format"], &outcome.text) {
        Ok(formatted) => adopt(repo, file, "format", formatted, &mut outcome),
        Err(e) => outcome.failures.push(e),
    }
    let ours = inserted_lines(&file.original, &outcome.text);
    match ruff.diagnostics(&outcome.text) {
        Ok(diagnostics) => outcome.left_to_you = left_to_you(&file.rel, &diagnostics, &ours),
        Err(e) => outcome.failures.push(e),
    }
    outcome
}

/// Keeps `candidate` when it changes only inserted lines and `remove` still restores the
/// original; else says why not.
fn adopt(repo: &Repo, file: &FileChange, step: &str, candidate: String, outcome: &mut FileOutcome) {
    if candidate == outcome.text {
        return;
    }
    let ours = inserted_lines(&file.original, &outcome.text);
    if let Some(row) = first_foreign_change(&outcome.text, &candidate, &ours) {
        outcome.failures.push(format!(
            "ruff {step} would change your line {}:{row}; left as memprints wrote it",
            file.rel
        ));
        return;
    }
    let restores = PySource::parse(file.rel.clone(), candidate.clone())
        .map_err(crate::Error::from)
        .and_then(|parsed| strip(&parsed, &repo.settings))
        .is_ok_and(|restored| restored == file.original);
    if !restores {
        outcome.failures.push(format!(
            "ruff {step} would change {} so that `remove` could not restore it; left as \
             memprints wrote it",
            file.rel
        ));
        return;
    }
    outcome.text = candidate;
    outcome.changed = true;
}

/// What ruff reports on the user's own lines, one line each.
fn left_to_you(rel: &str, diagnostics: &[Diagnostic], ours: &BTreeSet<usize>) -> Vec<String> {
    diagnostics
        .iter()
        .filter(|d| !d.rows().any(|row| ours.contains(&row)))
        .map(|d| {
            let code = d.code.as_deref().unwrap_or("a syntax error");
            let verb = if d.fix.is_some() {
                "would also fix"
            } else {
                "also reports"
            };
            format!(
                "ruff {verb} {code} ({}) at {rel}:{}, which memprints leaves to you",
                d.message, d.location.row
            )
        })
        .collect()
}

/// The ruff step before a written `add`: which changed files it skipped, and what ruff did on
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

/// Runs the skill's ruff step on the planned text of the files `plan` changes that were
/// ruff-formatted before, keeping in `plan` only what changes inserted lines (see the module
/// doc). Call it before writing.
pub fn before_write(repo: &Repo, plan: &mut AddPlan) -> RuffStep {
    let (formatted, skipped): (Vec<&mut FileChange>, Vec<&mut FileChange>) = plan
        .files
        .iter_mut()
        .filter(|f| f.updated != f.original)
        .partition(|f| f.was_formatted);
    let skipped = skipped.iter().map(|f| f.rel.clone()).collect();
    let Some(exe) = find_ruff() else {
        return RuffStep {
            skipped,
            outcome: RuffOutcome::Missing,
        };
    };
    let (mut changed, mut left, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for file in formatted {
        let outcome = one_file(&exe, repo, file);
        if outcome.changed {
            changed.push(file.rel.clone());
            file.updated = outcome.text;
        }
        left.extend(outcome.left_to_you);
        failures.extend(outcome.failures);
    }
    RuffStep {
        skipped,
        outcome: RuffOutcome::Ran {
            changed,
            left_to_you: left,
            failures,
        },
    }
}

impl RuffStep {
    /// True unless ruff ran on every file and changed nothing: what `add` says without
    /// `--verbose`.
    pub fn says_something(&self) -> bool {
        self.has_warnings()
            || !self.skipped.is_empty()
            || matches!(self.outcome, RuffOutcome::Missing)
    }

    /// True when ruff changed a file memprints wrote, failed, or reports the user's lines.
    pub fn has_warnings(&self) -> bool {
        matches!(&self.outcome, RuffOutcome::Ran { changed, left_to_you, failures }
            if !changed.is_empty() || !left_to_you.is_empty() || !failures.is_empty())
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
            RuffOutcome::Ran {
                changed,
                left_to_you,
                failures,
            } => {
                if !self.has_warnings() {
                    writeln!(f, "ruff check --fix and ruff format: no changes")?;
                }
                for file in changed {
                    writeln!(
                        f,
                        "warning: ruff changed memprints' inserted lines in {file} (please report this)"
                    )?;
                }
                for line in left_to_you.iter().chain(failures) {
                    writeln!(f, "warning: {line}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserted_lines_are_the_lines_the_original_lacks() {
        let original = "import json\n\nx = 1\n";
        let updated = "import json\n\nprint(1)\nx = 1\ny = 2\n";
        assert_eq!(inserted_lines(original, updated), BTreeSet::from([3, 5]));
    }

    #[test]
    fn a_change_to_an_inserted_line_is_ours_and_to_any_other_is_not() {
        let written = "import json\nprint( 1)\nx = 1\n";
        let ours = BTreeSet::from([2]);
        assert_eq!(
            first_foreign_change(written, "import json\nprint(1)\nx = 1\n", &ours),
            None
        );
        assert_eq!(
            first_foreign_change(written, "print( 1)\nx = 1\n", &ours),
            Some(1)
        );
        assert_eq!(first_foreign_change(written, written, &ours), None);
    }
}
