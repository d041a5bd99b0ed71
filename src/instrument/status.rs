//! `status`: what instrumentation a tree holds, per file and group, and the model, ranks, detail
//! layers and snapshot folder in effect — read from the tree alone.
//!
//! A group's `found` / `expected` count its marker blocks ([`super::Group::markers`]): blocks
//! `add` places a fixed number of times, found by their signature (a label or a line only that
//! block has; see [`Vocabulary::signature`]). The ranks, detail layers and snapshot folder are
//! read back from the template lines that hold them ([`Vocabulary::read_back`]).

use serde::Serialize;

use super::vocabulary::Vocabulary;
use super::{GROUPS, Group, groups_of};
use crate::error::Result;
use crate::params::{Params, parse_python_int_collection};
use crate::pithtrain::{self, PerTarget, Repo, Target};

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

/// Reads the instrumentation state of `repo`.
pub fn scan(repo: &Repo) -> Result<Status> {
    let read = |rel: &str| std::fs::read_to_string(repo.root.join(rel)).unwrap_or_default();
    let mut models = Vec::new();
    let mut model_file = (
        format!("{}/<model>.py", pithtrain::MODELS_DIR),
        String::new(),
    );
    for model in repo.models() {
        let rel = repo.model_file(&model)?;
        let text = read(&rel);
        if groups_of(Target::Model).any(|g| count(g, &text).0 > 0) {
            models.push(model);
            model_file = (rel, text);
        }
    }
    let files: PerTarget<(String, String)> =
        PerTarget::from_fn(|target| match target.fixed_path() {
            Some(rel) => (rel.to_string(), read(rel)),
            None => model_file.clone(),
        });
    let statuses: Vec<FileStatus> = files
        .entries()
        .map(|(target, (rel, text))| FileStatus {
            path: rel.clone(),
            groups: groups_of(target)
                .map(|group| {
                    let (found, expected) = count(group, text);
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
                .collect(),
        })
        .collect();
    debug_assert_eq!(
        statuses.iter().map(|f| f.groups.len()).sum::<usize>(),
        GROUPS.len()
    );
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
    if state == State::Absent {
        return Ok(Status {
            state,
            models,
            ranks: None,
            detail_layers: None,
            snapshot_dir: None,
            files: statuses,
        });
    }
    let texts = files.as_ref().map(|_, (_, text)| text.as_str());
    let vocabulary = Vocabulary::get();
    let list = |placeholder: &str| {
        vocabulary
            .read_back(placeholder, &texts)
            .and_then(|literal| parse_python_int_collection(&literal))
    };
    Ok(Status {
        state,
        models,
        ranks: list("RANKS"),
        detail_layers: list("DETAIL_LAYERS"),
        snapshot_dir: vocabulary.read_back("SNAPSHOT_DIR", &texts),
        files: statuses,
    })
}
