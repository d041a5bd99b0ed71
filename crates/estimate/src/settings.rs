//! The run's settings, as the estimator needs them: read from the config line PithTrain logs at
//! start, overridden by flags, and turned into the estimator's command-line flags.
//!
//! PithTrain prints its whole configuration once, on one line:
//!
//! ```text
//! … | INFO | launch(cfg=PretrainLMCfg(distributed=DistributedCfg(pipeline_parallel_size=1,
//! context_parallel_size=1, expert_parallel_size=1, …), training=TrainingCfg(…
//! sequence_length=512, …, micro_batch_size=2, global_batch_size=16, …,
//! model=PosixPath('<e2e>/configs/qwen3-moe-tiny.json'), …, fp8=False, …), …))
//! ```
//!
//! (wrapped here). Contract: [`LoggedConfig::parse`] takes one line and returns `None` unless it
//! holds `DistributedCfg(` or `TrainingCfg(`; each field it cannot find stays `None`. The world
//! size is not on that line (PithTrain infers data parallelism from it), so without `--world`
//! [`RunSettings::resolve`] assumes no data parallelism (`world = pp × ep × cp`) and says so in
//! [`RunSettings::notes`]. A relative model path in the log is taken from the PithTrain tree's
//! root, where PithTrain's launch scripts run; a relative `--config` from the current directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::EstimateError;

/// How the run names its model config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelRef {
    /// `model=PosixPath('…')` (or a bare `'….json'`).
    Path(PathBuf),
    /// `model='Qwen/Qwen3-30B-A3B'`: a Hugging Face id, no local file named.
    HubId(String),
}

/// What the config line of a PithTrain log says, field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoggedConfig {
    /// `pipeline_parallel_size=`; `None` when the line does not have it.
    pub pp: Option<u32>,
    /// `expert_parallel_size=`; `None` when the line does not have it.
    pub ep: Option<u32>,
    /// `context_parallel_size=`; `None` when the line does not have it.
    pub cp: Option<u32>,
    /// `sequence_length=` in `TrainingCfg(`, tokens; `None` when it is not there.
    pub sequence_length: Option<u32>,
    /// `micro_batch_size=` in `TrainingCfg(`, sequences; `None` when it is not there.
    pub micro_batch_size: Option<u32>,
    /// `global_batch_size=` in `TrainingCfg(`, sequences; `None` when it is not there.
    pub global_batch_size: Option<u32>,
    /// `model=` in `TrainingCfg(`; `None` when it is not there.
    pub model: Option<ModelRef>,
    /// `fp8=True|False` in `TrainingCfg(`; `None` when it is not there.
    pub fp8: Option<bool>,
    /// The function named by `optimizer=<function NAME at 0x…>` in `TrainingCfg(`
    /// (`make_muon_optimizer`); `None` when it is not there.
    pub optimizer: Option<String>,
}

// Word characters and boundaries are ASCII's (`(?-u:…)`): the config's repr names Python
// fields and functions, and compiling Unicode's tables cost about 10 million instructions, a few
// milliseconds, on every report whose log holds a config line (callgrind).
static MODEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?-u:\b)model=((?-u:\w)*Path\()?(?:'([^']*)'|"([^"]*)")"#).expect("valid regex")
});
static OPTIMIZER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)optimizer=<function ((?-u:[\w.])+)").expect("valid regex")
});
static FP8: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)fp8=(True|False)(?-u:\b)").expect("valid regex"));

/// The digits after the first `field=` that is not the tail of a longer name.
fn number(line: &str, field: &str) -> Option<u32> {
    let key = format!("{field}=");
    line.match_indices(&key).find_map(|(at, _)| {
        let before = line[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let digits: String = line[at + key.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

impl LoggedConfig {
    /// Reads one log line; `None` when it is not PithTrain's config line.
    pub fn parse(line: &str) -> Option<Self> {
        let training_at = line.find("TrainingCfg(");
        if training_at.is_none() && !line.contains("DistributedCfg(") {
            return None;
        }
        // The model and fp8 fields are looked for inside TrainingCfg only.
        let training = training_at.map_or("", |at| &line[at..]);
        let model = MODEL.captures(training).map(|c| {
            let wrapped = c.get(1).is_some();
            let text = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
            if wrapped || text.ends_with(".json") {
                ModelRef::Path(PathBuf::from(text))
            } else {
                ModelRef::HubId(text.to_owned())
            }
        });
        Some(Self {
            pp: number(line, "pipeline_parallel_size"),
            ep: number(line, "expert_parallel_size"),
            cp: number(line, "context_parallel_size"),
            sequence_length: number(training, "sequence_length"),
            micro_batch_size: number(training, "micro_batch_size"),
            global_batch_size: number(training, "global_batch_size"),
            model,
            fp8: FP8.captures(training).map(|c| &c[1] == "True"),
            optimizer: OPTIMIZER.captures(training).map(|c| c[1].to_owned()),
        })
    }

    /// The first config line of a whole log, if it has one.
    pub fn find_in(log: &str) -> Option<Self> {
        log.lines().find_map(Self::parse)
    }
}

/// Flags that replace what the log says (or fill in what it does not).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// `--config`: the model's config.json.
    pub config: Option<PathBuf>,
    /// `--seq-len`, tokens.
    pub sequence_length: Option<u32>,
    /// `--micro-batch-size`, sequences.
    pub micro_batch_size: Option<u32>,
    /// `--global-batch-size`, sequences.
    pub global_batch_size: Option<u32>,
    /// `--pp`: pipeline parallel size.
    pub pp: Option<u32>,
    /// `--ep`: expert parallel size.
    pub ep: Option<u32>,
    /// `--cp`: context parallel size.
    pub cp: Option<u32>,
    /// `--world`: GPUs in the run (the log does not say).
    pub world: Option<u32>,
}

/// Everything the estimator is run with.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct RunSettings {
    /// The model's config.json, checked to exist.
    pub model_config: PathBuf,
    /// Tokens per sequence (`--sequence-length`).
    pub sequence_length: u32,
    /// Sequences per micro-batch (`--micro-batch-size`).
    pub micro_batch_size: u32,
    /// Sequences per optimizer step (`--global-batch-size`).
    pub global_batch_size: u32,
    /// Pipeline parallel size (`--pp-size`).
    pub pp: u32,
    /// Expert parallel size (`--ep-size`).
    pub ep: u32,
    /// Context parallel size (`--cp-size`).
    pub cp: u32,
    /// GPUs in the run (`--total-gpus`); the estimator derives data parallelism from it.
    pub world: u32,
    /// No `--world`: `world` is `pp × ep × cp` (no data parallelism).
    pub world_assumed: bool,
    /// The log's `fp8=True` (`--fp8-training deep-gemm`); false when the log does not say.
    pub fp8: bool,
    /// `--gpu-memory-gb` for the estimator's OK/TIGHT/OOM status; `None` keeps its default (80).
    pub gpu_memory_gib: Option<f64>,
}

impl RunSettings {
    /// Overrides first, then the log; `tree` is where a relative model path is looked up.
    /// Fails with every missing setting named at once, or when the model config is not a file.
    pub fn resolve(
        logged: Option<&LoggedConfig>,
        overrides: &Overrides,
        tree: &Path,
    ) -> Result<Self, EstimateError> {
        let empty = LoggedConfig::default();
        let log = logged.unwrap_or(&empty);
        let mut missing = Vec::new();
        let mut need = |value: Option<u32>, what: &'static str, flag: &'static str| {
            if value.is_none() {
                missing.push((what, flag));
            }
            value.unwrap_or(0)
        };
        let sequence_length = need(
            overrides.sequence_length.or(log.sequence_length),
            "sequence length",
            "--seq-len",
        );
        let micro_batch_size = need(
            overrides.micro_batch_size.or(log.micro_batch_size),
            "micro-batch size",
            "--micro-batch-size",
        );
        let global_batch_size = need(
            overrides.global_batch_size.or(log.global_batch_size),
            "global batch size",
            "--global-batch-size",
        );
        let pp = need(overrides.pp.or(log.pp), "pipeline parallel size", "--pp");
        let ep = need(overrides.ep.or(log.ep), "expert parallel size", "--ep");
        let cp = need(overrides.cp.or(log.cp), "context parallel size", "--cp");
        let model = match (&overrides.config, &log.model) {
            (Some(path), _) => Some(ModelRef::Path(path.clone())),
            (None, model) => model.clone(),
        };
        if model.is_none() {
            missing.push(("model config", "--config"));
        }
        if !missing.is_empty() {
            return Err(EstimateError::MissingSettings {
                missing: join(missing.iter().map(|(what, _)| *what)),
                no_line: if logged.is_none() {
                    " (the log has no `launch(cfg=…)` line)"
                } else {
                    ""
                },
                flags: join(missing.iter().map(|(_, flag)| *flag)),
            });
        }
        // The estimator runs in the tree: a `--config` relative to where memprints runs is made
        // absolute first.
        let model_config = match model.expect("checked above") {
            ModelRef::HubId(id) => return Err(EstimateError::HubModel { id }),
            ModelRef::Path(path) if path.is_absolute() => path,
            ModelRef::Path(path) if overrides.config.is_some() => {
                std::path::absolute(&path).unwrap_or(path)
            }
            ModelRef::Path(path) => tree.join(path),
        };
        if !model_config.is_file() {
            return Err(EstimateError::ConfigNotFound { path: model_config });
        }
        Ok(Self {
            model_config,
            sequence_length,
            micro_batch_size,
            global_batch_size,
            pp,
            ep,
            cp,
            world: overrides.world.unwrap_or(pp * ep * cp),
            world_assumed: overrides.world.is_none(),
            fp8: log.fp8.unwrap_or(false),
            gpu_memory_gib: None,
        })
    }

    /// The estimator's flags for these settings (without `--pp-rank`).
    pub fn estimator_flags(&self) -> Vec<OsString> {
        let mut flags: Vec<OsString> = vec!["--model".into(), self.model_config.clone().into()];
        for (flag, value) in [
            ("--pp-size", self.pp),
            ("--ep-size", self.ep),
            ("--cp-size", self.cp),
            ("--total-gpus", self.world),
            ("--micro-batch-size", self.micro_batch_size),
            ("--global-batch-size", self.global_batch_size),
            ("--sequence-length", self.sequence_length),
        ] {
            flags.push(flag.into());
            flags.push(value.to_string().into());
        }
        if self.fp8 {
            flags.extend(["--fp8-training".into(), "deep-gemm".into()]);
        }
        if let Some(gib) = self.gpu_memory_gib {
            flags.extend(["--gpu-memory-gb".into(), gib.to_string().into()]);
        }
        flags
    }

    /// What the estimate assumed about the run, one sentence each.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if self.world_assumed {
            notes.push(format!(
                "the log does not give the world size: assumed {} GPUs (pp × ep × cp, no data \
                 parallelism); pass --world if the run had more",
                self.world
            ));
        }
        if self.fp8 {
            notes.push(
                "the run trains in FP8: the estimator does not model FP8's extra weight and input \
                 caches, so its figures are a lower bound"
                    .to_owned(),
            );
        }
        notes
    }
}

fn join<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN3_LOG: &str = include_str!("../../../tests/data/e2e/qwen3-tiny-pp1-instr.log");
    const RESUME_LOG: &str = include_str!("../../../tests/data/e2e/qwen3-tiny-pp1-resume.log");
    const DSV2_LOG: &str = include_str!("../../../tests/data/e2e/dsv2-tiny-pp1-instr.log");

    fn tiny(config: &str) -> LoggedConfig {
        LoggedConfig {
            pp: Some(1),
            ep: Some(1),
            cp: Some(1),
            sequence_length: Some(512),
            micro_batch_size: Some(2),
            global_batch_size: Some(16),
            model: Some(ModelRef::Path(PathBuf::from(format!(
                "<e2e>/configs/{config}"
            )))),
            fp8: Some(false),
            optimizer: Some("make_muon_optimizer".to_owned()),
        }
    }

    #[test]
    fn the_real_logs_config_lines_give_the_runs_settings() {
        assert_eq!(
            LoggedConfig::find_in(QWEN3_LOG),
            Some(tiny("qwen3-moe-tiny.json"))
        );
        assert_eq!(
            LoggedConfig::find_in(RESUME_LOG),
            Some(tiny("qwen3-moe-tiny.json"))
        );
        assert_eq!(
            LoggedConfig::find_in(DSV2_LOG),
            Some(tiny("deepseek-v2-tiny.json"))
        );
    }

    #[test]
    fn lines_that_are_not_the_config_line_give_nothing() {
        assert_eq!(
            LoggedConfig::parse("[rank=0] Before pipeline: 0.02 GiB"),
            None
        );
        assert_eq!(LoggedConfig::parse(""), None);
        let memory_lines = QWEN3_LOG
            .lines()
            .filter(|l| l.contains("[rank="))
            .filter_map(LoggedConfig::parse)
            .count();
        assert_eq!(memory_lines, 0);
    }

    #[test]
    fn a_hugging_face_id_and_fp8_are_read_as_such() {
        let line = "launch(cfg=PretrainLMCfg(distributed=DistributedCfg(pipeline_parallel_size=4, \
             context_parallel_size=2, expert_parallel_size=8), training=TrainingCfg(\
             sequence_length=4096, micro_batch_size=1, global_batch_size=1024, \
             model='Qwen/Qwen3-30B-A3B', fp8=True, memory_profile_output=PosixPath('/x'))))";
        let logged = LoggedConfig::parse(line).unwrap();
        assert_eq!(
            logged.model,
            Some(ModelRef::HubId("Qwen/Qwen3-30B-A3B".into()))
        );
        assert_eq!(
            (logged.pp, logged.cp, logged.ep),
            (Some(4), Some(2), Some(8))
        );
        assert_eq!(logged.fp8, Some(true));
        let err =
            RunSettings::resolve(Some(&logged), &Overrides::default(), Path::new("/")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the run names its model by Hugging Face id `Qwen/Qwen3-30B-A3B`; pass --config with its config.json"
        );
    }

    #[test]
    fn model_optimizer_and_fp8_are_whole_fields_only() {
        let line = "TrainingCfg(base_model='x', model=PosixPath('a.json'), \
                    my_optimizer=<function other at 0x1>, optimizer=<function pkg.make_muon_optimizer at 0x7f>, \
                    use_fp8=True, fp8=False, fp8=Truely)";
        let logged = LoggedConfig::parse(line).unwrap();
        assert_eq!(logged.model, Some(ModelRef::Path(PathBuf::from("a.json"))));
        assert_eq!(logged.optimizer.as_deref(), Some("pkg.make_muon_optimizer"));
        assert_eq!(logged.fp8, Some(false));
        let none = LoggedConfig::parse("TrainingCfg(fp8=Truely, xmodel='y')").unwrap();
        assert_eq!((none.fp8, none.model), (None, None));
    }

    #[test]
    fn a_field_name_inside_another_name_is_not_taken_for_it() {
        let line = "TrainingCfg(max_sequence_length=9, sequence_length=512, \
                    model=PosixPath('a.json'))";
        assert_eq!(
            LoggedConfig::parse(line).unwrap().sequence_length,
            Some(512)
        );
    }

    #[test]
    fn overrides_win_and_a_relative_model_path_is_found_in_the_tree() {
        let tree = tempfile::tempdir().unwrap();
        let configs = tree.path().join("<e2e>/configs");
        std::fs::create_dir_all(&configs).unwrap();
        std::fs::write(configs.join("qwen3-moe-tiny.json"), "{}").unwrap();
        let overrides = Overrides {
            pp: Some(2),
            micro_batch_size: Some(1),
            world: Some(8),
            ..Overrides::default()
        };
        let logged = tiny("qwen3-moe-tiny.json");
        let settings = RunSettings::resolve(Some(&logged), &overrides, tree.path()).unwrap();
        assert_eq!(settings.model_config, configs.join("qwen3-moe-tiny.json"));
        assert_eq!(
            (settings.pp, settings.micro_batch_size, settings.world),
            (2, 1, 8)
        );
        assert!(!settings.world_assumed);
        assert!(settings.notes().is_empty());
        let flags: Vec<String> = settings
            .estimator_flags()
            .iter()
            .map(|f| f.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            flags[2..].join(" "),
            "--pp-size 2 --ep-size 1 --cp-size 1 --total-gpus 8 --micro-batch-size 1 \
             --global-batch-size 16 --sequence-length 512"
        );
    }

    #[test]
    fn without_world_the_settings_assume_no_data_parallelism_and_say_so() {
        let tree = tempfile::tempdir().unwrap();
        let config = tree.path().join("c.json");
        std::fs::write(&config, "{}").unwrap();
        let overrides = Overrides {
            config: Some(config),
            pp: Some(2),
            ep: Some(4),
            ..Overrides::default()
        };
        let settings = RunSettings::resolve(Some(&tiny("x")), &overrides, tree.path()).unwrap();
        assert_eq!(settings.world, 8);
        assert_eq!(settings.notes().len(), 1);
        assert!(
            settings.notes()[0].contains("assumed 8 GPUs"),
            "{:?}",
            settings.notes()
        );
    }

    #[test]
    fn a_log_without_a_config_line_names_every_missing_flag() {
        let overrides = Overrides {
            pp: Some(1),
            ..Overrides::default()
        };
        let err = RunSettings::resolve(None, &overrides, Path::new("/")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot estimate: sequence length, micro-batch size, global batch size, expert \
             parallel size, context parallel size, model config not in the log's PithTrain \
             config line (the log has no `launch(cfg=…)` line); pass --seq-len, \
             --micro-batch-size, --global-batch-size, --ep, --cp, --config"
        );
    }

    #[test]
    fn the_kept_logs_model_paths_do_not_exist_here_so_config_is_asked_for() {
        let logged = LoggedConfig::find_in(QWEN3_LOG).unwrap();
        let err = RunSettings::resolve(Some(&logged), &Overrides::default(), Path::new("/nowhere"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "model config /nowhere/<e2e>/configs/qwen3-moe-tiny.json not found; pass --config \
             with the run's config.json"
        );
    }
}
