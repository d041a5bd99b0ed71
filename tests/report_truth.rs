//! `report` on the kept real runs (`tests/data/e2e/`): figures nobody measured stay unmeasured,
//! runs stay apart, the prints stand beside PithTrain's step peaks and the step-0 snapshots,
//! saved tensors carry exact bytes, and the HTML axis prints clean ticks.

mod support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const E2E: &str = "tests/data/e2e";
const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

fn memprints() -> Command {
    let mut cmd = Command::cargo_bin("memprints").expect("the memprints binary");
    cmd.current_dir(support::root());
    cmd
}

/// `memprints report ARGS`'s stdout; text as wide as it comes (`--wide`), a table row one line.
fn stdout(args: &[&str]) -> String {
    let out = memprints()
        .args(["report", "--wide"])
        .args(args)
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn json(args: &[&str]) -> Value {
    let report: Value =
        serde_json::from_str(&stdout(&[args, &["--format", "json"]].concat())).unwrap();
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(support::root().join("schema/report.schema.json")).unwrap(),
    )
    .unwrap();
    let errors = support::schema::validate(&schema, &report);
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );
    report
}

fn kept(name: &str) -> PathBuf {
    support::root().join(E2E).join(name)
}

/// `0.17` GiB as the report converts it.
fn gib(text: &str) -> i64 {
    let hundredths: i64 = text.replace('.', "").parse().unwrap();
    (hundredths * GIB + 50) / 100
}

/// A temp folder holding copies of kept files under new names.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (from, to) in files {
        std::fs::copy(kept(from), dir.path().join(to)).unwrap();
    }
    dir
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn optimizer_state_is_not_measured_without_a_checkpoint_load_and_says_why() {
    let fresh = json(&[&format!("{E2E}/qwen3-tiny-pp1-instr.log")]);
    let breakdown = &fresh["runs"][0]["ranks"][0]["breakdown"];
    assert_eq!(breakdown["optimizer_state"], Value::Null);
    assert_eq!(
        breakdown["weights"],
        gib("0.02"),
        "after apply_fsdp: alloc=0.02"
    );
    let text = stdout(&[&format!("{E2E}/qwen3-tiny-pp1-instr.log")]);
    let row = text
        .lines()
        .find(|l| l.starts_with("│ optimizer state"))
        .expect("an optimizer state row");
    assert!(
        row.contains("not measured") && !row.contains("0.00"),
        "{row}"
    );
    assert!(
        text.contains(
            "Optimizer state: not measured — group 6 prints only after a checkpoint load"
        )
    );
    for format in ["markdown", "html"] {
        let out = stdout(&[
            &format!("{E2E}/qwen3-tiny-pp1-instr.log"),
            "--format",
            format,
        ]);
        assert!(
            out.contains("not measured — group 6 prints only"),
            "{format}"
        );
    }
    let resumed = json(&[&format!("{E2E}/qwen3-tiny-pp1-resume.log")]);
    let rank = &resumed["runs"][0]["ranks"][0];
    assert_eq!(
        rank["breakdown"]["optimizer_state"], rank["checkpoint"]["optimizer_state"],
        "a load prints it"
    );
    assert_eq!(rank["checkpoint"]["optimizer_state"], gib("0.03"));
}

#[test]
fn distributed_prints_leave_allocated_unmeasured_not_empty() {
    let text = stdout(&[&format!("{E2E}/dsv2-tiny-pp1-instr.log")]);
    let row = text
        .lines()
        .find(|l| l.starts_with("│ init_process_group ┆ CUDA context"))
        .expect("the CUDA context row");
    assert_eq!(row.matches("not measured").count(), 2, "{row}");
    assert!(text.contains("Allocated and cached not measured — init_process_group"));
}

#[test]
fn memory_outside_the_allocator_is_labelled_and_its_growth_in_the_step_is_called_out() {
    let report = json(&[&format!("{E2E}/qwen3-tiny-pp1-instr.log")]);
    let growth = &report["runs"][0]["ranks"][0]["non_pytorch_growth"];
    assert_eq!(
        (growth["from"].as_i64(), growth["to"].as_i64()),
        (Some(gib("1.15")), Some(gib("1.28")))
    );
    assert_eq!(growth["from_label"], "Before pipeline");
    assert_eq!(growth["to_label"], "Step4 i=0");
    let text = stdout(&[&format!("{E2E}/qwen3-tiny-pp1-instr.log")]);
    assert!(text.contains(
        "Memory outside the allocator grew by 0.13 GiB during the step, from 1.15 GiB at Before \
         pipeline to 1.28 GiB at Step4 i=0"
    ));
    assert!(
        text.contains("outside PyTorch's allocator (CUDA context, NCCL, kernels' own allocations)")
    );
    assert!(!text.contains("non-PyTorch"), "the old label is gone");
}

#[test]
fn a_folder_of_runs_gives_one_run_each_and_skips_the_snapshots_beside_them() {
    let dir = folder(&[
        ("qwen3-tiny-pp1-instr.log", "qwen3.log"),
        ("dsv2-tiny-pp1-instr.log", "dsv2.log"),
        (
            "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
            "qwen3-rank0-step0.pickle.gz",
        ),
    ]);
    let report = json(&[path(dir.path())]);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "two runs, not one merged table");
    let names: Vec<&str> = runs.iter().map(|r| r["name"].as_str().unwrap()).collect();
    let dsv2 = dir.path().join("dsv2.log").display().to_string();
    let qwen3 = dir.path().join("qwen3.log").display().to_string();
    assert_eq!(names, [dsv2.as_str(), qwen3.as_str()]);
    for (run, log) in runs
        .iter()
        .zip(["dsv2-tiny-pp1-instr.log", "qwen3-tiny-pp1-instr.log"])
    {
        assert_eq!(run["sources"].as_array().unwrap().len(), 1);
        let text = std::fs::read_to_string(kept(log)).unwrap();
        assert_eq!(
            run["stats"]["memory_lines"].as_u64(),
            Some(text.matches("[rank=").count() as u64)
        );
        let before: usize = run["ranks"][0]["pipeline"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "before_pipeline")
            .count();
        assert_eq!(before, 1, "one Before pipeline per run");
        assert_eq!(run["training"]["steps_logged"], 3, "3 steps each, not 6");
    }
    let skipped = report["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("a memory snapshot, not a log"),
        "{skipped:?}"
    );
    let text = stdout(&[path(dir.path())]);
    assert!(text.contains(&format!("Run: {dsv2}\n")));
    assert!(text.contains(&format!("Run: {qwen3}\n")));
    assert!(text.contains("Skipped ") && text.contains("a memory snapshot, not a log"));
}

#[test]
fn a_restart_appended_to_one_log_is_a_second_run_of_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let both = [
        std::fs::read(kept("qwen3-tiny-pp1-instr.log")).unwrap(),
        std::fs::read(kept("qwen3-tiny-pp1-resume.log")).unwrap(),
    ]
    .concat();
    let log = dir.path().join("train.log");
    std::fs::write(&log, both).unwrap();
    let report = json(&[path(&log)]);
    let runs = report["runs"].as_array().unwrap();
    let names: Vec<String> = runs
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            format!("{}, launch 1", log.display()),
            format!("{}, launch 2", log.display())
        ]
    );
    assert_eq!(runs[0]["ranks"][0]["checkpoint"], Value::Null);
    assert_eq!(runs[1]["ranks"][0]["checkpoint"]["param_entries"], 51);
    assert_eq!(
        (
            runs[0]["training"]["steps_logged"].as_u64(),
            runs[1]["training"]["first_step"].as_u64()
        ),
        (Some(3), Some(3))
    );
}

#[test]
fn a_binary_file_named_on_the_command_line_is_skipped_not_scanned() {
    let report = json(&[
        &format!("{E2E}/dsv2-tiny-pp1-instr.log"),
        &format!("{E2E}/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz"),
    ]);
    assert_eq!(report["inputs"].as_array().unwrap().len(), 1);
    assert_eq!(
        report["skipped"][0]["reason"],
        "a memory snapshot, not a log: pass it with --snapshots"
    );
    assert_eq!(report["stats"]["unparsed_memory_lines"], 0);
}

/// The qwen3 run's folder as the run left it: the log and its step-0 snapshot beside it.
fn qwen3_with_snapshot() -> tempfile::TempDir {
    folder(&[
        ("qwen3-tiny-pp1-instr.log", "qwen3.log"),
        (
            "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
            "memory_snapshot_rank0_step0.pickle.gz",
        ),
    ])
}

#[test]
fn the_step0_snapshot_is_found_beside_the_log_and_set_beside_the_prints() {
    let dir = qwen3_with_snapshot();
    let report = json(&[path(&dir.path().join("qwen3.log"))]);
    let view = &report["runs"][0]["memory"];
    assert_eq!(view["prints_peak"]["label"], "Step4 i=1");
    assert_eq!(view["prints_peak"]["allocated"], gib("0.17"));
    let snap = &view["snapshots"][0];
    assert_eq!(
        snap["printed_path"],
        "<snapdir>/memory_snapshot_rank0_step0.pickle"
    );
    assert_eq!(
        snap["path"],
        dir.path()
            .join("memory_snapshot_rank0_step0.pickle.gz")
            .display()
            .to_string()
    );
    let peak = snap["peak_allocated"].as_i64().unwrap();
    assert_eq!(format!("{:.2}", peak as f64 / MIB as f64), "179.98");
    assert_eq!(snap["gap_to_prints"].as_i64(), Some(peak - gib("0.17")));
    assert_eq!(
        snap["freed_after_peak"].as_i64(),
        Some(peak - snap["allocated_at_end"].as_i64().unwrap())
    );
    let top = snap["top_stacks"].as_array().unwrap();
    assert_eq!(top.len(), 5);
    // The two 32 MiB cuBLAS workspaces, owned by cuBLAS (issue 22), one asked for by the
    // frame below the unwinder (issue 11), the other by the model line of the first matmul.
    for g in &top[..2] {
        assert_eq!(g["owner"], "cuBLAS/cuBLASLt workspace", "{g}");
        assert_eq!(g["bytes"], 32 * MIB, "{g}");
    }
    assert_eq!(
        top[0]["frame"],
        "<native only, no Python frame> torch/lib/libtorch_cuda.so:61126077 at::cuda::getCurrentCUDABlasHandle()"
    );
    assert_eq!(top[1]["frame"], "pithtrain/models/qwen3_moe.py:163 forward");
    let steps = &view["steps"];
    assert_eq!(steps["profiled_step"], 1);
    assert_eq!(steps["profiled_step_peak"], gib("0.18"));
    assert_eq!(steps["unseen_by_prints"], gib("0.18") - gib("0.17"));
    assert_eq!(
        (steps["peak_step"].as_u64(), steps["peak"].as_i64()),
        (Some(2), Some(gib("0.21")))
    );
    assert_eq!(steps["later_steps_above"], gib("0.21") - gib("0.18"));

    let text = stdout(&[path(&dir.path().join("qwen3.log"))]);
    assert!(text.contains("Memory seen three ways"));
    assert!(
        text.contains("peaks at 179.98 MiB, 5.90 MiB above the rank's highest print (0.17 GiB, of which up to \
         5.12 MiB may be its rounding): memory allocated and freed again between two prints"),
        "{text}"
    );
    assert!(text.contains("at::cuda::getCurrentCUDABlasHandle()"));
    assert!(text.contains("cuBLAS/cuBLASLt workspace"));
    assert!(text.contains("A later step peaks higher: 0.21 GiB at step 2, 0.03 GiB above step 1."));
}

#[test]
fn a_snapshot_given_by_hand_fills_the_printed_one_of_its_rank_and_step() {
    let report = json(&[
        &format!("{E2E}/dsv2-tiny-pp1-instr.log"),
        "--snapshots",
        &format!("{E2E}/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz"),
    ]);
    let snaps = report["runs"][0]["memory"]["snapshots"].as_array().unwrap();
    assert_eq!(
        snaps.len(),
        1,
        "the given file is the printed rank-0 step-0 snapshot: {snaps:?}"
    );
    assert_eq!(snaps[0]["error"], Value::Null, "{snaps:?}");
    assert_eq!(
        snaps[0]["printed_path"],
        "<snapdir>/memory_snapshot_rank0_step0.pickle"
    );
    assert!(
        snaps[0]["path"]
            .as_str()
            .unwrap()
            .ends_with("dsv2-tiny-pp1-instr-rank0-step0.pickle.gz")
    );
    assert_eq!(snaps[0]["rank"], 0);
    let peak = snaps[0]["peak_allocated"].as_i64().unwrap();
    assert_eq!(format!("{:.2}", peak as f64 / MIB as f64), "219.61");
    assert_eq!(snaps[0]["gap_to_prints"].as_i64(), Some(peak - gib("0.20")));
}

#[test]
fn a_snapshot_of_another_step_given_by_hand_joins_beside_the_missing_printed_one() {
    let dir = folder(&[(
        "dsv2-tiny-pp1-instr-rank0-step0.pickle.gz",
        "dsv2-rank0-step2.pickle.gz",
    )]);
    let given = dir.path().join("dsv2-rank0-step2.pickle.gz");
    let report = json(&[
        &format!("{E2E}/dsv2-tiny-pp1-instr.log"),
        "--snapshots",
        path(&given),
    ]);
    let snaps = report["runs"][0]["memory"]["snapshots"].as_array().unwrap();
    assert_eq!(
        snaps.len(),
        2,
        "the printed one (not found) and the given one"
    );
    assert!(
        snaps[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("not found: neither <snapdir>/memory_snapshot_rank0_step0.pickle nor"),
        "{snaps:?}"
    );
    assert_eq!(snaps[1]["printed_path"], Value::Null);
    assert_eq!(snaps[1]["error"], Value::Null);
}

#[test]
fn two_runs_printing_the_same_snapshot_path_leave_it_to_the_later_one() {
    let dir = folder(&[
        ("dsv2-tiny-pp1-instr.log", "a-dsv2.log"),
        ("qwen3-tiny-pp1-instr.log", "b-qwen3.log"),
        (
            "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
            "memory_snapshot_rank0_step0.pickle.gz",
        ),
    ]);
    let report = json(&[path(dir.path())]);
    let first = &report["runs"][0]["memory"]["snapshots"][0];
    assert_eq!(first["peak_allocated"], Value::Null);
    assert!(
        first["error"]
            .as_str()
            .unwrap()
            .contains("within the time span of run"),
        "{first}: the file is the later run's by its events' time, too"
    );
    let second = &report["runs"][1]["memory"]["snapshots"][0];
    assert_eq!(second["paired_by"], "time");
    assert_eq!(
        format!(
            "{:.2}",
            second["peak_allocated"].as_f64().unwrap() / MIB as f64
        ),
        "179.98"
    );
}

#[test]
fn saved_tensors_of_the_old_format_get_exact_bytes_that_agree_with_every_summary() {
    for log in [
        "qwen3-tiny-pp1-instr.log",
        "dsv2-tiny-pp1-instr.log",
        "qwen3-tiny-pp1-resume.log",
    ] {
        let report = json(&[&format!("{E2E}/{log}")]);
        assert_eq!(report["stats"]["unparsed_memory_lines"], 0, "{log}");
        for group in report["runs"][0]["ranks"][0]["saved_tensors"]
            .as_array()
            .unwrap()
        {
            assert_eq!(group["size_from"], "tensor_sum", "{log}: {group}");
            assert_eq!(group["bytes_exact"], true);
            let tensors = group["tensors"].as_array().unwrap();
            let sum: i64 = tensors.iter().map(|t| t["size"].as_i64().unwrap()).sum();
            assert_eq!(
                sum,
                group["activations"].as_i64().unwrap() + group["weights"].as_i64().unwrap()
            );
            for t in tensors {
                assert_eq!(t["size_from"], "shape_and_dtype");
                let elements: i64 = t["shape"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d.as_i64().unwrap())
                    .product();
                let width = match t["dtype"].as_str().unwrap() {
                    "bfloat16" => 2,
                    "float32" | "int32" => 4,
                    "int64" => 8,
                    other => panic!("{other}"),
                };
                assert_eq!(t["size"].as_i64(), Some(elements * width));
            }
        }
    }
    // qwen3's layer 2 stage 1: printed `activ=4.9 MB`, exactly 5,092,608 bytes (4.86 MiB).
    let report = json(&[&format!("{E2E}/qwen3-tiny-pp1-instr.log")]);
    assert_eq!(
        report["runs"][0]["ranks"][0]["saved_tensors"][0]["activations"],
        5_092_608
    );
}

#[test]
fn saved_tensors_of_the_new_format_are_read_as_printed_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("new.log");
    std::fs::write(
        &log,
        "[rank=0] layer2 stage1 saved tensors:\n\
         [rank=0]     saved (activ): (128, 256) torch.bfloat16 (0.1 MB, 65536 bytes)\n\
         [rank=0]     saved (weight): (128, 256) torch.bfloat16 (0.1 MB, 65536 bytes)\n\
         [rank=0]     saved (activ): (2, 512, 128) torch.bfloat16 (0.2 MB, 262144 bytes)\n\
         [rank=0]   activ=0.3 MB (327680 bytes), weight=0.1 MB (65536 bytes), total=3 tensors\n\
         [rank=0] layer2 stage3 saved tensors:\n\
         [rank=0]     saved (activ): (128, 256) torch.bfloat16 (0.1 MB)\n\
         [rank=0]   activ=0.1 MB, weight=0.0 MB, total=1 tensors\n",
    )
    .unwrap();
    let report = json(&[path(&log)]);
    assert_eq!(report["stats"]["unparsed_memory_lines"], 0);
    let groups = &report["runs"][0]["ranks"][0]["saved_tensors"];
    assert_eq!(
        (
            &groups[0]["activations"],
            &groups[0]["weights"],
            &groups[0]["size_from"]
        ),
        (
            &Value::from(327_680),
            &Value::from(65_536),
            &Value::from("printed_bytes")
        )
    );
    assert_eq!(groups[0]["tensors"][1]["size_from"], "printed_bytes");
    assert_eq!(groups[0]["tensors"][1]["weight"], true);
    assert_eq!(
        (&groups[1]["activations"], &groups[1]["size_from"]),
        (&Value::from(65_536), &Value::from("tensor_sum"))
    );
}

#[test]
fn the_html_axis_prints_ticks_with_fixed_decimals() {
    let dir = qwen3_with_snapshot();
    let html = stdout(&[path(&dir.path().join("qwen3.log")), "--format", "html"]);
    assert!(html.contains(">0.15</text>"), "the 0.15 GiB tick");
    let noise = regex::Regex::new(r">\d+\.\d*0000\d+<").unwrap();
    assert!(!noise.is_match(&html), "{:?}", noise.find(&html));
}

/// Issue 22, item 2: with the rank's snapshot, the owners of every byte at the peak name the
/// buffers by what they are (cuBLAS's workspace, FSDP's unsharded gradients and all-gather
/// buffers, from the snapshot), never under a model line; every figure says where it came from,
/// and the parts add up to the device total. Fails before the owners existed.
#[test]
fn every_byte_at_the_peak_has_an_owner_and_a_source() {
    for (log, pickle) in [
        (
            "qwen3-tiny-pp1-instr.log",
            "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
        ),
        (
            "dsv2-tiny-pp1-instr.log",
            "dsv2-tiny-pp1-instr-rank0-step0.pickle.gz",
        ),
    ] {
        let log = format!("{E2E}/{log}");
        let pickle = format!("{E2E}/{pickle}");
        let report = json(&[&log, "--snapshots", &pickle]);
        let rank = &report["runs"][0]["ranks"][0];
        let owners = &rank["owners"];
        assert_eq!(owners["snapshot"], pickle.as_str());
        let rows = owners["owners"].as_array().unwrap();
        let find = |name: &str| rows.iter().find(|r| r["owner"] == name);
        let workspace = find("cuBLAS/cuBLASLt workspace").expect("a workspace row");
        assert_eq!(workspace["bytes"], 64 * MIB, "{log}");
        assert_eq!(workspace["from"], "snapshot");
        assert_eq!(workspace["kind"], "buffer");
        assert!(
            workspace["asked_by"]
                .as_str()
                .unwrap()
                .starts_with("pithtrain/models/"),
            "{workspace}"
        );
        let grads = find("FSDP unsharded gradients (accumulation)").expect("gradients");
        assert_eq!(
            (&grads["kind"], &grads["from"]),
            (&"gradients".into(), &"snapshot".into())
        );
        assert!(
            find("FSDP all-gather (unsharded weights)").is_some(),
            "{log}"
        );
        for (name, from) in [
            ("weights after setup", "prints"),
            ("activations in flight", "arithmetic"),
            ("allocator's unused reserve", "prints"),
        ] {
            assert_eq!(find(name).unwrap()["from"], from, "{name}");
        }
        // No buffer is filed under a model line: every row named after a model file is gone.
        assert!(
            rows.iter()
                .all(|r| !r["owner"].as_str().unwrap().contains("pithtrain/"))
        );
        for r in rows {
            assert!(["prints", "snapshot", "arithmetic"].contains(&r["from"].as_str().unwrap()));
        }
        let sum: i64 = rows
            .iter()
            .filter(|r| r["within"].is_null())
            .filter_map(|r| r["bytes"].as_i64())
            .sum();
        assert_eq!(sum, owners["total"].as_i64().unwrap(), "{log}");
        assert_eq!(owners["total"], rank["breakdown"]["total"]);
        let saved = rows.iter().filter(|r| r["within"] == "activations").count();
        assert!(saved >= 2, "{log}: saved tensors by layer and stage");

        let text = stdout(&[&log, "--snapshots", &pickle]);
        let summary = text
            .lines()
            .find(|l| l.trim_start().starts_with("owners"))
            .unwrap();
        assert!(summary.contains("cuBLAS/cuBLASLt workspace"), "{summary}");
        assert!(text.contains("Asked for by: "), "{text}");
        for format in ["markdown", "html"] {
            let out = stdout(&[&log, "--snapshots", &pickle, "--format", format]);
            assert!(out.contains("cuBLAS/cuBLASLt workspace"), "{format}");
            assert!(out.contains("FSDP unsharded gradients"), "{format}");
        }
    }
}
