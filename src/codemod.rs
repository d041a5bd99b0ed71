//! The codemod's entry points, as library calls a command line makes: check the checkout,
//! choose the detail layers, plan `add`, `update` and `remove` on a repository in memory — each
//! checked before anything is written — and hand the result to [`crate::write::write_all`].
//! Its submodules hold what a command line shows of that work: [`summary`] (what `add` and
//! `remove` did), [`printing`] (where detail layers print), [`check`] (prints left in files) and
//! [`demo`] (the demo's steps).

pub mod check;
pub mod demo;
pub mod printing;
pub mod summary;

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::instrument::add::{self, AddPlan};
use crate::instrument::status::{self, State, Status};
use crate::instrument::strip::strip;
use crate::params::Params;
use crate::pithtrain::moe_rule::{self, MoeLayers};
use crate::pithtrain::{self, PerTarget, Repo, Target};
use crate::python::PySource;

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
        return Err(Error::NotACheckout {
            missing: pithtrain::EXECUTION.into(),
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
                    input: layers
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
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
            Some(moe) => Ok((
                moe.default_detail_layers(),
                LayerChoice::Auto(moe.clone()),
                Some(moe),
            )),
            None if !moe_rule::has_rule(&src)? => Ok((vec![0, 1], LayerChoice::AllMoe, None)),
            None => Err(Error::Config {
                file: model_rel,
                message: "its MoE-vs-dense rule needs a config: pass --config PATH (a Hugging Face config.json) or --detail-layers".into(),
            }),
        },
    }
}

/// Plans `add` on a clean tree and checks it: parses, ruff-stable, and `remove` restores it.
pub fn plan_add(repo: &Repo, model: &str, params: &Params) -> Result<AddPlan> {
    let mut plan = add::plan(repo, model, params)?;
    check(repo, &mut plan)?;
    Ok(plan)
}

/// Checks every planned file (in parallel): it parses, it is as ruff-stable as the original was,
/// and stripping it gives back the original bytes.
fn check(repo: &Repo, plan: &mut AddPlan) -> Result<()> {
    let results: Vec<Result<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .files
            .iter_mut()
            .map(|file| {
                scope.spawn(move || {
                    let parsed = add::check_formatting(&repo.settings, file)?;
                    let restored = strip(&parsed, &repo.settings)?;
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

/// Why `remove` leaves a file as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftAlone {
    /// The user edited inside inserted code: these line ranges (1-based, inclusive) of the
    /// file differ from what memprints would have inserted. Empty when inserted lines were
    /// deleted.
    Edited {
        /// The differing lines.
        lines: Vec<(usize, usize)>,
    },
    /// Taking the instrumentation out could not be checked.
    Unverifiable {
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for LeftAlone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeftAlone::Edited { lines } if lines.is_empty() => {
                write!(f, "inserted lines were deleted")
            }
            LeftAlone::Edited { lines } => {
                let ranges: Vec<String> = lines
                    .iter()
                    .map(|&(a, b)| {
                        if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        }
                    })
                    .collect();
                write!(
                    f,
                    "lines {} differ from what memprints inserted",
                    ranges.join(", ")
                )
            }
            LeftAlone::Unverifiable { reason } => write!(f, "cannot verify the removal: {reason}"),
        }
    }
}

/// A file `remove` restores, or leaves alone.
#[derive(Debug, Clone)]
pub struct FileRemoval {
    /// Path relative to the repository root.
    pub rel: String,
    /// The text on disk.
    pub current: String,
    /// The text without the instrumentation.
    pub restored: String,
    /// Why the file stays as it is, when it does.
    pub left_alone: Option<LeftAlone>,
}

/// What `remove` would do.
#[derive(Debug, Clone)]
pub struct Removal {
    /// The tree's status before.
    pub status: Status,
    /// The instrumented model.
    pub model: String,
    /// The parameters the instrumentation was added with.
    pub params: Params,
    /// The six files.
    pub files: PerTarget<FileRemoval>,
}

impl Removal {
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
/// holds user edits inside inserted code and is left alone. Files are verified one by one, so
/// one file left alone does not keep the others instrumented.
pub fn plan_remove(repo: &Repo) -> Result<Option<Removal>> {
    let status = status::scan(repo)?;
    if status.state == State::Absent {
        return Ok(None);
    }
    let incomplete = |what: &'static str| Error::IncompleteInstrumentation {
        root: repo.root.display().to_string(),
        what,
    };
    let model = status
        .model()
        .ok_or_else(|| incomplete("which model is instrumented"))?
        .to_string();
    let params = status
        .params()
        .ok_or_else(|| incomplete("the ranks, detail layers and snapshot folder"))?;
    let currents = repo.read_targets(&model)?;
    // A candidate that cannot be made stays the current text, with the reason.
    let mut failures: PerTarget<Option<LeftAlone>> = PerTarget::from_fn(|_| None);
    let candidates: PerTarget<PySource> = PerTarget::try_from_fn(|target| {
        let current = &currents[target];
        let stripped = strip(current, &repo.settings)
            .and_then(|text| PySource::parse(current.rel.clone(), text));
        stripped.or_else(|e| {
            failures[target] = Some(LeftAlone::Unverifiable {
                reason: e.to_string(),
            });
            PySource::parse(current.rel.clone(), current.text.clone())
        })
    })?;
    let mut replanned = add::plan_files(&repo.settings, &params, &candidates).into_iter();
    let files = PerTarget::from_fn(|target| {
        let current = &currents[target];
        let candidate = &candidates[target];
        let replanned = replanned.next().expect("one plan per target");
        let left_alone = failures[target].take().or_else(|| match replanned {
            Err(e) => Some(LeftAlone::Unverifiable {
                reason: e.to_string(),
            }),
            Ok(plan) if plan.updated == current.text => None,
            Ok(_) if candidate.text == current.text => None,
            Ok(plan) => Some(edited_lines(&plan.updated, &current.text)),
        });
        FileRemoval {
            rel: current.rel.clone(),
            current: current.text.clone(),
            restored: candidate.text.clone(),
            left_alone,
        }
    });
    Ok(Some(Removal {
        status,
        model,
        params,
        files,
    }))
}

/// Which lines of `current` differ from `expected`, for a file the user edited inside.
fn edited_lines(expected: &str, current: &str) -> LeftAlone {
    let diff = similar::TextDiff::from_lines(expected, current);
    let lines = diff
        .ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal && !op.new_range().is_empty())
        .map(|op| {
            let range = op.new_range();
            (range.start + 1, range.end)
        })
        .collect();
    LeftAlone::Edited { lines }
}

/// Plans `add --on-existing update`: takes the instrumentation out in memory, then adds it with
/// the new parameters; only the ranks, detail layers and snapshot folder change.
pub fn plan_update(repo: &Repo, model: &str, params: &Params) -> Result<AddPlan> {
    let removal = plan_remove(repo)?.ok_or_else(|| Error::NotInstrumented {
        root: repo.root.display().to_string(),
    })?;
    if let Some((file, why)) = removal
        .files
        .iter()
        .find_map(|f| f.left_alone.as_ref().map(|why| (f, why)))
    {
        return Err(Error::UserEdited {
            file: file.rel.clone(),
            lines: why.to_string(),
        });
    }
    if removal.model != model {
        return Err(Error::InstrumentedForOtherModel {
            file: removal.files[Target::Model].rel.clone(),
            instrumented: removal.model.clone(),
            requested: model.to_string(),
        });
    }
    let sources = PerTarget::try_from_fn(|target| {
        let file = &removal.files[target];
        PySource::parse(file.rel.clone(), file.restored.clone())
    })?;
    let mut plan = add::plan_sources(&repo.settings, model, params, &sources)?;
    check(repo, &mut plan)?;
    for (file, removed) in plan.files.iter_mut().zip(&removal.files) {
        file.original = removed.current.clone();
    }
    Ok(plan)
}
