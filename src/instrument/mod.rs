//! `add`'s planner: runs every instrumentation group over the six files in memory, then checks
//! each rewritten file (it parses, it is stable under the repository's ruff format settings,
//! and `remove` gives back the original bytes) before anything may be written.

pub mod anchor;
mod checkpoint;
mod distributed;
mod helpers;
mod layers;
pub mod model;
mod pipeline;
mod setup;
mod snapshot;

use crate::edit::FileEdits;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::pithtrain::{self, Repo};
use crate::python::PySource;

/// What one group put where, for the summary.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The skill's group number, e.g. `4` or `5B-5E`.
    pub group: &'static str,
    /// Where the code went, in a few words.
    pub what: String,
    /// The log labels the user will see from it.
    pub labels: Vec<String>,
}

impl Placed {
    fn new(group: &'static str, what: &str) -> Self {
        Placed {
            group,
            what: what.to_string(),
            labels: Vec::new(),
        }
    }

    fn with_labels(group: &'static str, what: &str, labels: &[&str]) -> Self {
        Placed {
            group,
            what: what.to_string(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
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
pub struct Plan {
    pub model: String,
    pub params: Params,
    pub files: Vec<FileChange>,
}

impl Plan {
    /// The files whose text changes, as replacements for [`crate::write::write_all`].
    pub fn replacements(&self) -> Vec<crate::write::Replacement<'_>> {
        self.files
            .iter()
            .filter(|f| f.updated != f.original)
            .map(|f| crate::write::Replacement {
                rel: &f.rel,
                expected: &f.original,
                updated: &f.updated,
            })
            .collect()
    }
}

/// The six files in the skill's execution order, with the groups that edit each.
pub fn targets(model_rel: &str) -> [(&str, &'static str); 6] {
    [
        (pithtrain::EXECUTION, "execution"),
        (pithtrain::DUALPIPEV, "dualpipev"),
        (model_rel, "model"),
        (pithtrain::DISTRIBUTED, "distributed"),
        (pithtrain::TRAINING, "training"),
        (pithtrain::PRETRAIN_LM, "pretrain_lm"),
    ]
}

/// Plans the instrumentation of `model` on clean sources; reads each file once.
pub fn plan(repo: &Repo, model: &str, params: &Params) -> Result<Plan> {
    let model_rel = repo.model_file(model)?;
    let sources: Vec<PySource> = targets(&model_rel)
        .iter()
        .map(|(rel, _)| repo.read(rel))
        .collect::<Result<_>>()?;
    repo.check_version(&sources[0])?;
    plan_sources(repo, model, params, &sources)
}

/// Plans over already-read sources (the six files in [`targets`] order).
pub fn plan_sources(
    repo: &Repo,
    model: &str,
    params: &Params,
    sources: &[PySource],
) -> Result<Plan> {
    // The six files are independent: plan them on all cores.
    let results: Vec<Result<FileChange>> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .iter()
            .zip(targets(&sources[2].rel))
            .map(|(src, (_, kind))| scope.spawn(move || plan_file(repo, params, src, kind)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a planning thread panicked"))
            .collect()
    });
    let files = results.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(Plan {
        model: model.to_string(),
        params: params.clone(),
        files,
    })
}

/// Plans one file's groups.
fn plan_file(repo: &Repo, params: &Params, src: &PySource, kind: &str) -> Result<FileChange> {
    if kind != "model" && !binds_torch(src) {
        return Err(Error::Unsupported {
            file: src.rel.clone(),
            reason: "the module does not `import torch`, which the inserted code needs; add the import and run memprints again".into(),
        });
    }
    let mut edits = FileEdits::new(src, &repo.settings);
    let mut placed = Vec::new();
    match kind {
        "execution" => {
            helpers::layer(&mut edits, params, &mut placed)?;
            layers::plan(&mut edits, params, &mut placed)?;
        }
        "dualpipev" => {
            helpers::pipeline(&mut edits, &mut placed)?;
            pipeline::plan(&mut edits, params, &mut placed)?;
        }
        "model" => model::plan(&mut edits, params, &mut placed)?,
        "distributed" => distributed::plan(&mut edits, params, &mut placed)?,
        "training" => {
            helpers::setup(&mut edits, params, &mut placed)?;
            setup::plan(&mut edits, &mut placed)?;
        }
        "pretrain_lm" => {
            checkpoint::plan(&mut edits, params, &mut placed)?;
            snapshot::plan(&mut edits, params, &mut placed)?;
        }
        _ => unreachable!("targets() names only these kinds"),
    }
    let updated = edits.apply()?;
    Ok(FileChange {
        rel: src.rel.clone(),
        original: src.text.clone(),
        updated,
        placed,
        was_formatted: false,
    })
}

/// True when a top-level `import torch` (or `import torch.x`, which binds `torch` too) exists.
fn binds_torch(src: &PySource) -> bool {
    src.module.body.iter().any(|stmt| match stmt {
        ruff_python_ast::Stmt::Import(import) => import.names.iter().any(|alias| {
            let name = alias.name.as_str();
            (name == "torch" || name.starts_with("torch."))
                && alias.asname.as_ref().is_none_or(|a| a.as_str() == "torch")
        }),
        _ => false,
    })
}

/// Checks that a planned file parses and, where the original was stable under the repository's
/// ruff format settings, that the rewritten one is too; records which it was.
pub fn check_formatting(repo: &Repo, file: &mut FileChange) -> Result<PySource> {
    let parsed = PySource::parse(file.rel.clone(), file.updated.clone())?;
    let formatted = repo
        .settings
        .format_module(&file.updated)
        .map_err(|message| Error::Format {
            file: file.rel.clone(),
            message,
        })?;
    // Formatting the original is needed only when the result is not stable: then either the
    // user's file was not formatted to begin with, or memprints inserted something unstable.
    file.was_formatted = formatted == file.updated;
    if !file.was_formatted
        && repo
            .settings
            .format_module(&file.original)
            .is_ok_and(|f| f == file.original)
    {
        return Err(Error::Unstable {
            file: file.rel.clone(),
            diff: crate::diff::unified(&file.rel, &file.updated, &formatted),
        });
    }
    Ok(parsed)
}
