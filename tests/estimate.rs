//! The estimator side of `report --estimate`: running PithTrain's memory estimator from outside
//! (fake estimators in temp trees for the failure modes; the real one when
//! `MEMPRINTS_PITHTRAIN` names a checkout) and comparing its recorded output with the kept real
//! runs.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use memprints_estimate::compare::{Direction, MeasuredPrint, MeasuredSaved};
use memprints_estimate::corrections::{Mismatch, Side};
use memprints_estimate::figures::{Source, from_driver_json};
use memprints_estimate::schedule::PrintPoint;
use memprints_estimate::{
    Estimate, EstimateError, EstimatorOptions, LoggedConfig, Measured, Overrides, RunSettings,
    Tolerance, compare, estimate,
};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
const CONFIGS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/e2e/configs");

fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

fn recorded(name: &str) -> Vec<Estimate> {
    from_driver_json(&read(format!("{DATA}/estimate/{name}.json"))).unwrap()
}

/// A temp tree holding `tools/memory_estimator/__main__.py` = `main_py`.
fn fake_tree(main_py: &str) -> tempfile::TempDir {
    let tree = tempfile::tempdir().unwrap();
    let package = tree.path().join("tools/memory_estimator");
    fs::create_dir_all(&package).unwrap();
    fs::write(tree.path().join("tools/__init__.py"), "").unwrap();
    fs::write(package.join("__init__.py"), "").unwrap();
    fs::write(package.join("__main__.py"), main_py).unwrap();
    tree
}

/// The kept qwen3 tiny run's settings, with its config from `e2e/configs`.
fn qwen3_tiny_settings(tree: &Path) -> RunSettings {
    let log = read(format!("{DATA}/e2e/qwen3-tiny-pp1-instr.log"));
    let overrides = Overrides {
        config: Some(PathBuf::from(CONFIGS).join("qwen3-moe-tiny.json")),
        ..Overrides::default()
    };
    RunSettings::resolve(LoggedConfig::find_in(&log).as_ref(), &overrides, tree).unwrap()
}

fn run_fake(
    main_py: &str,
    timeout: Duration,
) -> (tempfile::TempDir, Result<Vec<Estimate>, EstimateError>) {
    let tree = fake_tree(main_py);
    let mut options = EstimatorOptions::new(tree.path());
    options.timeout = timeout;
    let settings = qwen3_tiny_settings(tree.path());
    let result = estimate(&options, &settings, &[0]);
    (tree, result)
}

#[test]
fn a_tree_without_the_estimator_says_where_it_looked() {
    let tree = tempfile::tempdir().unwrap();
    let settings = qwen3_tiny_settings(tree.path());
    let err = estimate(&EstimatorOptions::new(tree.path()), &settings, &[0]).unwrap_err();
    assert!(matches!(err, EstimateError::EstimatorNotFound { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "no PithTrain memory estimator in {} (tools/memory_estimator/ is missing); pass \
             --repo with a PithTrain checkout that has it",
            tree.path().display()
        )
    );
}

#[test]
fn an_estimator_that_stops_is_reported_with_its_last_stderr_line() {
    let main_py = r#"
import sys


def run_estimate(**kwargs):
    raise AssertionError("not reached")


def main():
    print("Error: num_chunks (4) must be >= pp_size * 2 (8). Increase global_batch_size.", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
    main()
"#;
    let (_tree, result) = run_fake(main_py, Duration::from_secs(60));
    assert_eq!(
        result.unwrap_err().to_string(),
        "the memory estimator failed: Error: num_chunks (4) must be >= pp_size * 2 (8). \
         Increase global_batch_size."
    );
}

#[test]
fn an_estimator_that_raises_is_reported_with_its_exception() {
    let main_py = "def run_estimate(**kwargs):\n    pass\n\n\ndef main():\n    raise ValueError('bad config')\n";
    let (_tree, result) = run_fake(main_py, Duration::from_secs(60));
    assert_eq!(
        result.unwrap_err().to_string(),
        "the memory estimator failed: ValueError: bad config"
    );
}

#[test]
fn an_estimator_that_hangs_is_stopped_at_the_timeout() {
    let main_py = "import time\n\n\ndef run_estimate(**kwargs):\n    pass\n\n\ndef main():\n    time.sleep(60)\n";
    let started = Instant::now();
    let (_tree, result) = run_fake(main_py, Duration::from_secs(1));
    let err = result.unwrap_err();
    assert!(
        matches!(err, EstimateError::TimedOut { seconds: 1 }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "the memory estimator did not finish within 1 s (it was stopped)"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn an_estimator_that_imports_torch_is_refused_even_when_it_catches_the_error() {
    for main_py in [
        "import torch\n\n\ndef run_estimate(**kwargs):\n    pass\n\n\ndef main():\n    pass\n",
        "try:\n    import torch.cuda\nexcept ImportError:\n    torch = None\n\n\ndef run_estimate(**kwargs):\n    pass\n\n\ndef main():\n    pass\n",
    ] {
        let (_tree, result) = run_fake(main_py, Duration::from_secs(60));
        let err = result.unwrap_err();
        assert!(matches!(err, EstimateError::TorchImported { .. }), "{err}");
        assert!(
            err.to_string()
                .starts_with("the memory estimator imported torch"),
            "{err}"
        );
    }
}

#[test]
fn a_missing_python_is_named() {
    let tree = fake_tree("def main():\n    pass\n");
    let mut options = EstimatorOptions::new(tree.path());
    options.python = "/nonexistent/python3".into();
    let settings = qwen3_tiny_settings(tree.path());
    let err = estimate(&options, &settings, &[0]).unwrap_err();
    assert!(matches!(err, EstimateError::PythonNotFound { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot run `/nonexistent/python3`: "),
        "{err}"
    );
    assert!(
        err.to_string()
            .ends_with("; pass --python with a Python 3 interpreter")
    );
}

#[test]
fn changed_estimator_objects_fall_back_to_its_text_output() {
    // An estimator whose main() prints the recorded text but never calls run_estimate: the
    // driver cannot read objects, so memprints runs it again for its text.
    let text_file = format!("{DATA}/estimate/qwen3-tiny-pp1-rank0.txt");
    let main_py = format!(
        "def run_estimate(**kwargs):\n    pass\n\n\ndef main():\n    with open({text_file:?}) as f:\n        print(f.read(), end='')\n\n\nif __name__ == '__main__':\n    main()\n"
    );
    let (tree, result) = run_fake(&main_py, Duration::from_secs(60));
    let estimates = result.unwrap();
    assert_eq!(estimates.len(), 1);
    let text = &estimates[0];
    assert_eq!(text.source, Source::Text);
    assert_eq!(
        text.notes[0],
        "the driver could not read the estimator's objects (memprints: the estimator's objects \
         changed: main() called run_estimate 0 times for one pp rank)"
    );
    let exact = &recorded("qwen3-tiny-pp1")[0];
    assert_eq!(text.params, exact.params);
    assert_eq!(text.peak().label, exact.peak().label);
    assert!(
        text.notes
            .iter()
            .any(|n| n.starts_with("the rotary cos/sin caches are counted at 40960")),
        "{:?}",
        text.notes
    );
    assert!(
        !tree
            .path()
            .join("tools/memory_estimator/__pycache__")
            .exists(),
        "the run wrote bytecode into the user's tree"
    );
}

/// `0.17` GiB as the report converts it: hundredths × 2³⁰ / 100, rounded half away from zero.
fn gib(text: &str) -> i64 {
    let hundredths: i64 = text.replace('.', "").parse().unwrap();
    (hundredths * (1 << 30) + 50) / 100
}

/// `4.9` MB as the report converts it.
fn mb(text: &str) -> i64 {
    let tenths: i64 = text.replace('.', "").parse().unwrap();
    (tenths * (1 << 20) + 5) / 10
}

/// The pipeline prints of a kept log, written out by hand and checked line by line against it.
fn pipeline(log: &str, prints: &[(&str, &str, &str, &str)]) -> Vec<MeasuredPrint> {
    prints
        .iter()
        .map(|(label, alloc, cached, non_pt)| {
            let figures = format!("alloc={alloc} cached={cached} non-pt={non_pt}");
            let found = log.lines().any(|l| {
                l.starts_with(&format!("[rank=0 pp=0] {label}: ")) && l.ends_with(&figures)
            });
            assert!(found, "no `{label}: … {figures}` line in the log");
            MeasuredPrint {
                point: PrintPoint::parse(label).unwrap(),
                allocated: gib(alloc),
                cached: gib(cached),
                non_pytorch: gib(non_pt),
            }
        })
        .collect()
}

fn saved(log: &str, groups: &[(u32, u8, &str)]) -> Vec<MeasuredSaved> {
    let lines: Vec<&str> = log.lines().collect();
    groups
        .iter()
        .map(|&(layer, stage, activ)| {
            let header = format!("[rank=0] layer{layer} stage{stage} saved tensors:");
            let at = lines.iter().position(|l| *l == header).expect("header");
            let summary = lines[at..]
                .iter()
                .find(|l| l.contains("activ="))
                .expect("summary");
            assert!(summary.contains(&format!("activ={activ} MB")), "{summary}");
            MeasuredSaved {
                layer,
                stage,
                activations: mb(activ),
            }
        })
        .collect()
}

fn qwen3_tiny_measured() -> Measured {
    let log = read(format!("{DATA}/e2e/qwen3-tiny-pp1-instr.log"));
    assert!(log.contains("[rank=0] setup_model | after apply_fsdp: alloc=0.02 cached=0.02"));
    assert!(!log.contains("load_ckpt"));
    Measured {
        pp_rank: 0,
        pipeline: pipeline(
            &log,
            &[
                ("Before pipeline", "0.02", "0.02", "1.15"),
                ("After Step1 (0 F0)", "0.02", "0.02", "1.15"),
                ("Step2 i=0 forward_chunk(0)", "0.08", "0.01", "1.21"),
                ("Step2 i=0 forward_chunk(1)", "0.11", "0.02", "1.21"),
                ("After Step2 (1 F0F1)", "0.11", "0.02", "1.21"),
                ("After Step3 (0 B1W1F1)", "0.11", "0.02", "1.21"),
                ("Step4 i=0", "0.16", "0.03", "1.28"),
                ("Step4 i=1", "0.17", "0.02", "1.28"),
                ("Step4 i=2", "0.17", "0.02", "1.28"),
                ("Step4 i=3", "0.17", "0.03", "1.28"),
                ("Step4 i=4", "0.17", "0.03", "1.28"),
                ("Step4 i=5", "0.17", "0.03", "1.28"),
                ("Step4 i=6", "0.17", "0.03", "1.28"),
                ("After Step4 (7 F0B1F1B0)", "0.17", "0.03", "1.28"),
                ("After Step8 (end of pipeline)", "0.12", "0.07", "1.28"),
            ],
        ),
        params_after_setup: Some(gib("0.02")),
        optimizer_state: None,
        resumed: false,
        saved_tensors: saved(
            &log,
            &[
                (2, 1, "4.9"),
                (2, 3, "5.7"),
                (2, 5, "1.0"),
                (3, 1, "4.9"),
                (3, 3, "5.9"),
                (3, 5, "1.0"),
            ],
        ),
        cublas_workspace: None,
        workspace_from: None,
    }
}

#[test]
fn the_qwen3_tiny_run_against_its_estimate() {
    let estimate = &recorded("qwen3-tiny-pp1")[0];
    let measured = qwen3_tiny_measured();
    let result = compare(estimate, &measured, Tolerance::default());

    // Every print found its estimator state; the 7 Step4 prints and After Step4 sit after an
    // overlap, and are paired with the state once the backward chunk is freed.
    let prints: Vec<_> = result.events.iter().filter(|r| r.print.is_some()).collect();
    assert_eq!(prints.len(), measured.pipeline.len());
    assert!(prints.iter().all(|r| r.estimator_event.is_some()));
    let step4 = prints
        .iter()
        .find(|r| r.print.as_deref() == Some("Step4 i=0"))
        .unwrap();
    assert_eq!(
        step4.estimator_event.as_deref(),
        Some("S4.i0 fwd_bwd(p1,p0) fc1/bc0")
    );
    assert!(step4.after_overlap);
    let peak_event = &estimate.events[estimate.peak_index];
    // No checkpoint was loaded: the estimator's optimizer state is out of every event.
    assert_eq!(
        step4.pair.estimated_bytes,
        peak_event.allocated_after.map(|a| a - estimate.optimizer)
    );
    assert_eq!(prints.iter().filter(|r| r.after_overlap).count(), 8);
    // Estimator events no print sees are kept, marked not measured.
    let unseen: Vec<_> = result
        .events
        .iter()
        .filter(|r| r.print.is_none())
        .map(|r| r.estimator_event.as_deref().unwrap())
        .collect();
    assert!(unseen.contains(&"S4.i0.last_rank fwd(p0) c1"));
    assert!(unseen.contains(&"S6.i0 bwd(p1,zb=False) c7"));
    assert!(
        result
            .events
            .iter()
            .filter(|r| r.print.is_none())
            .all(|r| r.pair.measured_bytes.is_none() && r.pair.diff_bytes.is_none())
    );

    // The fixed non-PyTorch figure is the one far-off component.
    let non_pt = result
        .components
        .iter()
        .find(|c| c.label.starts_with("outside PyTorch's allocator"))
        .unwrap();
    assert_eq!(non_pt.pair.estimated_bytes, Some(5_196_910_427));
    // No snapshot names the workspace here: non-pt= as printed.
    assert_eq!(non_pt.pair.measured_bytes, Some(gib("1.28")));
    assert_eq!(non_pt.pair.off, Some(Direction::Over));
    assert_eq!(
        result.peak.print_at_estimator_peak.as_deref(),
        Some("Step4 i=0")
    );
    assert_eq!(result.peak.measured_print.as_deref(), Some("Step4 i=1"));
    assert!(!result.verdict.within_tolerance);
    assert_eq!(
        result.verdict.line,
        "pp rank 0: 2 of 26 paired figures off by more than 10% or 128 MiB: outside PyTorch's \
         allocator over by 3.56 GiB (+278%); fragmentation over by 0.48 GiB (+2397%)"
    );
    insta::assert_json_snapshot!("qwen3_tiny_pp1_comparison", result);
}

#[test]
fn the_deepseek_v2_tiny_run_against_its_estimate() {
    let log = read(format!("{DATA}/e2e/dsv2-tiny-pp1-instr.log"));
    assert!(log.contains("[rank=0] setup_model | after apply_fsdp: alloc=0.03 cached=0.02"));
    let measured = Measured {
        pp_rank: 0,
        pipeline: pipeline(
            &log,
            &[
                ("Before pipeline", "0.03", "0.02", "1.15"),
                ("After Step1 (0 F0)", "0.03", "0.02", "1.15"),
                ("Step2 i=0 forward_chunk(0)", "0.09", "0.01", "1.21"),
                ("Step2 i=0 forward_chunk(1)", "0.13", "0.01", "1.22"),
                ("After Step2 (1 F0F1)", "0.13", "0.01", "1.22"),
                ("After Step3 (0 B1W1F1)", "0.13", "0.01", "1.22"),
                ("Step4 i=0", "0.19", "0.03", "1.28"),
                ("Step4 i=1", "0.20", "0.03", "1.28"),
                ("Step4 i=2", "0.20", "0.03", "1.28"),
                ("Step4 i=3", "0.20", "0.03", "1.28"),
                ("Step4 i=4", "0.20", "0.03", "1.28"),
                ("Step4 i=5", "0.20", "0.03", "1.28"),
                ("Step4 i=6", "0.20", "0.03", "1.28"),
                ("After Step4 (7 F0B1F1B0)", "0.20", "0.03", "1.28"),
                ("After Step8 (end of pipeline)", "0.14", "0.10", "1.28"),
            ],
        ),
        params_after_setup: Some(gib("0.03")),
        optimizer_state: None,
        resumed: false,
        saved_tensors: saved(&log, &[(2, 1, "10.6"), (2, 3, "5.9"), (2, 5, "1.0")]),
        cublas_workspace: None,
        workspace_from: None,
    };
    let result = compare(
        &recorded("dsv2-tiny-pp1")[0],
        &measured,
        Tolerance::default(),
    );
    assert!(
        result
            .events
            .iter()
            .filter(|r| r.print.is_some())
            .all(|r| r.pair.paired())
    );
    insta::assert_json_snapshot!("dsv2_tiny_pp1_comparison", result);
}

#[test]
fn a_run_whose_schedule_differs_from_the_estimate_is_not_paired_with_neighbours() {
    // The qwen3 tiny prints against the pp = 2 estimate of rank 1: step 4 ran 7 iterations, the
    // estimator simulated 6.
    let estimate = &recorded("qwen3-tiny-pp2")[1];
    let result = compare(estimate, &qwen3_tiny_measured(), Tolerance::default());
    let unpaired: Vec<_> = result
        .events
        .iter()
        .filter(|r| r.estimator_event.is_none())
        .map(|r| r.print.as_deref().unwrap())
        .collect();
    assert_eq!(unpaired, ["Step4 i=6"]);
    assert!(
        result
            .notes
            .iter()
            .any(|n| n.starts_with("step 2 ran 1 iteration(s) but the estimator simulated 2")),
        "{:?}",
        result.notes
    );
    assert!(result.notes.iter().any(
        |n| n == "no estimator event for Step4 i=6: its schedule lacks that step or iteration"
    ));
}

#[test]
fn an_absent_side_stays_absent_and_a_loaded_optimizer_state_is_paired() {
    let estimate = &recorded("qwen3-tiny-pp1")[0];
    let measured = Measured {
        pp_rank: 0,
        optimizer_state: Some(gib("0.03")),
        ..Measured::default()
    };
    let result = compare(estimate, &measured, Tolerance::default());
    let optimizer = result
        .components
        .iter()
        .find(|c| c.label == "optimizer state")
        .unwrap();
    assert_eq!(optimizer.pair.estimated_bytes, Some(estimate.optimizer));
    assert_eq!(optimizer.pair.measured_bytes, Some(gib("0.03")));
    assert_eq!(
        optimizer.pair.off, None,
        "15 MiB apart: inside the 128 MiB floor"
    );
    let params = &result.components[0];
    assert_eq!(
        (params.pair.measured_bytes, params.pair.diff_bytes),
        (None, None)
    );
    assert_eq!(result.peak.pair.measured_bytes, None);
    assert!(
        result
            .events
            .iter()
            .all(|r| r.pair.measured_bytes.is_none())
    );
    assert!(result.verdict.within_tolerance);
    let strict = Tolerance {
        relative: 0.10,
        absolute_bytes: 0,
    };
    let result = compare(estimate, &measured, strict);
    assert_eq!(result.verdict.off.len(), 1);
    assert_eq!(result.verdict.off[0].what, "optimizer state");
    assert_eq!(result.verdict.off[0].direction, Direction::Over);
}

#[test]
fn the_workspace_and_the_optimizer_state_are_put_on_one_bookkeeping_before_pairing() {
    // The qwen3 run from scratch (no checkpoint load) and the 64 MiB of cuBLAS/cuBLASLt
    // workspace its step-0 snapshot names at the peak (two 32 MiB workspaces).
    let estimate = &recorded("qwen3-tiny-pp1")[0];
    let workspace: i64 = 64 << 20;
    let raw = qwen3_tiny_measured();
    let measured = Measured {
        cublas_workspace: Some(workspace),
        workspace_from: Some("rank0-step0.pickle.gz".to_owned()),
        ..raw.clone()
    };
    let result = compare(estimate, &measured, Tolerance::default());

    let [ws, opt] = result.corrections.as_slice() else {
        panic!("two corrections: {:?}", result.corrections);
    };
    assert_eq!(
        (ws.mismatch, ws.bytes, ws.side, ws.applied),
        (Mismatch::CublasWorkspace, workspace, Side::Measured, true)
    );
    assert!(ws.from.starts_with("allocated") && ws.to.starts_with("outside PyTorch's allocator"));
    assert!(ws.why.contains("rank0-step0.pickle.gz"), "{}", ws.why);
    // Out of the peak and every print from the first backward on (Step4 i=0 …).
    let moved: Vec<&str> = raw
        .pipeline
        .iter()
        .map(|p| p.point.to_string())
        .filter(|l| ws.figures.contains(l))
        .map(|l| {
            raw.pipeline
                .iter()
                .find(|p| p.point.to_string() == l)
                .unwrap()
        })
        .map(|p| match p.point {
            PrintPoint::Step4 { .. } => "step4",
            PrintPoint::AfterStep4 { .. } => "after step4",
            PrintPoint::AfterStep8 => "after step8",
            _ => "earlier",
        })
        .collect();
    assert_eq!(moved.len(), 9);
    assert!(!moved.contains(&"earlier"), "{moved:?}");
    for name in ["peak", "dynamic at the peak", "outside PyTorch's allocator"] {
        assert!(ws.figures.iter().any(|f| f == name), "{name}");
    }
    assert_eq!(
        (opt.mismatch, opt.bytes, opt.side, opt.applied),
        (
            Mismatch::OptimizerState,
            estimate.optimizer,
            Side::Estimated,
            true
        )
    );
    assert_eq!(opt.bytes, 48_322_560);
    assert_eq!(opt.figures.len(), 1 + estimate.events.len());

    // The compared figures are the corrected ones.
    let peak = raw.peak().unwrap();
    assert_eq!(result.peak.measured_print.as_deref(), Some("Step4 i=1"));
    assert_eq!(
        result.peak.pair.measured_bytes,
        Some(peak.allocated - workspace)
    );
    assert_eq!(
        result.peak.pair.estimated_bytes,
        Some(estimate.peak().allocated - estimate.optimizer)
    );
    let component = |prefix: &str| {
        result
            .components
            .iter()
            .find(|c| c.label.starts_with(prefix))
            .unwrap()
            .pair
    };
    assert_eq!(
        component("outside PyTorch's allocator").measured_bytes,
        Some(peak.non_pytorch + workspace)
    );
    let before = raw.pipeline[0].allocated;
    assert_eq!(
        component("dynamic at the peak").measured_bytes,
        Some(peak.allocated - before - workspace)
    );
    for row in result.events.iter().filter(|r| r.print.is_some()) {
        let print = raw
            .pipeline
            .iter()
            .find(|p| Some(p.point.to_string()) == row.print)
            .unwrap();
        let moved = if ws.figures.contains(row.print.as_ref().unwrap()) {
            workspace
        } else {
            0
        };
        assert_eq!(row.pair.measured_bytes, Some(print.allocated - moved));
    }
    assert!(
        !result.notes.iter().any(|n| n.starts_with("no checkpoint")),
        "the correction replaces the note"
    );

    // A loaded checkpoint: the optimizer state is measured, nothing taken out.
    let resumed = Measured {
        optimizer_state: Some(gib("0.03")),
        ..measured.clone()
    };
    let result = compare(estimate, &resumed, Tolerance::default());
    assert_eq!(result.corrections.len(), 1);
    assert_eq!(
        result.peak.pair.estimated_bytes,
        Some(estimate.peak().allocated)
    );

    // No snapshot: the workspace is not moved, and the correction says by how much it may skew.
    let result = compare(estimate, &raw, Tolerance::default());
    let ws = &result.corrections[0];
    assert_eq!(
        (ws.mismatch, ws.applied, ws.bytes),
        (Mismatch::CublasWorkspace, false, 1 << 29)
    );
    assert!(ws.figures.is_empty());
    assert!(ws.why.starts_with("no memory snapshot of this rank names"));
    assert_eq!(result.peak.pair.measured_bytes, Some(peak.allocated));
}

fn without_notes(mut estimates: Vec<Estimate>) -> Vec<Estimate> {
    for e in &mut estimates {
        e.notes.clear();
    }
    estimates
}

#[test]
fn the_real_estimator_gives_the_recorded_figures() {
    let Some(tree) = support::pithtrain::checkout() else {
        return;
    };
    let options = EstimatorOptions::new(&tree);
    let settings = qwen3_tiny_settings(&tree);
    let estimates = estimate(&options, &settings, &[0]).unwrap();
    assert_eq!(estimates[0].source, Source::Driver);
    let notes = &estimates[0].notes;
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert!(notes[0].starts_with("the rotary cos/sin caches are counted at 40960"));
    assert!(notes[1].contains("assumed 1 GPUs"), "{notes:?}");
    assert_eq!(without_notes(estimates), recorded("qwen3-tiny-pp1"));

    let pp2 = RunSettings {
        pp: 2,
        world: 2,
        ..settings.clone()
    };
    let estimates = estimate(&options, &pp2, &[0, 1]).unwrap();
    assert_eq!(without_notes(estimates), recorded("qwen3-tiny-pp2"));

    let too_few_chunks = RunSettings {
        global_batch_size: 4,
        ..pp2
    };
    let err = estimate(&options, &too_few_chunks, &[0]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the memory estimator failed: Error: num_chunks (2) must be >= pp_size * 2 (4). \
         Increase global_batch_size or decrease micro_batch_size."
    );
}

/// The pipeline prints the instrumentation writes on pp rank `r` of `pp` with `n` chunks, in
/// order (`templates/pipeline.py` inside `DualPipeV.step()`'s loops).
fn prints_of(pp: u32, r: u32, n: u32) -> Vec<PrintPoint> {
    use memprints_estimate::schedule::Step3At::*;
    let (step1, step2, step3, step4) = (2 * (pp - r - 1), r + 1, pp - r - 1, n - 2 * pp + r + 1);
    let mut prints = vec![PrintPoint::BeforePipeline];
    prints.extend((0..step1).map(|i| PrintPoint::Step1Forward { i }));
    prints.push(PrintPoint::AfterStep1 { count: step1 });
    for i in 0..step2 {
        prints.push(PrintPoint::Step2Forward { i, phase: 0 });
        prints.push(PrintPoint::Step2Forward { i, phase: 1 });
    }
    prints.push(PrintPoint::AfterStep2 { count: step2 });
    for i in 0..step3 {
        for at in [BeforeB1, AfterB1, AfterW1, AfterF1] {
            prints.push(PrintPoint::Step3 { i, at });
        }
    }
    prints.push(PrintPoint::AfterStep3 { count: step3 });
    prints.extend((0..step4).map(|i| PrintPoint::Step4 { i }));
    prints.push(PrintPoint::AfterStep4 { count: step4 });
    prints.push(PrintPoint::AfterStep8);
    prints
}

#[test]
fn every_print_finds_its_estimator_state_on_pp_1_2_and_4_and_every_rank() {
    let checked = [
        ("qwen3-tiny-pp1", 0, "Before pipeline", "static_baseline"),
        (
            "qwen3-tiny-pp1",
            0,
            "After Step3 (0 B1W1F1)",
            "S2.i0 fwd(p1) c0",
        ),
        (
            "qwen3-tiny-pp1",
            0,
            "Step4 i=0",
            "S4.i0 fwd_bwd(p1,p0) fc1/bc0",
        ),
        (
            "qwen3-tiny-pp1",
            0,
            "After Step8 (end of pipeline)",
            "S8.i0 weight_chunk",
        ),
        ("qwen3-tiny-pp2", 0, "Step1 F0 i=1", "S1.i1 fwd(p0) c1"),
        (
            "qwen3-tiny-pp2",
            0,
            "Step3 i=0 before B1",
            "S2.i0 fwd(p1) c0",
        ),
        (
            "qwen3-tiny-pp2",
            0,
            "Step3 i=0 after B1",
            "S3.i0 bwd(p1,zb=True) c0",
        ),
        (
            "qwen3-tiny-pp2",
            0,
            "Step3 i=0 after W1",
            "S3.i0 weight_chunk",
        ),
        (
            "qwen3-tiny-pp2",
            0,
            "After Step3 (1 B1W1F1)",
            "S3.i0 fwd(p1) c1",
        ),
        (
            "qwen3-tiny-pp2",
            0,
            "Step4 i=0",
            "S4.i0 fwd_bwd(p1,p0) fc2/bc0",
        ),
        ("qwen3-tiny-pp2", 1, "After Step1 (0 F0)", "static_baseline"),
        (
            "qwen3-tiny-pp2",
            1,
            "Step2 i=1 forward_chunk(0)",
            "S2.i1 fwd(p0) c1",
        ),
        (
            "qwen3-tiny-pp2",
            1,
            "Step4 i=0",
            "S4.i0 fwd_bwd(p1,p0) fc2/bc0",
        ),
        (
            "qwen3-tiny-pp2",
            1,
            "After Step8 (end of pipeline)",
            "S8.i1 weight_chunk",
        ),
        ("qwen3-big-pp4", 0, "After Step1 (6 F0)", "S1.i5 fwd(p0) c5"),
        (
            "qwen3-big-pp4",
            0,
            "Step3 i=2 before B1",
            "S3.i1 fwd(p1) c2",
        ),
        (
            "qwen3-big-pp4",
            0,
            "After Step4 (1 F0B1F1B0)",
            "S4.i0 fwd_bwd(p1,p0) fc4/bc0",
        ),
        (
            "qwen3-big-pp4",
            2,
            "Step2 i=2 forward_chunk(1)",
            "S2.i2 fwd(p1) c2",
        ),
        (
            "qwen3-big-pp4",
            2,
            "Step3 i=0 before B1",
            "S2.i2 fwd(p1) c2",
        ),
        (
            "qwen3-big-pp4",
            3,
            "After Step3 (0 B1W1F1)",
            "S2.i3 fwd(p1) c3",
        ),
        (
            "qwen3-big-pp4",
            3,
            "Step4 i=3",
            "S4.i3 fwd_bwd(p1,p0) fc7/bc3",
        ),
    ];
    let mut seen = 0;
    for name in ["qwen3-tiny-pp1", "qwen3-tiny-pp2", "qwen3-big-pp4"] {
        for estimate in recorded(name) {
            let (pp, r, n) = (
                estimate.parallel.pp,
                estimate.pp_rank,
                estimate.parallel.num_chunks,
            );
            let schedule = estimate.schedule();
            for point in prints_of(pp, r, n) {
                let label = point.to_string();
                let found = schedule
                    .counterpart(&point)
                    .unwrap_or_else(|| panic!("{name} rank {r}: no counterpart for {label}"));
                let overlap = matches!(
                    point,
                    PrintPoint::Step4 { .. } | PrintPoint::AfterStep4 { .. }
                );
                assert_eq!(found.after_overlap, overlap, "{name} rank {r}: {label}");
                let event = &estimate.events[found.index].label;
                for (_, _, _, expected) in checked
                    .iter()
                    .filter(|(n, rank, l, _)| *n == name && *rank == r && *l == label)
                {
                    assert_eq!(event, expected, "{name} rank {r}: {label}");
                    seen += 1;
                }
            }
        }
    }
    assert_eq!(seen, checked.len(), "every checked print was printed");
}
