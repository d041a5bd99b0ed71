//! The codemod's entry points, as library calls a command line makes: check the checkout,
//! choose the detail layers, plan `add`, `update` and `remove` on a repository in memory — each
//! checked before anything is written — and hand the result to [`memprints_commit::write_all`].
//! Its submodules hold what a command line shows of that work: [`summary`](crate::summary) (what `add` and
//! `remove` did), [`printing`](crate::printing) (where detail layers print), [`check`](crate::check) (prints left in files) and
//! [`demo`](crate::demo) (the demo's steps).

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::instrument::add::{self, AddPlan};
use crate::instrument::status::{self, State, Status};
use crate::instrument::strip::strip;
use crate::instrument::verify::{Verdict, ranges_text};
use crate::params::Params;
use crate::pithtrain::ModelRef;
use crate::pithtrain::moe_rule::{self, MoeLayers};
use crate::pithtrain::{self, PerTarget, Repo, Target};
use memprints_python::PySource;

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
    repo.check_version(&*repo.read(pithtrain::EXECUTION)?)
}

/// Picks the detail layers: `explicit` when given (checked against `num_hidden_layers` when a
/// config is known), else the first MoE layer and the next one.
///
/// `config` (`--config`) must be a file; without it the model's example variant's config.json
/// is read when there is one.
pub fn detail_layers(
    repo: &Repo,
    model: &ModelRef,
    explicit: Option<Vec<u32>>,
    config: Option<PathBuf>,
) -> Result<(Vec<u32>, LayerChoice, Option<MoeLayers>)> {
    let model_rel = model.file.clone();
    let src = repo.read(&model_rel)?;
    let config = match config {
        Some(path) if !path.is_file() => {
            return Err(Error::InvalidArgument {
                what: "--config",
                input: path.display().to_string(),
                reason: format!(
                    "{}; pass a Hugging Face config.json, e.g. {}/<variant>/config.json",
                    if path.exists() {
                        "not a file"
                    } else {
                        "no such file"
                    },
                    pithtrain::EXAMPLES_DIR
                ),
            });
        }
        Some(path) => Some(path),
        None => model
            .example
            .as_ref()
            .map(|example| example.join("config.json"))
            .filter(|config| config.is_file()),
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
            None if !moe_rule::has_rule(&src)? => Ok((
                crate::params::defaults::DETAIL_LAYERS.to_vec(),
                LayerChoice::AllMoe,
                None,
            )),
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
            LeftAlone::Edited { lines } if lines.len() == 1 && lines[0].0 == lines[0].1 => {
                write!(
                    f,
                    "line {} differs from what memprints inserted",
                    lines[0].0
                )
            }
            LeftAlone::Edited { lines } => write!(
                f,
                "lines {} differ from what memprints inserted",
                ranges_text(lines)
            ),
            LeftAlone::Unverifiable { reason } => write!(f, "cannot verify the removal: {reason}"),
        }
    }
}

/// A file `remove` restores, or leaves alone.
#[derive(Debug, Clone)]
pub struct FileRemoval {
    /// Its target.
    pub target: Target,
    /// Path relative to the repository root.
    pub rel: String,
    /// The text on disk.
    pub current: String,
    /// The text without the instrumentation.
    pub restored: String,
    /// Why the file stays as it is, when it does.
    pub left_alone: Option<LeftAlone>,
    /// With `--force`: why the file would have been left alone, when it would have.
    pub forced: Option<LeftAlone>,
    /// With `--force`: the lines the user edited inside inserted code that the removal takes
    /// out, as (1-based line number, text).
    pub user_lines_removed: Vec<(usize, String)>,
}

/// What `remove` would do.
#[derive(Debug, Clone)]
pub struct Removal {
    /// The tree's status before.
    pub status: Status,
    /// The instrumented model, when one model file holds instrumentation.
    pub model: Option<String>,
    /// Every file that holds instrumentation, in the skill's order.
    pub files: Vec<FileRemoval>,
}

impl Removal {
    /// Files that will be rewritten, as replacements for [`memprints_commit::write_all`].
    pub fn replacements(&self) -> Vec<memprints_commit::Replacement<'_>> {
        self.files
            .iter()
            .filter(|f| f.left_alone.is_none() && f.restored != f.current)
            .map(|f| memprints_commit::Replacement {
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

/// Plans `remove` on whatever part of the tree is instrumented: each file that holds markers is
/// stripped and verified on its own ([`crate::instrument::verify`]: adding the same groups again,
/// with the values read off that file, must give the file back), so any subset of the six files
/// comes out, whatever the model and however many ranks. A file the user edited inside
/// inserted code is left alone, unless `force`: then its stripped text is written too, and the
/// user's lines that go with it are listed.
pub fn plan_remove(repo: &Repo, force: bool) -> Result<Option<Removal>> {
    let status = status::scan(repo)?;
    if status.state == State::Absent {
        return Ok(None);
    }
    let files = status
        .files
        .iter()
        .filter_map(|file| file.check.as_ref())
        .map(|check| {
            let why = match &check.verdict {
                Verdict::Exact => None,
                Verdict::Edited { lines } => Some(LeftAlone::Edited {
                    lines: lines.clone(),
                }),
                Verdict::Unverifiable { reason } => Some(LeftAlone::Unverifiable {
                    reason: reason.clone(),
                }),
            };
            let (left_alone, forced) = match (why, &check.stripped) {
                (Some(why), Some(_)) if force => (None, Some(why)),
                (why, _) => (why, None),
            };
            let restored = check
                .stripped
                .clone()
                .unwrap_or_else(|| check.current.clone());
            let user_lines_removed = match &forced {
                Some(LeftAlone::Edited { lines }) => {
                    lines_removed(&check.current, &restored, lines)
                }
                _ => Vec::new(),
            };
            FileRemoval {
                target: check.target,
                rel: check.rel.clone(),
                current: check.current.clone(),
                restored,
                left_alone,
                forced,
                user_lines_removed,
            }
        })
        .collect();
    Ok(Some(Removal {
        model: status.model().map(str::to_string),
        status,
        files,
    }))
}

/// The lines of `current` within `edited` (1-based, inclusive ranges) that are gone in
/// `restored`, with their text.
fn lines_removed(current: &str, restored: &str, edited: &[(usize, usize)]) -> Vec<(usize, String)> {
    let diff = similar::TextDiff::from_lines(current, restored);
    let lines: Vec<&str> = current.split_inclusive('\n').collect();
    diff.ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal)
        .flat_map(|op| op.old_range())
        .map(|i| i + 1)
        .filter(|n| edited.iter().any(|&(a, b)| (a..=b).contains(n)))
        .map(|n| (n, lines[n - 1].trim_end_matches(['\n', '\r']).to_string()))
        .collect()
}

/// Plans `add --on-existing update`, also on a partly instrumented tree: takes the
/// instrumentation out of the files that hold it (in memory), then adds it to all six with the
/// new parameters. Files that hold none are instrumented from their text on disk.
pub fn plan_update(repo: &Repo, model: &str, params: &Params) -> Result<AddPlan> {
    let removal = plan_remove(repo, false)?.ok_or_else(|| Error::NotInstrumented {
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
    if let Some(other) = removal.status.models.iter().find(|m| *m != model) {
        return Err(Error::InstrumentedForOtherModel {
            file: repo.model_file(other)?,
            instrumented: other.clone(),
            requested: model.to_string(),
        });
    }
    let mut sources = repo.read_targets(model)?;
    let currents: PerTarget<String> = sources.as_ref().map(|_, src| src.text.clone());
    for file in &removal.files {
        if sources[file.target].rel == file.rel {
            sources[file.target] =
                Arc::new(PySource::parse(file.rel.clone(), file.restored.clone())?);
        }
    }
    let mut plan = add::plan_sources(&repo.settings, model, params, &sources)?;
    check(repo, &mut plan)?;
    for (file, current) in plan.files.iter_mut().zip(currents.iter()) {
        file.original = current.clone();
    }
    Ok(plan)
}
