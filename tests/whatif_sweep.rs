//! Issue 22's check of `--what-if` against real runs: every run kept in `tests/data/whatif/`
//! (qwen3-big on one H200 at several shapes) is predicted from the smallest one,
//! `s1024-mb1`, and the prediction must be within 5 % of the run's measured steady-state peak or
//! within 25 % of the measured change from the smallest run, whichever is wider; a run that
//! went out of memory must be predicted not to fit.
//!
//! The measured side is read here, not by memprints: the `E2E_MEM step=N
//! max_allocated_bytes=B` lines `e2e/train.py` printed after each step (the exact bytes behind
//! PithTrain's `peak-gpu-memory`), the highest of steps ≥ 2; the shape from the run's
//! `E2E_RUN … --seq S --micro-batch M` line. A run kept later joins the check by being there.

mod support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const BASE: &str = "qwen3-big-pp1-s1024-mb1-instr.log";

fn folder() -> PathBuf {
    support::root().join("tests/data/whatif")
}

/// A run's shape (sequence length, micro-batch), its steady-state peak in bytes (`None` when
/// it printed no step ≥ 2), and whether it ran out of memory.
struct Measured {
    seq: u32,
    micro_batch: u32,
    steady_peak: Option<i64>,
    oom: bool,
}

fn number_after(line: &str, key: &str) -> Option<i64> {
    let at = line.find(key)? + key.len();
    let digits: String = line[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn measured(log: &Path) -> Measured {
    let text = std::fs::read_to_string(log).unwrap();
    let run = text
        .lines()
        .find(|l| l.starts_with("E2E_RUN "))
        .unwrap_or_else(|| panic!("{}: no E2E_RUN line", log.display()));
    let steady_peak = text
        .lines()
        .filter(|l| l.starts_with("E2E_MEM "))
        .filter(|l| number_after(l, "step=").is_some_and(|s| s >= 2))
        .filter_map(|l| number_after(l, "max_allocated_bytes="))
        .max();
    Measured {
        seq: number_after(run, "--seq ").unwrap() as u32,
        micro_batch: number_after(run, "--micro-batch ").unwrap() as u32,
        steady_peak,
        oom: text.contains("torch.OutOfMemoryError: CUDA out of memory"),
    }
}

/// What `--what-if` predicts for rank 0 at `seq` and `micro_batch`, from the base run.
fn predicted(seq: u32, micro_batch: u32) -> Value {
    let out = Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(support::root())
        .arg("report")
        .arg(folder().join(BASE))
        .args(["--format", "json"])
        .args(["--what-if", &format!("sequence-length={seq}")])
        .args(["--what-if", &format!("micro-batch-size={micro_batch}")])
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    report["runs"][0]["what_if"]["ranks"][0].clone()
}

#[test]
fn every_kept_shape_is_predicted_from_the_smallest_within_the_issues_bounds() {
    let base = measured(&folder().join(BASE));
    let base_peak = base.steady_peak.unwrap();
    let mut logs: Vec<PathBuf> = std::fs::read_dir(folder())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with("-instr.log") && n != BASE)
        })
        .collect();
    logs.sort();
    assert!(logs.len() >= 5, "the sweep's runs are kept: {logs:?}");
    let (mut checked, mut oom) = (0, 0);
    for log in &logs {
        let m = measured(log);
        let rank = predicted(m.seq, m.micro_batch);
        let name = log.file_name().unwrap().to_string_lossy();
        let predicted = rank["peak"]["predicted_bytes"].as_i64().unwrap();
        if m.oom {
            assert_eq!(
                rank["predicted_status"], "out_of_memory",
                "{name}: ran out of memory, predicted {predicted} bytes: {rank}"
            );
            oom += 1;
            continue;
        }
        let Some(peak) = m.steady_peak else { continue };
        let change = peak - base_peak;
        let bound = (0.05 * peak as f64).max(0.25 * change.abs() as f64);
        let error = (predicted - peak) as f64;
        assert!(
            error.abs() <= bound,
            "{name}: predicted {predicted}, measured {peak} ({:+.1} %), change measured {change} \
             predicted {}, bound {bound:.0}",
            100.0 * error / peak as f64,
            predicted - base_peak
        );
        assert_ne!(rank["predicted_status"], "out_of_memory", "{name}");
        checked += 1;
    }
    assert!(
        checked >= 4 && oom >= 1,
        "{checked} runs checked, {oom} OOM"
    );
}

#[test]
fn at_its_own_shape_the_base_run_is_predicted_as_measured() {
    let base = measured(&folder().join(BASE));
    let rank = predicted(base.seq, base.micro_batch);
    assert_eq!(
        rank["peak"]["predicted_bytes"],
        rank["peak"]["measured_bytes"]
    );
    // The step lines' 9.05 GB, in whole bytes, is E2E_MEM's figure to 0.01 GiB.
    let steady = rank["peak"]["measured_bytes"].as_i64().unwrap();
    assert!((steady - base.steady_peak.unwrap()).abs() < 10 << 20);
    assert_eq!(rank["capacity_bytes"], 150_109_880_320_i64);
    assert_eq!(rank["predicted_status"], "fits");
}
