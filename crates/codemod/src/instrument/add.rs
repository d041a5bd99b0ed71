//! `add`'s planner: runs every group of [`super::GROUPS`] over its target file in memory. The
//! caller ([`crate::commands`]) then checks each rewritten file (it parses, it is stable under
//! the repository's ruff format settings, and `strip` gives back the original bytes) before
//! anything may be written.

use ruff_python_ast::Stmt;

use super::group::Group;
use super::groups_of;
use super::vocabulary::Vocabulary;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::pithtrain::{PerTarget, Repo, Target};
use memprints_python::PySource;
use memprints_python::edit::FileEdits;
use memprints_python::edit::format::FormatSettings;
use std::sync::Arc;

/// What one group put where, for the summary.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The skill's group id, e.g. `4` or `5B-5E`.
    pub group: &'static str,
    /// Where the code went, in a few words.
    pub what: String,
    /// The log labels the user will see from it.
    pub labels: Vec<String>,
}

impl Placed {
    fn new(group: &Group, words: &[(&str, String)]) -> Self {
        let words: Vec<(&str, &str)> = words.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Placed {
            group: group.id,
            what: crate::template::fill(group.summary, &words),
            labels: group.labels().iter().map(|l| l.to_string()).collect(),
        }
    }
}

/// One file's planned change.
#[derive(Debug, Clone)]
pub struct FileChange {
    /// Path relative to the repository root.
    pub rel: String,
    /// The text as read.
    pub original: String,
    /// The text to write.
    pub updated: String,
    /// What went into it.
    pub placed: Vec<Placed>,
    /// Whether the original was stable under the repository's ruff format settings (then the
    /// rewritten file must be too, and the skill's ruff step may run on it).
    pub was_formatted: bool,
}

/// Every file `add` will change.
#[derive(Debug, Clone)]
pub struct AddPlan {
    /// The model, as the user typed it.
    pub model: String,
    /// The ranks, detail layers and snapshot folder.
    pub params: Params,
    /// The six files' changes.
    pub files: PerTarget<FileChange>,
}

impl AddPlan {
    /// The files whose text changes, as replacements for [`memprints_commit::write_all`].
    pub fn replacements(&self) -> Vec<memprints_commit::Replacement<'_>> {
        self.files
            .iter()
            .filter(|f| f.updated != f.original)
            .map(|f| memprints_commit::Replacement {
                rel: &f.rel,
                expected: &f.original,
                updated: &f.updated,
            })
            .collect()
    }
}

/// Plans the instrumentation of `model` on clean sources; reads each file once.
pub fn plan(repo: &Repo, model: &str, params: &Params) -> Result<AddPlan> {
    let sources = repo.read_targets(model)?;
    repo.check_version(&sources[Target::Execution])?;
    plan_sources(&repo.settings, model, params, &sources)
}

/// Plans over already-read sources.
pub fn plan_sources(
    settings: &FormatSettings,
    model: &str,
    params: &Params,
    sources: &PerTarget<Arc<PySource>>,
) -> Result<AddPlan> {
    let mut files = plan_files(settings, params, sources).into_iter();
    Ok(AddPlan {
        model: model.to_string(),
        params: params.clone(),
        files: PerTarget::try_from_fn(|_| files.next().expect("one result per target"))?,
    })
}

/// Plans each file on its own (on all cores: the six are independent), so one file's failure
/// leaves the others' plans usable.
pub fn plan_files(
    settings: &FormatSettings,
    params: &Params,
    sources: &PerTarget<Arc<PySource>>,
) -> PerTarget<Result<FileChange>> {
    let results: Vec<Result<FileChange>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .entries()
            .map(|(target, src)| scope.spawn(move || plan_file(settings, params, target, src)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a planning thread panicked"))
            .collect()
    });
    let mut results = results.into_iter();
    PerTarget::from_fn(|_| results.next().expect("one result per target"))
}

/// Plans the groups of `target` on its file.
pub fn plan_file(
    settings: &FormatSettings,
    params: &Params,
    target: Target,
    src: &PySource,
) -> Result<FileChange> {
    require_torch(target, src)?;
    let mut edits = FileEdits::new(src, settings);
    let mut placed = Vec::new();
    for group in groups_of(target) {
        let words = (group.insert)(&mut edits, params)?;
        placed.push(Placed::new(group, &words));
    }
    Ok(FileChange {
        rel: src.rel.clone(),
        original: src.text.clone(),
        updated: edits.apply()?,
        placed,
        was_formatted: false,
    })
}

/// Plans one group alone on `src` and gives the rewritten text.
pub fn plan_group(
    group: &Group,
    src: &PySource,
    settings: &FormatSettings,
    params: &Params,
) -> Result<String> {
    let mut edits = FileEdits::new(src, settings);
    (group.insert)(&mut edits, params)?;
    Ok(edits.apply()?)
}

/// Refuses a file of `target` whose inserted code needs `torch` when it does not import it.
pub(crate) fn require_torch(target: Target, src: &PySource) -> Result<()> {
    if Vocabulary::get().needs_torch(target) && !binds_torch(src) {
        return Err(Error::TorchNotImported {
            file: src.rel.clone(),
        });
    }
    Ok(())
}

/// True when a top-level `import torch` (or `import torch.x`, which binds `torch` too) exists.
fn binds_torch(src: &PySource) -> bool {
    src.module.body.iter().any(|stmt| match stmt {
        Stmt::Import(import) => import.names.iter().any(|alias| {
            let name = alias.name.as_str();
            (name == "torch" || name.starts_with("torch."))
                && alias.asname.as_ref().is_none_or(|a| a.as_str() == "torch")
        }),
        _ => false,
    })
}

/// Checks that a planned file parses and, where the original was stable under the repository's
/// ruff format settings, that the rewritten one is too; records which it was.
pub fn check_formatting(settings: &FormatSettings, file: &mut FileChange) -> Result<PySource> {
    let parsed = PySource::parse(file.rel.clone(), file.updated.clone())?;
    let format_error = |message| memprints_python::Error::Format {
        file: file.rel.clone(),
        message,
    };
    file.was_formatted = settings.is_stable(&file.updated).map_err(format_error)?;
    // The original's stability matters only when the result is not stable: then either the
    // user's file was not formatted to begin with, or memprints inserted something unstable.
    if !file.was_formatted && settings.is_stable(&file.original).unwrap_or(false) {
        let formatted = settings.format_module(&file.updated).map_err(|message| {
            memprints_python::Error::Format {
                file: file.rel.clone(),
                message,
            }
        })?;
        return Err(Error::bug(
            &file.rel,
            "after instrumentation the file would not be stable under ruff format",
            &crate::diff::unified(&file.rel, &file.updated, &formatted),
        ));
    }
    Ok(parsed)
}
