//! `report --estimate`: PithTrain's own memory estimator run for each run's profiled pp ranks
//! and set beside what the prints measured ([`memprints_estimate`] does the running and the
//! pairing; this module feeds it from the report).
//!
//! Contract, per run:
//! - **Settings** come from PithTrain's `launch(cfg=…)` line in the run's logs (the K-th such
//!   line of the run's first file for the K-th run beginning in that file, else the first one
//!   of any of its files), overridden by the flags ([`EstimateOptions::overrides`]).
//! - **The tree** is `--repo` (made absolute); else the PithTrain checkout at or above the
//!   current directory (the first directory holding `pithtrain/__init__.py`). Nothing a log
//!   says selects code to run: a tree the logs name in their paths (`…/pithtrain/…` in a
//!   traceback or a warning) is only named in the error, as a hint for `--repo`.
//! - **Measured** is read from the run's report, the same figures the plain report shows: per
//!   pp rank, the lowest global rank with pipeline prints stands for it; its pipeline prints up
//!   to the first `After Step8` (the first `step()`), its `setup_model | after apply_fsdp`
//!   allocated, its checkpoint's optimizer state, its complete saved-tensor groups, and the
//!   cuBLAS/cuBLASLt workspace its `owners` name from the run's snapshot at the peak (none
//!   without a snapshot); the comparison corrects the bookkeeping that differs between the two
//!   sides and lists each correction (`memprints_estimate::corrections`).
//! - Anything that stops the estimate (no tree, no estimator in it, a missing setting, the
//!   estimator failing or timing out) becomes the section's `error`, one line; the rest of the
//!   report is unchanged and `report` still succeeds.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;

use crate::parse::PipelineKind;
pub use crate::schema::{EstimateSection, RankEstimate};
use crate::schema::{OwnerKind, RankReport, Report, Run, SetupPhase};
use memprints_estimate::compare::{MeasuredPrint, MeasuredSaved};
use memprints_estimate::schedule::PrintPoint;
use memprints_estimate::{
    EstimatorOptions, LoggedConfig, Measured, Overrides, RunSettings, Tolerance, compare, estimate,
};
use memprints_snapshot::owner::CUBLAS_WORKSPACE;

/// How to run the estimator for `report --estimate`.
#[derive(Debug, Clone)]
pub struct EstimateOptions {
    /// `--repo`: the PithTrain checkout holding `tools/memory_estimator/`.
    pub repo: Option<PathBuf>,
    /// `--python`: the interpreter (default `python3`).
    pub python: Option<OsString>,
    /// `--estimate-timeout`, per interpreter run.
    pub timeout: Duration,
    /// `--tolerance`.
    pub tolerance: Tolerance,
    /// `--config`, `--seq-len`, … : what replaces the log's settings.
    pub overrides: Overrides,
}

impl Default for EstimateOptions {
    fn default() -> Self {
        Self {
            repo: None,
            python: None,
            timeout: Duration::from_secs(120),
            tolerance: Tolerance::default(),
            overrides: Overrides::default(),
        }
    }
}

/// Runs the estimator for every run of `report` and sets each run's `estimate`.
pub fn attach(report: &mut Report, opts: &EstimateOptions) {
    let logs = read_logs(report);
    for n in 0..report.runs.len() {
        let logged = logged_config(report, n, &logs);
        let resumed = resumed(report, n, &logs);
        let named_tree = report.runs[n]
            .sources
            .iter()
            .find_map(|s| logs.get(s).and_then(|l| l.named_tree.clone()));
        let section = section(&report.runs[n], logged.as_ref(), resumed, named_tree, opts);
        report.runs[n].estimate = Some(section);
    }
}

fn section(
    run: &Run,
    logged: Option<&LoggedConfig>,
    resumed: bool,
    named_tree: Option<PathBuf>,
    opts: &EstimateOptions,
) -> EstimateSection {
    let mut out = EstimateSection {
        tree: None,
        settings: None,
        ranks: Vec::new(),
        error: None,
    };
    let profiled = profiled_ranks(run);
    if profiled.is_empty() {
        out.error = Some("no rank printed the pipeline, so there is nothing to compare".to_owned());
        return out;
    }
    // Code runs only from a checkout the user named or stands in: a path read from a log
    // selects nothing that runs, it is only named in the error as a hint.
    let cwd = std::env::current_dir().ok();
    let tree = match &opts.repo {
        Some(repo) => Some(std::path::absolute(repo).unwrap_or_else(|_| repo.clone())),
        None => cwd.as_deref().and_then(checkout_at_or_above),
    };
    let Some(tree) = tree else {
        let hint = match named_tree {
            Some(named) => format!(
                " (the log names {0}; pass --repo {0} to use it)",
                named.display()
            ),
            None => String::new(),
        };
        out.error = Some(format!(
            "no PithTrain checkout found at or above the current directory; pass --repo with \
             one that has tools/memory_estimator/{hint}"
        ));
        return out;
    };
    out.tree = Some(tree.display().to_string());
    let mut settings = match RunSettings::resolve(logged, &opts.overrides, &tree) {
        Ok(s) => s,
        Err(e) => {
            out.error = Some(e.to_string());
            return out;
        }
    };
    // The estimator judges OK/TIGHT/OOM against the GPU the report knows (its "GB" are GiB),
    // not its default of 80, so that its STATUS stands beside the report's own.
    settings.gpu_memory_gib = profiled
        .values()
        .filter_map(|r| r.capacity.map(|c| c.bytes))
        .min()
        .map(|bytes| bytes as f64 / f64::from(1 << 30));
    let mut options = EstimatorOptions::new(&tree);
    if let Some(python) = &opts.python {
        options.python = python.clone();
    }
    options.timeout = opts.timeout;
    let pp_ranks: Vec<u32> = profiled.keys().copied().collect();
    let estimates = estimate(&options, &settings, &pp_ranks);
    out.settings = Some(settings);
    match estimates {
        Ok(estimates) => {
            for e in &estimates {
                let Some(rank) = profiled.get(&e.pp_rank) else {
                    continue;
                };
                out.ranks.push(RankEstimate {
                    rank: rank.rank,
                    comparison: compare(e, &measured(rank, e.pp_rank, resumed), opts.tolerance),
                });
            }
        }
        Err(e) => out.error = Some(e.to_string()),
    }
    out
}

/// Per pp rank, the lowest global rank that printed the pipeline.
fn profiled_ranks(run: &Run) -> BTreeMap<u32, &RankReport> {
    let mut out = BTreeMap::new();
    for r in &run.ranks {
        if let (Some(pp), false) = (r.pp, r.pipeline.is_empty()) {
            out.entry(pp).or_insert(r);
        }
    }
    out
}

/// What the prints of `rank` measured in its first `step()`, as the plain report has it;
/// `resumed`: whether its run's launch loaded a checkpoint (the log's, not the rank's).
pub fn measured(rank: &RankReport, pp_rank: u32, resumed: bool) -> Measured {
    let end = rank
        .pipeline
        .iter()
        .position(|e| e.kind == PipelineKind::AfterStep8)
        .map_or(rank.pipeline.len(), |i| i + 1);
    let pipeline = rank.pipeline[..end]
        .iter()
        .filter_map(|e| {
            Some(MeasuredPrint {
                point: PrintPoint::parse(&e.label())?,
                allocated: e.allocated,
                cached: e.cached,
                non_pytorch: e.non_pytorch,
            })
        })
        .collect();
    let params_after_setup = rank
        .setup
        .iter()
        .rev()
        .find(|e| e.phase == SetupPhase::SetupModel && e.label == "after apply_fsdp")
        .and_then(|e| e.allocated);
    let mut saved_tensors: Vec<MeasuredSaved> = Vec::new();
    for g in rank.saved_tensors.iter().filter(|g| g.complete) {
        let (Some(layer), Some(stage)) = (
            g.layer,
            g.stage.strip_prefix("stage").and_then(|s| s.parse().ok()),
        ) else {
            continue;
        };
        if !saved_tensors
            .iter()
            .any(|s| (s.layer, s.stage) == (layer, stage))
        {
            saved_tensors.push(MeasuredSaved {
                layer,
                stage,
                activations: g.activations,
            });
        }
    }
    // The workspace the snapshot names at the peak, as the rank's owners have it (cut in
    // proportion when the snapshot's buffers exceed the in-flight bytes); none without one.
    let owners = rank.owners.as_ref().filter(|o| o.snapshot.is_some());
    let cublas_workspace = owners.map(|o| {
        o.owners
            .iter()
            .filter(|r| r.kind == OwnerKind::Buffer && r.owner == CUBLAS_WORKSPACE)
            .filter_map(|r| r.bytes)
            .sum()
    });
    Measured {
        pp_rank,
        pipeline,
        params_after_setup,
        optimizer_state: rank.checkpoint.as_ref().map(|c| c.optimizer_state),
        resumed,
        saved_tensors,
        cublas_workspace,
        workspace_from: owners.and_then(|o| o.snapshot.clone()),
    }
}

/// What one log says for the estimate: its config lines in order and a tree its paths name.
#[derive(Default)]
struct LogFacts {
    configs: Vec<LoggedConfig>,
    /// The launches (by their config line's index; 0 before any) that PithTrain's own
    /// `Load checkpoint: <path>` line follows.
    resumed: BTreeSet<usize>,
    named_tree: Option<PathBuf>,
}

/// `…/pithtrain/…` in a path the log prints: the prefix is a PithTrain tree.
static TREE_PATH: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(/[^\s'"():,]*?)/pithtrain/"#).expect("valid regex"));

/// Reads every input once more for the lines the report's scan does not keep.
fn read_logs(report: &Report) -> BTreeMap<String, LogFacts> {
    let mut out = BTreeMap::new();
    for input in &report.inputs {
        let mut facts = LogFacts::default();
        if let Ok(reader) = crate::scan::inputs::open(Path::new(input)) {
            let mut reader = std::io::BufReader::new(reader);
            let mut line = Vec::new();
            while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
                let text = String::from_utf8_lossy(&line);
                if text.contains("launch(cfg=")
                    && let Some(config) = LoggedConfig::parse(&text)
                {
                    facts.configs.push(config);
                }
                if text.contains("| Load checkpoint: ") && !text.contains("Elapsed") {
                    facts.resumed.insert(facts.configs.len().saturating_sub(1));
                }
                if facts.named_tree.is_none() && text.contains("/pithtrain/") {
                    facts.named_tree = TREE_PATH.captures_iter(&text).find_map(|c| {
                        let tree = PathBuf::from(&c[1]);
                        tree.join("pithtrain").is_dir().then_some(tree)
                    });
                }
                line.clear();
            }
        }
        out.insert(input.clone(), facts);
    }
    out
}

/// Run `n`'s log and the index of its launch in it ([`crate::launch::launch_of`]).
fn launch_of<'a>(
    report: &Report,
    n: usize,
    logs: &'a BTreeMap<String, LogFacts>,
) -> Option<(&'a LogFacts, usize)> {
    let (source, k) =
        crate::launch::launch_of(report, n, |s| logs.get(s).map_or(0, |l| l.configs.len()))?;
    Some((logs.get(source)?, k))
}

/// The config line of run `n`.
fn logged_config(
    report: &Report,
    n: usize,
    logs: &BTreeMap<String, LogFacts>,
) -> Option<LoggedConfig> {
    launch_of(report, n, logs).map(|(l, k)| l.configs[k].clone())
}

/// Whether run `n`'s launch loaded a checkpoint (PithTrain's `Load checkpoint:` line); a log
/// without config lines counts its line for its one run.
fn resumed(report: &Report, n: usize, logs: &BTreeMap<String, LogFacts>) -> bool {
    match launch_of(report, n, logs) {
        Some((l, k)) => l.resumed.contains(&k),
        None => report.runs[n]
            .sources
            .iter()
            .any(|s| logs.get(s).is_some_and(|l| !l.resumed.is_empty())),
    }
}

/// The first directory at or above `dir` that holds the `pithtrain` package.
fn checkout_at_or_above(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join("pithtrain").join("__init__.py").is_file())
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkout_is_found_at_or_above_a_directory() {
        let tree = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(tree.path().join("pithtrain")).unwrap();
        std::fs::write(tree.path().join("pithtrain/__init__.py"), "").unwrap();
        let deep = tree.path().join("examples/pretrain_lm");
        std::fs::create_dir_all(&deep).unwrap();
        assert_eq!(checkout_at_or_above(&deep).as_deref(), Some(tree.path()));
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(checkout_at_or_above(elsewhere.path()), None);
    }

    #[test]
    fn the_estimate_crate_names_the_workspace_as_the_snapshot_owners_do() {
        assert_eq!(
            memprints_estimate::corrections::CUBLAS_WORKSPACE,
            CUBLAS_WORKSPACE
        );
    }

    #[test]
    fn a_path_in_the_log_names_the_tree_it_is_in() {
        let line =
            r#"  File "/opt/runs/pith-train/pithtrain/dualpipe/dualpipev.py", line 612, in step"#;
        let c = TREE_PATH.captures(line).unwrap();
        assert_eq!(&c[1], "/opt/runs/pith-train");
    }
}
