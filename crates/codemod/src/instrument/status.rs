//! `status`: what instrumentation a tree holds, per file and group, and the model, ranks, detail
//! layers and snapshot folder in effect — read from the tree alone.
//!
//! A group's `found` / `expected` count its marker blocks ([`super::Group::markers`]): blocks
//! `add` places a fixed number of times, found by their signature (a label or a line only that
//! block has; see [`Vocabulary::signature`]). The ranks, detail layers and snapshot folder are
//! read back from the template lines that hold them ([`Vocabulary::read_back`]). Every file
//! with markers is then [`verify`]-ed: one the user edited inside inserted code is `edited`, with
//! the lines, never `complete`. A target file that cannot be read (or is not UTF-8) is an error;
//! one that does not exist is named `missing`.

use std::sync::Arc;

use serde::Serialize;

use super::verify::{self, FileCheck, Verdict};
use super::vocabulary::Vocabulary;
use super::{GROUPS, Group, groups_of};
use crate::error::{Error, Result};
use crate::params::{Params, parse_python_int_collection};
use crate::pithtrain::{self, PerTarget, Repo, Target};
use memprints_python::PySource;

/// Whether a group's code is all there, partly there, or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Every marker block is there.
    Complete,
    /// Some are.
    Partial,
    /// None is.
    Absent,
    /// The group's code is there, but the user edited inside its file's inserted code (a
    /// group's state only; the tree is then `partial`).
    Edited,
}

/// One group in one file.
#[derive(Debug, Clone, Serialize)]
pub struct GroupStatus {
    /// The group's id.
    pub group: &'static str,
    /// Its state.
    pub state: State,
    /// Marker blocks found.
    pub found: usize,
    /// Marker blocks a complete instrumentation has.
    pub expected: usize,
}

/// One file.
#[derive(Debug, Clone, Serialize)]
pub struct FileStatus {
    /// Path relative to the root (`pithtrain/models/<model>.py` when no model is instrumented).
    pub path: String,
    /// Its groups, in the skill's order.
    pub groups: Vec<GroupStatus>,
    /// The file does not exist.
    pub missing: bool,
    /// Line ranges (1-based, inclusive) that differ from what memprints inserted, when the user
    /// edited inside inserted code; empty when inserted lines were only deleted. `null` when
    /// the file holds what memprints inserted (or nothing).
    pub edited: Option<Vec<(usize, usize)>>,
    /// Why the file's instrumentation cannot be checked against `add`, when it cannot.
    pub unverifiable: Option<String>,
    /// The verification itself, for `remove`.
    #[serde(skip)]
    pub check: Option<FileCheck>,
}

/// The whole tree.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `complete`, `partial` (or inconsistent) or `absent`.
    pub state: State,
    /// Instrumented model(s), as users type them.
    pub models: Vec<String>,
    /// The printing ranks, when they can be read.
    pub ranks: Option<Vec<u32>>,
    /// The detail layers, when they can be read.
    pub detail_layers: Option<Vec<u32>>,
    /// The snapshot folder, when it can be read.
    pub snapshot_dir: Option<String>,
    /// The six files.
    pub files: Vec<FileStatus>,
    /// Values that differ between files (two `add`s with different ranks), one line each:
    /// `ranks: {0} in a.py, {1} in b.py`. The tree is then `partial`; `add --on-existing update`
    /// makes them one again.
    pub inconsistent: Vec<String>,
}

impl Status {
    /// The parameters in effect, when every one of them could be read.
    pub fn params(&self) -> Option<Params> {
        Some(Params {
            ranks: self.ranks.clone()?,
            detail_layers: self.detail_layers.clone()?,
            snapshot_dir: self.snapshot_dir.clone()?,
        })
    }

    /// The single instrumented model, if there is exactly one.
    pub fn model(&self) -> Option<&str> {
        match self.models.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// Marker blocks of `group` found in `text`, and expected. A block found more than twice as
/// often as expected counts as twice, so a doubled instrumentation reads as partial.
fn count(group: &Group, text: &str) -> (usize, usize) {
    let vocabulary = Vocabulary::get();
    group
        .markers
        .iter()
        .fold((0, 0), |(found, expected), marker| {
            let n = vocabulary.count(group.template, marker.block, text);
            (found + n.min(marker.times * 2), expected + marker.times)
        })
}

/// The text of `rel`: `None` when it does not exist; an error when it cannot be read or is not
/// UTF-8.
fn read_text(repo: &Repo, rel: &str) -> Result<Option<String>> {
    let path = repo.root.join(rel);
    match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| Error::NotUtf8 {
                file: rel.to_string(),
                offset: e.utf8_error().valid_up_to(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// The values `add` uses when none can be read back (they change nothing in a file that holds
/// none of them).
fn default_params() -> Params {
    Params::defaults()
}

/// Reads the instrumentation state of `repo`.
pub fn scan(repo: &Repo) -> Result<Status> {
    let mut models = Vec::new();
    let mut model_files: Vec<(String, Option<String>)> = Vec::new();
    for model in repo.models() {
        let rel = repo.model_file(&model)?;
        let text = read_text(repo, &rel)?;
        if let Some(text) = &text
            && groups_of(Target::Model).any(|g| count(g, text).0 > 0)
        {
            models.push(model);
            model_files.push((rel, Some(text.clone())));
        }
    }
    if model_files.is_empty() {
        model_files.push((format!("{}/<model>.py", pithtrain::MODELS_DIR), None));
    }
    let mut files: Vec<(Target, String, Option<String>)> = Vec::new();
    for target in Target::ALL {
        match target.fixed_path() {
            Some(rel) => files.push((target, rel.to_string(), read_text(repo, rel)?)),
            None => files.extend(
                model_files
                    .iter()
                    .map(|(rel, text)| (target, rel.clone(), text.clone())),
            ),
        }
    }
    // Through the checkout, so a file `add` parses anyway is parsed once.
    let parsed: Vec<Option<Arc<PySource>>> = files
        .iter()
        .map(|(_, rel, text)| text.as_ref().and_then(|_| repo.read(rel).ok()))
        .collect();
    let by_target: PerTarget<Option<&PySource>> = PerTarget::from_fn(|target| {
        files
            .iter()
            .zip(&parsed)
            .find(|((t, _, _), _)| *t == target)
            .and_then(|(_, src)| src.as_deref())
    });
    let vocabulary = Vocabulary::get();
    let list = |placeholder: &str| {
        vocabulary
            .read_back(placeholder, &by_target)
            .and_then(|literal| parse_python_int_collection(&literal))
    };
    let ranks = list("RANKS");
    let detail_layers = list("DETAIL_LAYERS");
    let snapshot_dir = vocabulary.read_back("SNAPSHOT_DIR", &by_target);
    let defaults = default_params();
    let fallback = Params {
        ranks: ranks.clone().unwrap_or(defaults.ranks),
        detail_layers: detail_layers.clone().unwrap_or(defaults.detail_layers),
        snapshot_dir: snapshot_dir.clone().unwrap_or(defaults.snapshot_dir),
    };
    let statuses: Vec<FileStatus> = files
        .iter()
        .zip(&parsed)
        .map(|((target, rel, text), src)| {
            file_status(
                repo,
                *target,
                rel,
                text.as_deref(),
                src.as_deref(),
                &fallback,
            )
        })
        .collect();
    debug_assert!(statuses.iter().map(|f| f.groups.len()).sum::<usize>() >= GROUPS.len());
    let states: Vec<State> = statuses
        .iter()
        .flat_map(|f| f.groups.iter().map(|g| g.state))
        .collect();
    let mut state = if states.iter().all(|s| *s == State::Complete) {
        State::Complete
    } else if states.iter().all(|s| *s == State::Absent) {
        State::Absent
    } else {
        State::Partial
    };
    if models.len() > 1 {
        state = State::Partial;
    }
    let inconsistent = inconsistencies(&files, &parsed, &statuses);
    let unverifiable = statuses.iter().any(|f| f.unverifiable.is_some());
    if (!inconsistent.is_empty() || unverifiable) && state == State::Complete {
        state = State::Partial;
    }
    if state == State::Absent {
        return Ok(Status {
            state,
            models,
            ranks: None,
            detail_layers: None,
            snapshot_dir: None,
            files: statuses,
            inconsistent,
        });
    }
    Ok(Status {
        state,
        models,
        ranks,
        detail_layers,
        snapshot_dir,
        files: statuses,
        inconsistent,
    })
}

/// For each value read back, the files that hold memprints' code and disagree on it.
fn inconsistencies(
    files: &[(Target, String, Option<String>)],
    parsed: &[Option<Arc<PySource>>],
    statuses: &[FileStatus],
) -> Vec<String> {
    let vocabulary = Vocabulary::get();
    let mut lines = Vec::new();
    for (placeholder, what) in [
        ("RANKS", "ranks"),
        ("DETAIL_LAYERS", "detail layers"),
        ("SNAPSHOT_DIR", "snapshot folder"),
    ] {
        let found: Vec<(String, &str)> = files
            .iter()
            .zip(parsed)
            .zip(statuses)
            .filter(|(_, status)| status.check.is_some())
            .filter_map(|(((target, rel, _), src), _)| {
                let value = vocabulary.read_back_in(placeholder, *target, src.as_ref()?)?;
                Some((value, rel.as_str()))
            })
            .collect();
        if found.iter().any(|(value, _)| *value != found[0].0) {
            let each: Vec<String> = found
                .iter()
                .map(|(value, rel)| format!("{value} in {rel}"))
                .collect();
            lines.push(format!("{what} differ between files: {}", each.join(", ")));
        }
    }
    lines
}

/// One file's groups, checked against `add` when it holds any of their markers.
fn file_status(
    repo: &Repo,
    target: Target,
    rel: &str,
    text: Option<&str>,
    src: Option<&PySource>,
    fallback: &Params,
) -> FileStatus {
    let text_or_empty = text.unwrap_or_default();
    let mut groups: Vec<GroupStatus> = groups_of(target)
        .map(|group| {
            let (found, expected) = count(group, text_or_empty);
            GroupStatus {
                group: group.id,
                state: match found {
                    0 => State::Absent,
                    n if n == expected => State::Complete,
                    _ => State::Partial,
                },
                found,
                expected,
            }
        })
        .collect();
    let mut status = FileStatus {
        path: rel.to_string(),
        groups: Vec::new(),
        missing: text.is_none() && target != Target::Model,
        edited: None,
        unverifiable: None,
        check: None,
    };
    if groups.iter().any(|g| g.found > 0) {
        let check = match (text, src) {
            (Some(_), Some(src)) => verify::check(&repo.settings, target, src, fallback),
            (Some(text), None) => FileCheck {
                target,
                rel: rel.to_string(),
                current: text.to_string(),
                stripped: None,
                verdict: Verdict::Unverifiable {
                    reason: PySource::parse(rel, text.to_string())
                        .err()
                        .map_or_else(String::new, |e| e.to_string()),
                },
            },
            (None, _) => unreachable!("a missing file has no markers"),
        };
        match &check.verdict {
            Verdict::Exact => {}
            Verdict::Edited { lines } => status.edited = Some(lines.clone()),
            Verdict::Unverifiable { reason } => status.unverifiable = Some(reason.clone()),
        }
        if status.edited.is_some() {
            for group in groups.iter_mut().filter(|g| g.found > 0) {
                group.state = State::Edited;
            }
        }
        status.check = Some(check);
    }
    status.groups = groups;
    status
}
