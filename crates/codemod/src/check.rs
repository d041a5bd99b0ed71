//! `check`: is memory-print instrumentation in these files, or in this tree? A guard for
//! commits (the `memprints-check` pre-commit hook), so prints added for one run are not
//! committed.
//!
//! It recognises the code the way `status` does, by the marker blocks of every group
//! ([`crate::instrument::Group::markers`], found by their signatures in the
//! [`Vocabulary`] read off the templates), so what `check` finds is what `status` counts and
//! `remove` takes out. A file is checked against every group, not only those of its target:
//! a committed copy of an instrumented file is caught wherever it lies.

use std::path::Path;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::instrument::GROUPS;
use crate::instrument::status;
use crate::instrument::vocabulary::Vocabulary;
use crate::pithtrain::{Repo, Target};

/// A file that holds memory prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The file, as given (or relative to the root, for a tree).
    pub file: String,
    /// The groups whose code it holds, in the skill's order.
    pub groups: Vec<&'static str>,
}

/// The groups whose marker blocks occur in `text`, in the skill's order.
pub fn groups_in(text: &str) -> Vec<&'static str> {
    let vocabulary = Vocabulary::get();
    GROUPS
        .iter()
        .filter(|group| {
            group
                .markers
                .iter()
                .any(|marker| vocabulary.count(group.template, marker.block, text) > 0)
        })
        .map(|group| group.id)
        .collect()
}

/// The given files that hold memory prints. A file that is not UTF-8 is read lossily (its
/// prints would still be text); one that cannot be read is an error.
pub fn files(paths: &[impl AsRef<Path>]) -> Result<Vec<Finding>> {
    let mut findings = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let groups = groups_in(&String::from_utf8_lossy(&bytes));
        if !groups.is_empty() {
            findings.push(Finding {
                file: path.display().to_string(),
                groups,
            });
        }
    }
    Ok(findings)
}

/// The target files of `repo` that hold memory prints, as `status` reads them; an error when
/// the tree has none of them (a wrong folder would otherwise pass as clean).
pub fn tree(repo: &Repo) -> Result<Vec<Finding>> {
    let status = status::scan(repo)?;
    let fixed = || Target::ALL.iter().filter_map(|target| target.fixed_path());
    if repo.models().is_empty() && fixed().all(|rel| !repo.root.join(rel).is_file()) {
        return Err(Error::NoTargetFiles {
            root: repo.root.clone(),
            files: status
                .files
                .iter()
                .map(|file| file.path.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Ok(status
        .files
        .iter()
        .filter_map(|file| {
            let groups: Vec<&'static str> = file
                .groups
                .iter()
                .filter(|g| g.found > 0)
                .map(|g| g.group)
                .collect();
            (!groups.is_empty()).then(|| Finding {
                file: file.path.clone(),
                groups,
            })
        })
        .collect())
}

/// `path: memory prints of group 2, 3`.
impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = if self.groups.len() == 1 { "" } else { "s" };
        write!(
            f,
            "{}: memory prints of group{s} {}",
            self.file,
            self.groups.join(", ")
        )
    }
}
