//! `memprints report --estimate` end to end: on each kept real log, against a fake estimator tree
//! that replays the driver outputs recorded in `tests/data/estimate/` (so no PithTrain is
//! needed), and against the real tree when `MEMPRINTS_PITHTRAIN` names one.

mod support;

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const E2E: &str = "tests/data/e2e";

/// The kept logs, the recorded estimate of the same settings, and the run's model config: the
/// first GPU run's (`tests/data/e2e/`) and the second's, with default `add` arguments
/// (`tests/data/e2e/defaults-pp1/`).
const RUNS: [(&str, &str, &str); 7] = [
    (
        "qwen3-tiny-pp1-instr.log",
        "qwen3-tiny-pp1",
        "qwen3-moe-tiny.json",
    ),
    (
        "qwen3-tiny-pp1-resume.log",
        "qwen3-tiny-pp1",
        "qwen3-moe-tiny.json",
    ),
    (
        "dsv2-tiny-pp1-instr.log",
        "dsv2-tiny-pp1",
        "deepseek-v2-tiny.json",
    ),
    (
        "defaults-pp1/qwen3-tiny-pp1-instr.log",
        "qwen3-tiny-pp1",
        "qwen3-moe-tiny.json",
    ),
    (
        "defaults-pp1/qwen3-tiny-pp1-resume.log",
        "qwen3-tiny-pp1",
        "qwen3-moe-tiny.json",
    ),
    (
        "defaults-pp1/dsv2-tiny-pp1-instr.log",
        "dsv2-tiny-pp1",
        "deepseek-v2-tiny.json",
    ),
    (
        "defaults-pp1/gpt-oss-tiny-pp1-instr.log",
        "gpt-oss-tiny-pp1",
        "gpt-oss-tiny.json",
    ),
];

fn root() -> &'static Path {
    support::root()
}

/// A temp PithTrain look-alike whose estimator replays `tests/data/estimate/<recorded>.json`.
fn fake_tree(recorded: &str) -> tempfile::TempDir {
    let tree = tempfile::tempdir().unwrap();
    let package = tree.path().join("tools/memory_estimator");
    fs::create_dir_all(&package).unwrap();
    fs::create_dir_all(tree.path().join("pithtrain")).unwrap();
    fs::write(tree.path().join("pithtrain/__init__.py"), "").unwrap();
    fs::write(tree.path().join("tools/__init__.py"), "").unwrap();
    fs::write(package.join("__init__.py"), "").unwrap();
    fs::copy(
        root().join("tests/data/estimate/fake_estimator.py"),
        package.join("__main__.py"),
    )
    .unwrap();
    fs::copy(
        root().join(format!("tests/data/estimate/{recorded}.json")),
        package.join("recorded.json"),
    )
    .unwrap();
    tree
}

fn config(name: &str) -> PathBuf {
    root().join("e2e/configs").join(name)
}

/// The report as `memprints report ARGS` prints it; text as wide as it comes (`--wide`), so
/// that a table's row is one line. Exit 0, or 2 when the estimator could not run (the report is
/// written all the same, the reason inside it and on stderr).
fn report(cwd: &Path, args: &[&str]) -> String {
    let out = Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(cwd)
        .arg("report")
        .arg("--wide")
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => assert!(!stderr.contains("warning: --estimate"), "{stderr}"),
        Some(2) => assert!(stderr.contains("warning: --estimate: "), "{stderr}"),
        code => panic!("exit {code:?}: {stderr}"),
    }
    String::from_utf8(out.stdout).unwrap()
}

fn json(cwd: &Path, args: &[&str]) -> Value {
    let report: Value =
        serde_json::from_str(&report(cwd, &[args, &["--format", "json"]].concat())).unwrap();
    let schema: Value = serde_json::from_str(
        &fs::read_to_string(root().join("schema/report.schema.json")).unwrap(),
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

fn log(name: &str) -> String {
    root().join(E2E).join(name).display().to_string()
}

fn estimate_args<'a>(log: &'a str, tree: &'a Path, config: &'a Path) -> Vec<&'a str> {
    vec![
        log,
        "--estimate",
        "--repo",
        tree.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ]
}

/// Every measured figure of `estimate` is the plain report's figure for the same thing.
fn assert_measured_as_in_the_plain_report(plain: &Value, estimate: &Value, what: &str) {
    let rank = &plain["ranks"][0];
    let pipeline = rank["pipeline"].as_array().unwrap();
    let events = estimate["events"].as_array().unwrap();
    let printed: Vec<&Value> = events.iter().filter(|e| !e["print"].is_null()).collect();
    assert_eq!(
        printed.len(),
        pipeline.len(),
        "{what}: every print is paired"
    );
    for e in &printed {
        let entry = pipeline
            .iter()
            .find(|p| p["label"] == e["print"])
            .unwrap_or_else(|| panic!("{what}: {} is not in the report", e["print"]));
        assert_eq!(
            e["measured_bytes"], entry["allocated"],
            "{what}: {}",
            e["print"]
        );
        assert!(e["estimated_bytes"].is_i64(), "{what}: {}", e["print"]);
    }
    for e in events.iter().filter(|e| e["print"].is_null()) {
        assert_eq!(
            e["measured_bytes"],
            Value::Null,
            "{what}: nobody measured it"
        );
    }
    let peak = &rank["peak"];
    assert_eq!(
        estimate["peak"]["measured_bytes"], peak["allocated"],
        "{what}"
    );
    assert_eq!(estimate["peak"]["measured_print"], peak["label"], "{what}");
    let before = &pipeline[0];
    assert_eq!(before["kind"], "before_pipeline");
    let setup_fsdp = rank["setup"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["label"] == "after apply_fsdp")
        .unwrap();
    let saved = rank["saved_tensors"].as_array().unwrap();
    for c in estimate["components"].as_array().unwrap() {
        let want = match c["component"].as_str().unwrap() {
            "parameters" => setup_fsdp["allocated"].clone(),
            "optimizer_state" => rank["checkpoint"]["optimizer_state"].clone(),
            "dynamic_at_peak" => Value::from(
                peak["allocated"].as_i64().unwrap() - before["allocated"].as_i64().unwrap(),
            ),
            "non_pytorch" => peak["non_pytorch"].clone(),
            "fragmentation" => peak["cached"].clone(),
            "saved_tensors" => {
                let label = c["label"].as_str().unwrap();
                let group = saved
                    .iter()
                    .find(|g| {
                        label
                            == format!(
                                "layer {} stage {} saved tensors",
                                g["layer"],
                                g["stage"].as_str().unwrap().trim_start_matches("stage")
                            )
                    })
                    .unwrap_or_else(|| panic!("{what}: {label}"));
                group["activations"].clone()
            }
            _ => Value::Null,
        };
        assert_eq!(c["measured_bytes"], want, "{what}: {}", c["label"]);
        assert!(c["estimated_bytes"].is_i64(), "{what}: {}", c["label"]);
    }
    assert!(
        estimate["verdict"]["line"]
            .as_str()
            .unwrap()
            .starts_with("pp rank 0: ")
    );
}

#[test]
fn each_kept_real_log_gets_an_estimate_whose_measured_side_is_the_plain_report() {
    for (name, recorded, model) in RUNS {
        let tree = fake_tree(recorded);
        let config = config(model);
        let log = log(name);
        let plain = json(root(), &[&log]);
        let with = json(root(), &estimate_args(&log, tree.path(), &config));
        let run = &with["runs"][0];
        let section = &run["estimate"];
        assert_eq!(
            section["error"],
            Value::Null,
            "{name}: {}",
            section["error"]
        );
        assert_eq!(section["tree"], tree.path().display().to_string());
        let settings = &section["settings"];
        assert_eq!(
            (
                &settings["sequence_length"],
                &settings["micro_batch_size"],
                &settings["global_batch_size"],
                &settings["pp"]
            ),
            (
                &Value::from(512),
                &Value::from(2),
                &Value::from(16),
                &Value::from(1)
            ),
            "{name}: the settings come from the log's config line"
        );
        let ranks = section["ranks"].as_array().unwrap();
        assert_eq!(ranks.len(), 1, "{name}: one profiled pp rank");
        assert_eq!(
            (&ranks[0]["rank"], &ranks[0]["pp_rank"]),
            (&Value::from(0), &Value::from(0))
        );
        assert_measured_as_in_the_plain_report(&plain["runs"][0], &ranks[0], name);
        let mut without = run.clone();
        without["estimate"] = Value::Null;
        assert_eq!(
            without, plain["runs"][0],
            "{name}: the rest of the report is unchanged"
        );
        assert!(
            !tree
                .path()
                .join("tools/memory_estimator/__pycache__")
                .exists(),
            "{name}: bytecode written into the tree"
        );
    }
}

#[test]
fn the_resumed_run_pairs_the_loaded_optimizer_state() {
    let tree = fake_tree("qwen3-tiny-pp1");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-resume.log");
    let report = json(root(), &estimate_args(&log, tree.path(), &config));
    let components = report["runs"][0]["estimate"]["ranks"][0]["components"]
        .as_array()
        .unwrap()
        .clone();
    let optimizer = components
        .iter()
        .find(|c| c["component"] == "optimizer_state")
        .unwrap();
    // 0.03 GiB printed by load_ckpt; the estimator's Adam m+v over the sharded parameters.
    assert_eq!(optimizer["measured_bytes"], 32_212_255);
    assert_eq!(optimizer["estimated_bytes"], 48_322_560);
}

#[test]
fn the_text_markdown_and_html_reports_show_the_tables_and_the_verdict() {
    let tree = fake_tree("qwen3-tiny-pp1");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    let args = estimate_args(&log, tree.path(), &config);
    let verdict = "pp rank 0: 2 of 26 paired figures off by more than 10% or 128 MiB: outside \
                   PyTorch's allocator over by 3.56 GiB (+278%); fragmentation over by 0.48 GiB (+2397%)";
    let text = report(root(), &args);
    assert!(text.contains("PithTrain's memory estimator beside the prints"));
    assert!(text.contains(&format!("Verdict: {verdict}.")), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("Step4 i=1 ") && l.contains("S4.i1 fwd_bwd(p1,p0) fc2/bc1"))
        .expect("the Step4 i=1 row");
    // The estimator's 0.05 GiB of optimizer state is out of its figure (no checkpoint load);
    // without a snapshot the workspace stays in the measured one.
    assert!(
        row.contains("0.09") && row.contains("0.17") && row.contains("-47%"),
        "{row}"
    );
    assert!(
        text.contains("Corrected (optimizer state, estimated side): moved 0.05 GiB (46.08 MiB)"),
        "{text}"
    );
    assert!(
        text.contains(
            "warning: Not corrected (cuBLAS/cuBLASLt workspace, measured side): may skew the \
             comparison by up to 0.50 GiB"
        ),
        "{text}"
    );
    assert!(
        text.contains("not measured"),
        "estimator events no print sees"
    );
    let non_pt = text
        .lines()
        .find(|l| l.contains("outside PyTorch's allocator (measured: non-pt= at the peak print)"))
        .unwrap();
    assert!(non_pt.contains("4.84 GiB") && non_pt.contains("1.28 GiB") && non_pt.contains("over"));
    for format in ["markdown", "html"] {
        // Markdown escapes its markup characters (`_`, `(`, …) with a backslash, HTML `'`.
        let out = report(root(), &[&args[..], &["--format", format]].concat())
            .replace('\\', "")
            .replace("&#39;", "'");
        assert!(out.contains(verdict), "{format}");
        assert!(out.contains("S4.i0 fwd_bwd(p1,p0) fc1/bc0"), "{format}");
    }
}

/// The estimator's figures of `recorded` for pp rank 0: its optimizer state and its peak's
/// PyTorch tensors (static + dynamic), bytes.
fn recorded_optimizer_and_peak(recorded: &str) -> (i64, i64) {
    let json: Value = serde_json::from_str(
        &fs::read_to_string(root().join(format!("tests/data/estimate/{recorded}.json"))).unwrap(),
    )
    .unwrap();
    let rank = &json["ranks"][0];
    let peak = &rank["timeline"][rank["peak_index"].as_u64().unwrap() as usize];
    let allocated = [
        "static_bytes",
        "activation_bytes",
        "autograd_bytes",
        "gradient_bytes",
        "comm_bytes",
        "wgrad_store_bytes",
        "pp_transfer_bytes",
    ]
    .iter()
    .map(|k| peak[k].as_i64().unwrap())
    .sum();
    (rank["optimizer"]["bytes"].as_i64().unwrap(), allocated)
}

#[test]
fn with_the_snapshot_the_workspace_and_the_optimizer_state_are_put_on_one_bookkeeping() {
    // The two kept runs from scratch with their step-0 snapshots: each names two 32 MiB
    // cuBLAS/cuBLASLt workspaces at the peak, which the estimator books outside PyTorch, and
    // neither loaded a checkpoint, so neither pipeline holds the optimizer state the estimator
    // counts from static_baseline on.
    for (name, snapshot, recorded, model, optimizer) in [
        (
            "qwen3-tiny-pp1-instr.log",
            "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
            "qwen3-tiny-pp1",
            "qwen3-moe-tiny.json",
            48_322_560,
        ),
        (
            "dsv2-tiny-pp1-instr.log",
            "dsv2-tiny-pp1-instr-rank0-step0.pickle.gz",
            "dsv2-tiny-pp1",
            "deepseek-v2-tiny.json",
            50_419_712,
        ),
    ] {
        let workspace: i64 = 64 << 20;
        let tree = fake_tree(recorded);
        let config = config(model);
        let log = log(name);
        let snapshot = root().join(E2E).join(snapshot).display().to_string();
        let plain = json(root(), &[&log, "--snapshots", &snapshot]);
        let mut args = estimate_args(&log, tree.path(), &config);
        args.extend(["--snapshots", &snapshot]);
        let with = json(root(), &args);
        let rank = &with["runs"][0]["estimate"]["ranks"][0];

        // The amount moved is the workspace the report's owners name from the snapshot.
        let plain_rank = &plain["runs"][0]["ranks"][0];
        let owned: i64 = plain_rank["owners"]["owners"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|o| o["owner"] == "cuBLAS/cuBLASLt workspace")
            .map(|o| o["bytes"].as_i64().unwrap())
            .sum();
        assert_eq!(owned, workspace, "{name}");
        let (raw_optimizer, raw_peak) = recorded_optimizer_and_peak(recorded);
        assert_eq!(raw_optimizer, optimizer, "{name}");

        let corrections = rank["corrections"].as_array().expect("a corrections list");
        assert_eq!(corrections.len(), 2, "{name}: {corrections:?}");
        let ws = &corrections[0];
        assert_eq!(
            (&ws["mismatch"], &ws["bytes"], &ws["side"], &ws["applied"]),
            (
                &Value::from("cublas_workspace"),
                &Value::from(workspace),
                &Value::from("measured"),
                &Value::from(true)
            ),
            "{name}"
        );
        assert!(ws["why"].as_str().unwrap().contains(&snapshot), "{name}");
        let opt = &corrections[1];
        assert_eq!(
            (
                &opt["mismatch"],
                &opt["bytes"],
                &opt["side"],
                &opt["applied"]
            ),
            (
                &Value::from("optimizer_state"),
                &Value::from(optimizer),
                &Value::from("estimated"),
                &Value::from(true)
            ),
            "{name}"
        );

        // The plain figures differ from the compared ones by exactly that bookkeeping.
        let peak = &plain_rank["peak"];
        let allocated = peak["allocated"].as_i64().unwrap();
        assert_eq!(rank["peak"]["measured_print"], peak["label"], "{name}");
        assert_eq!(
            rank["peak"]["measured_bytes"],
            allocated - workspace,
            "{name}"
        );
        assert_eq!(
            rank["peak"]["estimated_bytes"],
            raw_peak - optimizer,
            "{name}"
        );
        let component = |kind: &str| {
            rank["components"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["component"] == kind)
                .unwrap()
                .clone()
        };
        assert_eq!(
            component("non_pytorch")["measured_bytes"],
            peak["non_pytorch"].as_i64().unwrap() + workspace,
            "{name}"
        );
        let before = plain_rank["pipeline"][0]["allocated"].as_i64().unwrap();
        assert_eq!(
            component("dynamic_at_peak")["measured_bytes"],
            allocated - before - workspace,
            "{name}"
        );
        // Every print the correction names lost the workspace; the others are as printed.
        let figures: Vec<&str> = ws["figures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        for e in rank["events"].as_array().unwrap() {
            let Some(label) = e["print"].as_str() else {
                continue;
            };
            let printed = plain_rank["pipeline"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["label"] == label)
                .unwrap()["allocated"]
                .as_i64()
                .unwrap();
            let moved = if figures.contains(&label) {
                workspace
            } else {
                0
            };
            assert_eq!(e["measured_bytes"], printed - moved, "{name}: {label}");
        }
        assert!(figures.contains(&"Step4 i=0") && !figures.contains(&"Before pipeline"));

        // Every format lists both.
        for format in ["text", "markdown", "html"] {
            let out = report(root(), &[&args[..], &["--format", format]].concat())
                .replace('\\', "")
                .replace("&#39;", "'");
            for line in [
                "Corrected (cuBLAS/cuBLASLt workspace, measured side): moved 0.06 GiB (64.00 MiB) \
                 from allocated",
                "Corrected (optimizer state, estimated side): moved 0.05 GiB",
            ] {
                assert!(out.contains(line), "{name} {format}: {line}");
            }
        }
    }
}

#[test]
fn the_checkout_at_or_above_the_current_directory_is_found_without_repo() {
    let tree = fake_tree("dsv2-tiny-pp1");
    let below = tree.path().join("examples/pretrain_lm");
    fs::create_dir_all(&below).unwrap();
    let config = config("deepseek-v2-tiny.json");
    let report = json(
        &below,
        &[
            &log("dsv2-tiny-pp1-instr.log"),
            "--estimate",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let section = &report["runs"][0]["estimate"];
    assert_eq!(section["error"], Value::Null, "{}", section["error"]);
    assert_eq!(section["tree"], tree.path().display().to_string());
}

#[test]
fn a_tree_without_the_estimator_gives_a_note_and_the_rest_of_the_report() {
    let tree = tempfile::tempdir().unwrap();
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    let args = estimate_args(&log, tree.path(), &config);
    let with = json(root(), &args);
    let section = &with["runs"][0]["estimate"];
    assert_eq!(
        section["error"],
        format!(
            "no PithTrain memory estimator in {} (tools/memory_estimator/ is missing); pass \
             --repo with a PithTrain checkout that has it",
            tree.path().display()
        )
    );
    assert_eq!(section["ranks"], Value::Array(vec![]));
    let plain = json(root(), &[&log]);
    let mut without = with["runs"][0].clone();
    without["estimate"] = Value::Null;
    assert_eq!(without, plain["runs"][0]);
    let text = report(root(), &args);
    assert!(text.contains("warning: No estimate: no PithTrain memory estimator in "));
    assert!(text.contains("Memory seen three ways") && text.contains("Rank 0 (pp=0)"));
}

#[test]
fn a_failing_estimator_and_missing_settings_are_notes_too() {
    let tree = fake_tree("qwen3-tiny-pp2");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    // The recording is of pp = 2: the fake refuses the pp = 1 the log gives.
    let report = json(root(), &estimate_args(&log, tree.path(), &config));
    let error = report["runs"][0]["estimate"]["error"].as_str().unwrap();
    assert!(
        error.starts_with("the memory estimator failed: Error: asked for (1, 2, 16, 512,"),
        "{error}"
    );
    // A failed --estimate exits 2 and says why on stderr, beside the report on stdout.
    let failed = Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(root())
        .arg("report")
        .args(estimate_args(&log, tree.path(), &config))
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&failed.stderr)
            .starts_with("warning: --estimate: the memory estimator failed: "),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    // Without --config the kept log's model path (`<e2e>/configs/…`) is not in the tree.
    let report = json(
        root(),
        &[&log, "--estimate", "--repo", tree.path().to_str().unwrap()],
    );
    let error = report["runs"][0]["estimate"]["error"].as_str().unwrap();
    assert!(
        error.ends_with("not found; pass --config with the run's config.json"),
        "{error}"
    );
}

#[test]
fn overrides_and_the_tolerance_reach_the_comparison() {
    let tree = fake_tree("qwen3-tiny-pp2");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    let mut args = estimate_args(&log, tree.path(), &config);
    args.extend(["--pp", "2", "--world", "2", "--tolerance", "50%,1024MiB"]);
    let report = json(root(), &args);
    let section = &report["runs"][0]["estimate"];
    assert_eq!(section["error"], Value::Null, "{}", section["error"]);
    assert_eq!(
        (
            &section["settings"]["pp"],
            &section["settings"]["world_assumed"]
        ),
        (&Value::from(2), &Value::from(false))
    );
    // The log's one rank printed pp=0: only that rank is compared, under the given tolerance.
    let rank = &section["ranks"][0];
    assert_eq!(rank["pp_rank"], 0);
    assert_eq!(rank["verdict"]["tolerance"]["absolute_bytes"], 1 << 30);
    assert_eq!(rank["verdict"]["tolerance"]["relative"], 0.5);
    let bad = Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(root())
        .args(["report", &log, "--estimate", "--tolerance", "ten"])
        .assert()
        .code(2);
    let err = String::from_utf8(bad.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("expected a percentage such as 10 or 10,128"),
        "{err}"
    );
    Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(root())
        .args(["report", &log, "--pp", "2"])
        .assert()
        .code(2);
}

fn pycache_dirs(tree: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![tree.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n == "__pycache__") {
                    found.push(path);
                } else {
                    stack.push(path);
                }
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_real_estimator_gives_what_the_recording_replays() {
    let Some(real) = support::pithtrain::checkout() else {
        return;
    };
    let pycache_before = pycache_dirs(&real);
    for (name, recorded, model) in RUNS {
        let config = config(model);
        let log = log(name);
        let from_real = json(root(), &estimate_args(&log, &real, &config));
        let fake = fake_tree(recorded);
        let from_fake = json(root(), &estimate_args(&log, fake.path(), &config));
        let real_rank = &from_real["runs"][0]["estimate"]["ranks"][0];
        assert_eq!(
            from_real["runs"][0]["estimate"]["error"],
            Value::Null,
            "{name}"
        );
        for key in ["events", "components", "peak", "verdict", "notes"] {
            assert_eq!(
                real_rank[key], from_fake["runs"][0]["estimate"]["ranks"][0][key],
                "{name}: {key}"
            );
        }
        let plain = json(root(), &[&log]);
        assert_measured_as_in_the_plain_report(&plain["runs"][0], real_rank, name);
    }
    assert_eq!(
        pycache_dirs(&real),
        pycache_before,
        "bytecode written into the tree"
    );
}

#[test]
fn the_text_section_of_the_qwen3_run() {
    let tree = fake_tree("qwen3-tiny-pp1");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    let text = report(root(), &estimate_args(&log, tree.path(), &config));
    let start = text
        .find("PithTrain's memory estimator beside the prints")
        .unwrap();
    let end = text.find("Across ranks").unwrap();
    let section = text[start..end]
        .replace(&tree.path().display().to_string(), "<tree>")
        .replace(&config.display().to_string(), "<config>");
    insta::assert_snapshot!(section);
}

#[test]
fn the_text_section_of_the_qwen3_run_with_its_snapshot() {
    let tree = fake_tree("qwen3-tiny-pp1");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    let snapshot = root()
        .join(E2E)
        .join("qwen3-tiny-pp1-instr-rank0-step0.pickle.gz")
        .display()
        .to_string();
    let mut args = estimate_args(&log, tree.path(), &config);
    args.extend(["--snapshots", &snapshot]);
    let text = report(root(), &args);
    let start = text
        .find("PithTrain's memory estimator beside the prints")
        .unwrap();
    let end = text.find("Across ranks").unwrap();
    let section = text[start..end]
        .replace(&tree.path().display().to_string(), "<tree>")
        .replace(&config.display().to_string(), "<config>")
        .replace(&snapshot, "<snapshot>");
    insta::assert_snapshot!(section);
}

#[test]
fn a_tree_named_only_in_the_log_runs_nothing_and_is_a_hint() {
    // A crafted log names a folder whose "estimator" would create a file when imported or run.
    let named = tempfile::tempdir().unwrap();
    let marker = named.path().join("ran");
    let evil = format!(
        "import pathlib\npathlib.Path({:?}).write_text('ran')\n",
        marker.display().to_string()
    );
    let package = named.path().join("tools/memory_estimator");
    fs::create_dir_all(&package).unwrap();
    fs::create_dir_all(named.path().join("pithtrain")).unwrap();
    fs::write(named.path().join("pithtrain/__init__.py"), &evil).unwrap();
    for file in ["tools/__init__.py", "tools/memory_estimator/__init__.py"] {
        fs::write(named.path().join(file), &evil).unwrap();
    }
    fs::write(package.join("__main__.py"), &evil).unwrap();
    let mut text = fs::read_to_string(log("qwen3-tiny-pp1-instr.log")).unwrap();
    text.push_str(&format!(
        "  File \"{}/pithtrain/modules/training.py\", line 1, in setup_model\n",
        named.path().display()
    ));
    let logs = tempfile::tempdir().unwrap();
    let crafted = logs.path().join("crafted.log");
    fs::write(&crafted, text).unwrap();
    let config = config("qwen3-moe-tiny.json");
    // Run outside any checkout.
    let report = json(
        logs.path(),
        &[
            crafted.to_str().unwrap(),
            "--estimate",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    assert!(!marker.exists(), "code from a folder the log names ran");
    let error = report["runs"][0]["estimate"]["error"].as_str().unwrap();
    let named = named.path().display();
    assert!(
        error.ends_with(&format!(
            "(the log names {named}; pass --repo {named} to use it)"
        )),
        "{error}"
    );
    assert_eq!(report["runs"][0]["estimate"]["tree"], Value::Null);
}

#[test]
fn a_relative_repo_is_taken_from_the_current_directory() {
    let tree = fake_tree("dsv2-tiny-pp1");
    let parent = tree.path().parent().unwrap();
    let name = tree.path().file_name().unwrap().to_str().unwrap();
    let config = config("deepseek-v2-tiny.json");
    let report = json(
        parent,
        &[
            &log("dsv2-tiny-pp1-instr.log"),
            "--estimate",
            "--repo",
            name,
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let section = &report["runs"][0]["estimate"];
    assert_eq!(section["error"], Value::Null, "{}", section["error"]);
    assert_eq!(section["tree"], tree.path().display().to_string());
}

/// Issue 22, item 4: the estimator's STATUS and headroom stand beside the report's own, and
/// the estimator judges against the GPU the report knows (`--gpu-memory` here), not its default.
#[test]
fn the_estimators_status_and_headroom_stand_beside_the_reports_own() {
    let tree = fake_tree("qwen3-tiny-pp1");
    let config = config("qwen3-moe-tiny.json");
    let log = log("qwen3-tiny-pp1-instr.log");
    let args = estimate_args(&log, tree.path(), &config);
    let gib = |x: f64| (x * f64::from(1 << 30)) as i64;
    for (flag, theirs, ours) in [
        ("139.81", "OK", "fits"),
        ("5.6", "TIGHT", "fits"),
        ("1", "OOM", "out of memory"),
    ] {
        let with = [&args[..], &["--gpu-memory", flag]].concat();
        let answer = json(root(), &with);
        let run = &answer["runs"][0];
        let fit = &run["estimate"]["ranks"][0]["estimator_fit"];
        assert_eq!(fit["status"], theirs, "{flag}: {fit}");
        let capacity = fit["capacity_bytes"].as_i64().unwrap();
        assert!(
            (capacity - gib(flag.parse().unwrap())).abs() < 1 << 20,
            "{fit}"
        );
        assert_eq!(
            fit["headroom_bytes"].as_i64().unwrap(),
            capacity - fit["total_bytes"].as_i64().unwrap()
        );
        let text = report(root(), &with);
        let line = text
            .lines()
            .find(|l| l.starts_with("Fit: "))
            .unwrap_or_else(|| panic!("{flag}: no Fit line\n{text}"));
        assert!(
            line.contains(&format!(
                "PithTrain's estimator says STATUS: {theirs}: TOTAL "
            )) && line.contains(&format!("memprints: {ours} at the prints' peak")),
            "{line}"
        );
    }
}

/// A resumed run whose tree printed no `load_ckpt` (instrumented before that print existed,
/// or by hand): PithTrain's own `Load checkpoint:` line says it resumed, so the estimator's
/// optimizer state is not taken out as for a run from scratch; the report says why.
#[test]
fn a_resumed_run_without_its_load_print_keeps_the_estimators_optimizer_state() {
    let tree = fake_tree("qwen3-tiny-pp1");
    let config = config("qwen3-moe-tiny.json");
    let text = fs::read_to_string(root().join(E2E).join("qwen3-tiny-pp1-resume.log")).unwrap();
    assert!(text.contains("| INFO | Load checkpoint: "));
    let dir = tempfile::tempdir().unwrap();
    let unprinted = dir.path().join("resume-without-load-ckpt.log");
    let kept: Vec<&str> = text.lines().filter(|l| !l.contains("load_ckpt")).collect();
    fs::write(&unprinted, kept.join("\n") + "\n").unwrap();
    let corrections_of = |log: &Path| {
        let args = estimate_args(log.to_str().unwrap(), tree.path(), &config);
        json(root(), &args)["runs"][0]["estimate"]["ranks"][0]["corrections"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["mismatch"] == "optimizer_state")
            .cloned()
    };
    let optimizer = corrections_of(&unprinted).expect("the optimizer state is named");
    assert_eq!(optimizer["applied"], false, "{optimizer}");
    assert!(
        optimizer["why"]
            .as_str()
            .unwrap()
            .contains("loaded a checkpoint (Load checkpoint:)"),
        "{optimizer}"
    );
    // A run from scratch (the same lines without PithTrain's load line) still gets it out.
    let scratch = dir.path().join("scratch.log");
    let fresh: Vec<&str> = kept
        .iter()
        .copied()
        .filter(|l| !l.contains("Load checkpoint"))
        .collect();
    fs::write(&scratch, fresh.join("\n") + "\n").unwrap();
    let optimizer = corrections_of(&scratch).expect("the optimizer state is corrected");
    assert_eq!(optimizer["applied"], true, "{optimizer}");
}
