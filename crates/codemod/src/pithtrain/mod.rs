//! The target: a PithTrain checkout. Knows where its root is, which six files the skill edits
//! ([`Target`]), which models it has, and whether it is new enough (the 5-stage layer API) to
//! instrument.

pub mod layout;
pub mod moe_rule;
pub mod placement;
pub mod target;

pub use target::{PerTarget, Target};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use memprints_python::edit::format::FormatSettings;
use memprints_python::{PySource, find};

/// `pithtrain/dualpipe/execution.py`: groups 1B and 5A.
pub const EXECUTION: &str = "pithtrain/dualpipe/execution.py";
/// `pithtrain/dualpipe/dualpipev.py`: groups 1A and 4.
pub const DUALPIPEV: &str = "pithtrain/dualpipe/dualpipev.py";
/// `pithtrain/modules/distributed.py`: group 2.
pub const DISTRIBUTED: &str = "pithtrain/modules/distributed.py";
/// `pithtrain/modules/training.py`: groups 1C and 3.
pub const TRAINING: &str = "pithtrain/modules/training.py";
/// `pithtrain/tasks/pretrain_lm.py`: groups 6 and 7.
pub const PRETRAIN_LM: &str = "pithtrain/tasks/pretrain_lm.py";
/// The folder of model files.
pub const MODELS_DIR: &str = "pithtrain/models";

/// The folders the six files live in, relative to the root: where a commit's temp files can be
/// left by a killed run ([`memprints_commit::recover`] looks there).
pub const TARGET_FOLDERS: [&str; 4] = [
    "pithtrain/dualpipe",
    "pithtrain/models",
    "pithtrain/modules",
    "pithtrain/tasks",
];

/// Files in `pithtrain/models/` that are not models.
const NOT_MODELS: &[&str] = &["__init__", "interface"];

/// The checkout above `dir` when `dir` is its `pithtrain` package folder.
fn checkout_of_package(dir: &Path) -> Option<PathBuf> {
    let is_package = dir.file_name()? == "pithtrain" && dir.join("__init__.py").is_file();
    let parent = dir.parent()?;
    (is_package && names_pithtrain(&parent.join("pyproject.toml"))).then(|| parent.to_path_buf())
}

/// The folder of the example variants (`<variant>/config.json`, `<variant>/script.py`) that
/// `examples/pretrain_lm/launch.sh <variant>` trains.
pub const EXAMPLES_DIR: &str = "examples/pretrain_lm";

/// A PithTrain checkout and its formatter settings: opened once per command and passed on, so
/// each of its files is parsed once however many steps read it.
pub struct Repo {
    /// The checkout's root folder.
    pub root: PathBuf,
    /// Its `[tool.ruff]` formatter settings.
    pub settings: FormatSettings,
    /// Files parsed so far, by path; an entry is used only while the file's text is unchanged,
    /// so a command that writes and reads again (the demo) sees its own writes.
    parsed: Mutex<HashMap<String, Arc<PySource>>>,
}

/// A model resolved once to its file: what a command keeps instead of the name it was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRef {
    /// The model's name as PithTrain's files spell it with `-`: `qwen3-moe`.
    pub name: String,
    /// Its file, relative to the root: `pithtrain/models/qwen3_moe.py`.
    pub file: String,
    /// Its example variant's folder (`examples/pretrain_lm/qwen3-30b-a3b`, absolute), when it
    /// has one: the variant named on the command line, else the first whose config.json's
    /// `model_type` the model serves.
    pub example: Option<PathBuf>,
    /// The example variant the user named instead of the model, with the `model_type` that
    /// mapped it.
    pub from_variant: Option<(String, String)>,
}

impl ModelRef {
    /// The example variant's name (`qwen3-30b-a3b`): what `launch.sh` takes and names the
    /// log after.
    pub fn variant(&self) -> Option<&str> {
        self.example.as_deref()?.file_name()?.to_str()
    }
}

impl Repo {
    /// Opens `dir` when given, else the current folder or its nearest parent whose
    /// `pyproject.toml` names the project `pithtrain`.
    pub fn locate(dir: Option<&Path>) -> Result<Repo> {
        let root = match dir {
            Some(dir) => {
                let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
                if dir.join("pithtrain").is_dir() {
                    dir
                } else if let Some(checkout) = checkout_of_package(&dir) {
                    // The package folder given for its checkout.
                    checkout
                } else {
                    return Err(Error::RepoNotFound { start: dir });
                }
            }
            None => {
                let cwd = std::env::current_dir().map_err(|e| Error::io(".", e))?;
                cwd.ancestors()
                    .find(|dir| names_pithtrain(&dir.join("pyproject.toml")))
                    .map(Path::to_path_buf)
                    .ok_or(Error::RepoNotFound { start: cwd.clone() })?
            }
        };
        let pyproject = root.join("pyproject.toml");
        let settings = if pyproject.is_file() {
            FormatSettings::from_pyproject(&pyproject)?
        } else {
            FormatSettings::default()
        };
        Ok(Repo {
            root,
            settings,
            parsed: Mutex::default(),
        })
    }

    /// Reads and parses `rel` (a path relative to the root); a file whose text is as it was
    /// when last parsed is not parsed again.
    pub fn read(&self, rel: &str) -> Result<Arc<PySource>> {
        let path = self.root.join(rel);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let cached = self
            .parsed
            .lock()
            .expect("the parse cache")
            .get(rel)
            .cloned();
        if let Some(src) = cached.filter(|src| src.text == text) {
            return Ok(src);
        }
        let src = Arc::new(PySource::parse(rel, text)?);
        self.parsed
            .lock()
            .expect("the parse cache")
            .insert(rel.to_string(), src.clone());
        Ok(src)
    }

    /// Resolves what the user typed to a model: a model name (`qwen3-moe`, the file
    /// `pithtrain/models/qwen3_moe.py`), or an example variant (`qwen3-30b-a3b`, the folder
    /// `examples/pretrain_lm/qwen3-30b-a3b/`), mapped to the model that serves its config.json's
    /// `model_type`.
    pub fn resolve_model(&self, name: &str) -> Result<ModelRef> {
        let unknown = match self.model_file(name) {
            Ok(file) => {
                let module = name.replace('-', "_");
                let example = self
                    .read(TRAINING)
                    .ok()
                    .and_then(|training| moe_rule::example_config(&self.root, &training, &module))
                    .and_then(|config| config.parent().map(Path::to_path_buf));
                return Ok(ModelRef {
                    name: name.to_string(),
                    file,
                    example,
                    from_variant: None,
                });
            }
            Err(err @ Error::UnknownModel { .. }) => err,
            Err(err) => return Err(err),
        };
        let example = self.root.join(EXAMPLES_DIR).join(name);
        let Some(model_type) = moe_rule::model_type(&example.join("config.json")) else {
            return Err(unknown);
        };
        let training = self.read(TRAINING)?;
        let model = self.models().into_iter().find(|model| {
            moe_rule::model_types(&training, &model.replace('-', "_")).contains(&model_type)
        });
        match model {
            Some(model) => Ok(ModelRef {
                file: self.model_file(&model)?,
                name: model,
                example: Some(example),
                from_variant: Some((name.to_string(), model_type)),
            }),
            None => Err(unknown),
        }
    }

    /// The six paths an instrumentation of `model` edits.
    pub fn target_paths(&self, model: &str) -> Result<PerTarget<String>> {
        let model_rel = self.model_file(model)?;
        Ok(PerTarget::from_fn(|target| {
            target.path(&model_rel).to_string()
        }))
    }

    /// Reads and parses the six files an instrumentation of `model` edits.
    pub fn read_targets(&self, model: &str) -> Result<PerTarget<Arc<PySource>>> {
        let paths = self.target_paths(model)?;
        PerTarget::try_from_fn(|target| self.read(&paths[target]))
    }

    /// Model names in the tree, as users type them (`qwen3-moe` for `qwen3_moe.py`), sorted.
    pub fn models(&self) -> Vec<String> {
        let dir = self.root.join(MODELS_DIR);
        let mut models: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let stem = name.strip_suffix(".py")?;
                let model = stem.replace('_', "-");
                (!NOT_MODELS.contains(&stem) && check_model_name(&model).is_ok()).then_some(model)
            })
            .collect();
        models.sort();
        models
    }

    /// `pithtrain/models/<model with - as _>.py`, or an error listing the models there are.
    /// A name that is not a plain name (a `/`, `..`, an absolute path) is refused before any
    /// path is built from it, so no model name reaches outside `pithtrain/models/`.
    pub fn model_file(&self, model: &str) -> Result<String> {
        check_model_name(model)?;
        let rel = format!("{MODELS_DIR}/{}.py", model.replace('-', "_"));
        if self.root.join(&rel).is_file() && !NOT_MODELS.contains(&model.replace('-', "_").as_str())
        {
            return Ok(rel);
        }
        let available = self.models();
        let available = if available.is_empty() {
            "none".into()
        } else {
            available.join(", ")
        };
        if model == "interface" && self.root.join(&rel).is_file() {
            return Err(Error::NotAModel {
                model: model.to_string(),
                file: rel,
                available,
            });
        }
        Err(Error::UnknownModel {
            model: model.to_string(),
            file: rel,
            available,
        })
    }

    /// Refuses trees older than the 5-stage layer API, whose anchors the skill does not fit.
    pub fn check_version(&self, execution: &PySource) -> Result<()> {
        if find::function(&execution.module.body, "layer_forward").is_some() {
            return Ok(());
        }
        Err(Error::OldPithTrain {
            file: execution.rel.clone(),
            what: "this PithTrain predates the 5-stage layer API: there is no `layer_forward` \
                   (models use forward_attn / forward_mlp / forward_aggregate)"
                .into(),
        })
    }
}

/// A model name is a Python module name with `-` for `_`: letters, digits, `-` and `_`.
fn check_model_name(model: &str) -> Result<()> {
    let plain = !model.is_empty()
        && model.len() <= 128
        && model
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_');
    if plain {
        return Ok(());
    }
    Err(Error::InvalidArgument {
        what: "model name",
        input: model.chars().take(80).collect(),
        reason: format!(
            "a model is named by its file in {MODELS_DIR}/ without `.py` (letters, digits, `-`, `_`), e.g. qwen3-moe"
        ),
    })
}

fn names_pithtrain(pyproject: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(pyproject) else {
        return false;
    };
    let Ok(doc) = text.parse::<toml::Table>() else {
        return false;
    };
    doc.get("project")
        .and_then(|p| p.get("name"))
        .and_then(toml::Value::as_str)
        == Some("pithtrain")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_target_folders_hold_the_six_files() {
        let mut folders: Vec<&str> = [EXECUTION, DUALPIPEV, DISTRIBUTED, TRAINING, PRETRAIN_LM]
            .iter()
            .filter_map(|rel| std::path::Path::new(rel).parent()?.to_str())
            .chain([MODELS_DIR])
            .collect();
        folders.sort_unstable();
        folders.dedup();
        assert_eq!(folders, super::TARGET_FOLDERS);
    }

    use super::*;

    fn fixture() -> Repo {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/minitrain");
        Repo::locate(Some(&root)).unwrap()
    }

    #[test]
    fn a_model_name_that_is_a_path_is_refused_before_any_file_is_looked_at() {
        let repo = fixture();
        for name in [
            "../../../x",
            "/etc/passwd",
            "..",
            "a/b",
            "tiny moe",
            "",
            "x.py",
        ] {
            let err = repo.model_file(name).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidArgument {
                        what: "model name",
                        ..
                    }
                ),
                "{name:?}: {err}"
            );
        }
        assert_eq!(
            repo.model_file("tiny-moe").unwrap(),
            "pithtrain/models/tiny_moe.py"
        );
    }

    #[test]
    fn unknown_plain_names_list_the_models_there_are() {
        let err = fixture().model_file("nope").unwrap_err().to_string();
        assert!(err.contains("models in this tree: biased-moe"), "{err}");
    }

    #[test]
    fn an_example_variant_resolves_to_the_model_of_its_model_type() {
        let repo = fixture();
        let model = repo.resolve_model("tiny").unwrap();
        assert_eq!(model.name, "tiny-moe");
        assert_eq!(model.file, "pithtrain/models/tiny_moe.py");
        assert_eq!(model.variant(), Some("tiny"));
        assert_eq!(
            model.from_variant,
            Some(("tiny".to_string(), "tiny_moe".to_string()))
        );
        let direct = repo.resolve_model("tiny-moe").unwrap();
        assert_eq!(
            (direct.variant(), direct.from_variant.clone()),
            (Some("tiny"), None)
        );
        assert!(matches!(
            repo.resolve_model("nope"),
            Err(Error::UnknownModel { .. })
        ));
    }

    #[test]
    fn a_file_is_parsed_again_only_when_its_text_changed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("pithtrain")).unwrap();
        std::fs::write(dir.path().join("pithtrain/a.py"), "x = 1\n").unwrap();
        let repo = Repo::locate(Some(dir.path())).unwrap();
        let first = repo.read("pithtrain/a.py").unwrap();
        assert!(Arc::ptr_eq(&first, &repo.read("pithtrain/a.py").unwrap()));
        std::fs::write(dir.path().join("pithtrain/a.py"), "x = 2\n").unwrap();
        assert_eq!(repo.read("pithtrain/a.py").unwrap().text, "x = 2\n");
    }
}
