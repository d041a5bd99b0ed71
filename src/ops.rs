//! The commands as library calls: plan `add`, `update` and `remove` on a repository in memory,
//! each checked before anything is written (the CLI in `main.rs` only parses, asks and prints).

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::instrument::{self, Plan};
use crate::params::Params;
use crate::pithtrain::moe_rule::{self, MoeLayers};
use crate::pithtrain::{self, Repo};
use crate::python::PySource;
use crate::status::{self, State, Status};

/// How `add`'s detail layers were chosen.
#[derive(Debug, Clone)]
pub enum LayerChoice {
    /// Given with `--detail-layers`.
    Explicit,
    /// Read off the model's MoE rule.
    Auto(MoeLayers),
    /// The model has no MoE rule (every layer is MoE) and no config was found: layers 0 and 1.
    AllMoe,
}

/// Refuses a tree whose PithTrain predates the 5-stage layer API, before anything else is read.
pub fn check_version(repo: &Repo) -> Result<()> {
    let path = repo.root.join(pithtrain::EXECUTION);
    if !path.is_file() {
        return Err(Error::Unsupported {
            file: pithtrain::EXECUTION.into(),
            reason: "missing: this does not look like a PithTrain checkout".into(),
        });
    }
    repo.check_version(&repo.read(pithtrain::EXECUTION)?)
}

/// Picks the detail layers: `explicit` when given (checked against `num_hidden_layers` when a
/// config is known), else the first MoE layer and the next one.
pub fn detail_layers(
    repo: &Repo,
    model: &str,
    explicit: Option<Vec<u32>>,
    config: Option<PathBuf>,
) -> Result<(Vec<u32>, LayerChoice, Option<MoeLayers>)> {
    let model_rel = repo.model_file(model)?;
    let src = repo.read(&model_rel)?;
    let config = match config {
        Some(path) => Some(path),
        None => {
            let training = repo.read(pithtrain::TRAINING)?;
            let module = model.replace('-', "_");
            moe_rule::example_config(&repo.root, &training, &module)
        }
    };
    let moe = match &config {
        Some(path) => Some(moe_rule::moe_layers(&src, path)?),
        None => None,
    };
    match explicit {
        Some(layers) => {
            if let Some(moe) = &moe
                && let Some(bad) = layers.iter().find(|&&l| l >= moe.num_layers)
            {
                    return Err(Error::InvalidArgument {
                        what: "--detail-layers",
                        input: layers.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                        reason: format!(
                            "layer {bad} is out of range: {} has num_hidden_layers = {}",
                            moe.config.display(),
                            moe.num_layers
                        ),
                    });
            }
            Ok((layers, LayerChoice::Explicit, moe))
        }
        None => match moe {
            Some(moe) => Ok((moe.default_detail_layers(), LayerChoice::Auto(moe.clone()), Some(moe))),
            None if !moe_rule::has_rule(&src)? => Ok((vec![0, 1], LayerChoice::AllMoe, None)),
            None => Err(Error::Config {
                file: model_rel,
                message: "its MoE-vs-dense rule needs a config: pass --config PATH (a Hugging Face config.json) or --detail-layers".into(),
            }),
        },
    }
}

/// Plans `add` on a clean tree and checks it: parses, ruff-stable, and `remove` restores it.
pub fn plan_add(repo: &Repo, model: &str, params: &Params) -> Result<Plan> {
    let mut plan = instrument::plan(repo, model, params)?;
    check(repo, &mut plan)?;
    Ok(plan)
}

/// Checks every planned file (in parallel): it parses, it is as ruff-stable as the original was,
/// and stripping it gives back the original bytes.
fn check(repo: &Repo, plan: &mut Plan) -> Result<()> {
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .files
            .iter_mut()
            .map(|file| {
                scope.spawn(move || {
                    let parsed = instrument::check_formatting(repo, file)?;
                    let restored = crate::remove::strip(&parsed, &repo.settings);
                    if restored != file.original {
                        return Err(Error::NotReversible {
                            file: file.rel.clone(),
                            diff: crate::diff::unified(&file.rel, &file.original, &restored),
                        });
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a checking thread panicked"))
            .collect()
    });
    results.into_iter().collect()
}

/// A file `remove` restores, or leaves alone.
#[derive(Debug, Clone)]
pub struct Removal {
    pub rel: String,
    pub current: String,
    pub restored: String,
    /// Why the file is left as it is (the user edited inside inserted code), with the lines.
    pub left_alone: Option<String>,
}

/// What `remove` would do.
#[derive(Debug, Clone)]
pub struct RemovePlan {
    pub status: Status,
    pub model: String,
    pub params: Params,
    pub files: Vec<Removal>,
}

impl RemovePlan {
    /// Files that will be rewritten, as replacements for [`crate::write::write_all`].
    pub fn replacements(&self) -> Vec<crate::write::Replacement<'_>> {
        self.files
            .iter()
            .filter(|f| f.left_alone.is_none() && f.restored != f.current)
            .map(|f| crate::write::Replacement {
                rel: &f.rel,
                expected: &f.current,
                updated: &f.restored,
            })
            .collect()
    }

    /// True when some file stays instrumented.
    pub fn is_partial(&self) -> bool {
        self.files.iter().any(|f| f.left_alone.is_some())
    }
}

/// Plans `remove`: strips every file, then verifies each candidate by adding the same
/// instrumentation again; a file whose re-instrumented candidate differs from what is on disk
/// holds user edits inside inserted code and is left alone.
pub fn plan_remove(repo: &Repo) -> Result<Option<RemovePlan>> {
    let status = status::scan(repo)?;
    if status.state == State::Absent {
        return Ok(None);
    }
    let not_readable = |what: &str| Error::Unsupported {
        file: repo.root.display().to_string(),
        reason: format!(
            "the instrumentation is incomplete: cannot tell {what}; restore the files with git, or re-run `memprints add`"
        ),
    };
    let model = status
        .model()
        .ok_or_else(|| not_readable("which model is instrumented"))?
        .to_string();
    let params = status
        .params()
        .ok_or_else(|| not_readable("the ranks, detail layers and snapshot folder"))?;
    let model_rel = repo.model_file(&model)?;
    let mut currents = Vec::new();
    let mut candidates = Vec::new();
    for (rel, _) in instrument::targets(&model_rel) {
        let current = repo.read(rel)?;
        let restored = crate::remove::strip(&current, &repo.settings);
        candidates.push(PySource::parse(rel, restored)?);
        currents.push(current);
    }
    let replanned = instrument::plan_sources(repo, &model, &params, &candidates);
    let mut files = Vec::new();
    for (i, (current, candidate)) in currents.iter().zip(&candidates).enumerate() {
        let left_alone = match &replanned {
            Err(e) => Some(format!("cannot verify the removal: {e}")),
            Ok(plan) if plan.files[i].updated == current.text => None,
            Ok(_) if candidate.text == current.text => None,
            Ok(plan) => Some(edited_lines(&plan.files[i].updated, &current.text)),
        };
        files.push(Removal {
            rel: current.rel.clone(),
            current: current.text.clone(),
            restored: candidate.text.clone(),
            left_alone,
        });
    }
    Ok(Some(RemovePlan {
        status,
        model,
        params,
        files,
    }))
}

/// "lines 12-14, 80 differ from what memprints inserted" for a file the user edited inside.
fn edited_lines(expected: &str, current: &str) -> String {
    let diff = similar::TextDiff::from_lines(expected, current);
    let mut lines = Vec::new();
    for op in diff.ops() {
        let range = op.new_range();
        if op.tag() != similar::DiffTag::Equal && !range.is_empty() {
            lines.push(if range.len() == 1 {
                format!("{}", range.start + 1)
            } else {
                format!("{}-{}", range.start + 1, range.end)
            });
        }
    }
    if lines.is_empty() {
        "inserted lines were deleted".into()
    } else {
        format!(
            "lines {} differ from what memprints inserted",
            lines.join(", ")
        )
    }
}

/// Plans `add --on-existing update`: takes the instrumentation out in memory, then adds it with
/// the new parameters; only the ranks, detail layers and snapshot folder change.
pub fn plan_update(repo: &Repo, model: &str, params: &Params) -> Result<Plan> {
    let removal = plan_remove(repo)?.ok_or_else(|| Error::Unsupported {
        file: repo.root.display().to_string(),
        reason: "nothing to update: the tree is not instrumented".into(),
    })?;
    if let Some(file) = removal.files.iter().find(|f| f.left_alone.is_some()) {
        return Err(Error::Unsupported {
            file: file.rel.clone(),
            reason: format!(
                "cannot update: {}",
                file.left_alone.as_deref().unwrap_or_default()
            ),
        });
    }
    if removal.model != model {
        return Err(Error::Unsupported {
            file: repo.model_file(&removal.model)?,
            reason: format!(
                "the tree is instrumented for `{}`, not `{model}`; run `memprints remove` first",
                removal.model
            ),
        });
    }
    let sources: Vec<PySource> = removal
        .files
        .iter()
        .map(|f| PySource::parse(f.rel.clone(), f.restored.clone()))
        .collect::<Result<_>>()?;
    let mut plan = instrument::plan_sources(repo, model, params, &sources)?;
    check(repo, &mut plan)?;
    for (file, removed) in plan.files.iter_mut().zip(&removal.files) {
        file.original = removed.current.clone();
    }
    Ok(plan)
}
