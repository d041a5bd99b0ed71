//! The second real GPU run (`tests/data/e2e/defaults-pp1/`: one H200, pp = 1, trees
//! instrumented with default `memprints add <model>` arguments), read back as issue 11 asks:
//! every default detail layer printed on rank 0, saved weights are counted as weights with the
//! bytes the run printed, the prints changed no step-0 loss, the snapshot's peak stands beside
//! the prints' peak, and the kept logs stay separate runs.

mod support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const RUNS: &str = "tests/data/e2e/defaults-pp1";
const MIB: f64 = (1 << 20) as f64;

/// Each model's kept instrumented log stem and the detail layers memprints chose by default
/// (the first MoE layer and the next: deepseek-v2-tiny's layer 0 is dense).
const MODELS: [(&str, [i64; 2]); 3] = [
    ("qwen3-tiny-pp1", [0, 1]),
    ("gpt-oss-tiny-pp1", [0, 1]),
    ("dsv2-tiny-pp1", [1, 2]),
];

fn kept(name: &str) -> PathBuf {
    support::root().join(RUNS).join(name)
}

fn report_json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(support::root())
        .arg("report")
        .args(args)
        .args(["--format", "json"])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn rank0(log: &Path) -> Value {
    let report = report_json(&[log.to_str().unwrap()]);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{}: one run", log.display());
    runs[0]["ranks"][0].clone()
}

/// The `(activ bytes, weight bytes)` of each saved-tensor summary line of the log, in order.
fn printed_summaries(log: &Path) -> Vec<(i64, i64)> {
    let text = std::fs::read_to_string(log).unwrap();
    let bytes_in = |field: &str| -> i64 {
        let open = field.find('(').unwrap();
        let close = field.find(" bytes)").unwrap();
        field[open + 1..close].parse().unwrap()
    };
    text.lines()
        .filter_map(|line| line.split_once("]   activ="))
        .map(|(_, rest)| {
            let (activ, rest) = rest.split_once(", weight=").unwrap();
            let (weight, _) = rest.split_once(", total=").unwrap();
            (bytes_in(activ), bytes_in(weight))
        })
        .collect()
}

#[test]
fn every_default_detail_layer_printed_every_stage_on_rank_0() {
    for (stem, layers) in MODELS {
        let rank = rank0(&kept(&format!("{stem}-instr.log")));
        assert_eq!(rank["rank"], 0);
        for layer in layers {
            let stages: Vec<i64> = rank["layers"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| {
                    p["layer"] == layer && p["label"].as_str().unwrap().contains(" after stage")
                })
                .map(|p| p["stage"].as_i64().unwrap())
                .collect();
            assert_eq!(
                stages,
                [1, 2, 3, 4, 5],
                "{stem}: layer {layer}'s stage probes"
            );
            let saved: Vec<&str> = rank["saved_tensors"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|s| s["layer"] == layer)
                .map(|s| s["stage"].as_str().unwrap())
                .collect();
            assert_eq!(
                saved,
                ["stage1", "stage3", "stage5"],
                "{stem}: layer {layer}"
            );
        }
        let others = rank["saved_tensors"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !layers.contains(&s["layer"].as_i64().unwrap()))
            .count();
        assert_eq!(others, 0, "{stem}: only the detail layers print");
    }
}

#[test]
fn saved_weights_are_weights_with_the_exact_bytes_the_run_printed() {
    for (stem, _) in MODELS {
        let log = kept(&format!("{stem}-instr.log"));
        let rank = rank0(&log);
        let saved = rank["saved_tensors"].as_array().unwrap();
        let read: Vec<(i64, i64)> = saved
            .iter()
            .map(|s| {
                (
                    s["activations"].as_i64().unwrap(),
                    s["weights"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            read,
            printed_summaries(&log),
            "{stem}: the summaries' exact bytes"
        );
        for s in saved {
            let what = format!("{stem}: layer {} {}", s["layer"], s["stage"]);
            assert_eq!(s["size_from"], "printed_bytes", "{what}");
            assert_eq!(s["bytes_exact"], true, "{what}");
            let tensors = s["tensors"].as_array().unwrap();
            let sum = |weight: bool| -> i64 {
                tensors
                    .iter()
                    .filter(|t| t["weight"] == weight)
                    .map(|t| t["size"].as_i64().unwrap())
                    .sum()
            };
            assert_eq!(
                (sum(false), sum(true)),
                (read_pair(s)),
                "{what}: tensors add up"
            );
            let weights = s["weights"].as_i64().unwrap();
            match s["stage"].as_str().unwrap() {
                // Attention and router weights (stage 1), expert weights (stage 3).
                "stage1" | "stage3" => assert!(weights > 0, "{what}: weights seen as weights"),
                _ => assert_eq!(weights, 0, "{what}: the combine saves no weight"),
            }
        }
    }
}

fn read_pair(s: &Value) -> (i64, i64) {
    (
        s["activations"].as_i64().unwrap(),
        s["weights"].as_i64().unwrap(),
    )
}

/// The `E2E_LOSS_SUMS step0 …` line of a kept log: the hex float per micro-batch.
fn step0_losses(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("E2E_LOSS_SUMS step0 "))
        .collect();
    assert_eq!(lines.len(), 1, "{}", log.display());
    lines[0].to_owned()
}

#[test]
fn the_prints_changed_no_step0_loss_bit_for_bit() {
    for (stem, _) in MODELS {
        let plain = step0_losses(&kept(&format!("{stem}-plain.log")));
        let instrumented = step0_losses(&kept(&format!("{stem}-instr.log")));
        assert_eq!(plain.split(' ').count(), 2 + 8, "{stem}: 8 micro-batches");
        assert_eq!(plain, instrumented, "{stem}");
    }
}

#[test]
fn the_step0_snapshot_stands_beside_the_prints_peak() {
    // The snapshot's peak in MiB, read by `memprints snapshot` (and by PyTorch's own
    // `_memory_viz` the same: every allocation of the first model.step()).
    for ((stem, _), peak_mib) in MODELS.into_iter().zip(["179.93", "176.31", "216.61"]) {
        let log = kept(&format!("{stem}-instr.log"));
        let pickle = kept(&format!("{stem}-instr-rank0-step0.pickle.gz"));
        let report = report_json(&[
            log.to_str().unwrap(),
            "--snapshots",
            pickle.to_str().unwrap(),
        ]);
        let memory = &report["runs"][0]["memory"];
        let snaps = memory["snapshots"].as_array().unwrap();
        assert_eq!(
            snaps.len(),
            1,
            "{stem}: the printed snapshot, filled: {snaps:?}"
        );
        let snap = &snaps[0];
        assert_eq!(snap["error"], Value::Null, "{stem}");
        let peak = snap["peak_allocated"].as_i64().unwrap();
        assert_eq!(format!("{:.2}", peak as f64 / MIB), peak_mib, "{stem}");
        let prints = memory["prints_peak"]["allocated"].as_i64().unwrap();
        assert_eq!(snap["prints_peak"].as_i64(), Some(prints), "{stem}");
        assert_eq!(
            snap["gap_to_prints"].as_i64(),
            Some(peak - prints),
            "{stem}"
        );
        assert!(
            peak > prints,
            "{stem}: the snapshot sees what the prints cannot"
        );
        assert!(
            snap["top_stacks"].as_array().is_some_and(|s| !s.is_empty()),
            "{stem}: what held the peak"
        );
    }
}

#[test]
fn a_folder_of_the_kept_logs_gives_one_run_per_log_and_skips_the_pickles() {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(kept("")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with("-instr.log") || name.ends_with("-resume.log") || name.ends_with(".gz") {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    let report = report_json(&[dir.path().to_str().unwrap()]);
    let runs = report["runs"].as_array().unwrap();
    let sources: Vec<String> = runs
        .iter()
        .map(|r| {
            let sources = r["sources"].as_array().unwrap();
            assert_eq!(sources.len(), 1, "{r:?}");
            let path = sources[0]
                .as_str()
                .unwrap_or_else(|| sources[0]["path"].as_str().unwrap());
            Path::new(path)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for log in [
        "dsv2-tiny-pp1-instr.log",
        "gpt-oss-tiny-pp1-instr.log",
        "qwen3-tiny-pp1-instr.log",
        "qwen3-tiny-pp1-resume.log",
    ] {
        assert_eq!(
            sources.iter().filter(|s| *s == log).count(),
            1,
            "{log} is one run of its own: {sources:?}"
        );
    }
    let skipped = report["skipped"].as_array().unwrap();
    let pickles = skipped
        .iter()
        .filter(|s| s["path"].as_str().unwrap().ends_with(".pickle.gz"))
        .count();
    assert_eq!(
        pickles, 4,
        "the snapshots are not read as logs: {skipped:?}"
    );
}

#[test]
fn a_plain_runs_log_beside_the_instrumented_ones_is_a_run_of_its_own() {
    let report = report_json(&[kept("").to_str().unwrap()]);
    let runs = report["runs"].as_array().unwrap();
    let sources: Vec<Vec<String>> = runs
        .iter()
        .map(|r| {
            r["sources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    let path = s.as_str().unwrap();
                    Path::new(path)
                        .file_name()
                        .unwrap()
                        .to_string_lossy()
                        .into_owned()
                })
                .collect()
        })
        .collect();
    assert_eq!(sources.len(), 7, "seven logs, seven launches: {sources:?}");
    assert!(sources.iter().all(|s| s.len() == 1), "{sources:?}");
    for run in runs {
        let name = run["sources"][0].as_str().unwrap();
        let training = &run["training"];
        // The resume starts from the step-2 checkpoint: only step 3 is its own.
        let first = if name.ends_with("-resume.log") { 3 } else { 1 };
        assert_eq!(
            (&training["first_step"], &training["last_step"]),
            (&Value::from(first), &Value::from(3)),
            "{name}: its own step lines, no other run's"
        );
        let ranks = run["ranks"].as_array().unwrap().len();
        assert_eq!(ranks, usize::from(!name.ends_with("-plain.log")), "{name}");
    }
}

#[test]
fn the_resumed_run_measures_the_optimizer_state_and_the_first_run_does_not() {
    let resumed = rank0(&kept("qwen3-tiny-pp1-resume.log"));
    assert!(
        resumed["breakdown"]["optimizer_state"].as_i64().unwrap() > 0,
        "{}",
        resumed["breakdown"]
    );
    let first = rank0(&kept("qwen3-tiny-pp1-instr.log"));
    assert_eq!(first["breakdown"]["optimizer_state"], Value::Null);
}

/// The what-if sweep's logs (2026-12-05, one H200, trees instrumented with `gpu_total`): each
/// rank's capacity comes from its own `init_process_group` print, the GPU's exact total (the
/// run's `E2E_GPU` line says `total_memory_bytes=150109880320`); the run that ran out of memory
/// is out of memory, the others fit.
#[test]
fn the_capacity_is_the_total_the_real_runs_printed() {
    let whatif = support::root().join("tests/data/whatif");
    for (log, status) in [
        ("qwen3-big-pp1-s1024-mb1-instr.log", "fits"),
        ("qwen3-big-pp1-s8192-mb1-instr.log", "fits"),
        ("qwen3-big-pp1-s8192-mb32-instr.log", "out_of_memory"),
    ] {
        let rank = rank0(&whatif.join(log));
        assert_eq!(rank["gpu_total"], 150_109_880_320_i64, "{log}");
        assert_eq!(rank["capacity"]["bytes"], 150_109_880_320_i64, "{log}");
        assert_eq!(rank["capacity"]["from"], "prints", "{log}");
        assert_eq!(rank["status"], status, "{log}");
    }
}
