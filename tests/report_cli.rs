//! `memprints report` end to end: generated logs of every shape, the committed fixtures, the
//! formats, compression, rank filters, directories and errors.

mod support;

use std::io::Write;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use support::loggen::{LogConfig, LogCounts, Prefix, log_string, write_log};
use support::{fixture, fixtures, root};

fn memprints() -> Command {
    let mut cmd = Command::cargo_bin("memprints").expect("the memprints binary");
    cmd.current_dir(root()).env_remove("NO_COLOR");
    cmd
}

fn report_json(args: &[&str]) -> Value {
    let out = memprints()
        .arg("report")
        .args(args)
        .args(["--format", "json"])
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).expect("valid JSON")
}

fn schema() -> Value {
    let text =
        std::fs::read_to_string(root().join("schema/report.schema.json")).expect("schema file");
    serde_json::from_str(&text).expect("schema is JSON")
}

fn assert_matches_schema(report: &Value) {
    let errors = support::schema::validate(&schema(), report);
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );
}

fn assert_counts(report: &Value, counts: &LogCounts) {
    assert_eq!(report["stats"]["memory_lines"], counts.tags, "memory_lines");
    assert_eq!(
        report["stats"]["unparsed_memory_lines"], counts.garbage,
        "unparsed_memory_lines"
    );
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "a generated log is one run");
    for rank in runs[0]["ranks"].as_array().expect("ranks") {
        let r = rank["rank"].as_u64().expect("rank") as u32;
        let want = counts.pipeline.get(&r).copied().unwrap_or(0);
        assert_eq!(
            rank["pipeline"].as_array().expect("pipeline").len() as u64,
            want,
            "pipeline of rank {r}"
        );
    }
}

fn write_temp(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("write temp log");
    path.display().to_string()
}

#[test]
fn counts_match_the_generator_for_every_log_shape() {
    let dir = tempfile::tempdir().expect("tempdir");
    let prefixes = [
        Prefix::None,
        Prefix::Srun,
        Prefix::TorchrunRank,
        Prefix::TorchrunDefault,
    ];
    for (n, (pp, world)) in [(1, 2), (2, 4), (4, 8), (8, 16)].into_iter().enumerate() {
        let cfg = LogConfig {
            world,
            pp,
            num_chunks: pp * 2 + 3,
            ranks: (0..world).collect(),
            prefix: prefixes[n % 4],
            ansi: n % 2 == 0,
            crlf: n % 2 == 1,
            timestamps: n >= 2,
            glue_per_mille: 100,
            garbage: true,
            cut_last_line: n == 3,
            oom_rank: (n == 2).then_some(3),
            profiled_steps: 2,
            seed: n as u64 + 11,
            ..LogConfig::default()
        };
        let (text, counts) = log_string(&cfg);
        let path = write_temp(dir.path(), &format!("pp{pp}.log"), text.as_bytes());
        let report = report_json(&[&path]);
        assert_counts(&report, &counts);
        assert_eq!(
            report["stats"]["memory_lines"],
            text.matches("[rank=").count() as u64
        );
        assert_eq!(
            report["runs"][0]["oom"].is_null(),
            cfg.oom_rank.is_none(),
            "oom for pp={pp}"
        );
        assert_eq!(
            report["runs"][0]["ranks"].as_array().unwrap().len(),
            world as usize
        );
        assert_matches_schema(&report);
    }
}

#[test]
fn the_schema_check_rejects_a_report_that_breaks_the_schema() {
    let mut report = report_json(&["tests/data/report/pp2_plain.log"]);
    report["stats"]["memory_lines"] = Value::from("many");
    report["runs"][0]["ranks"][0]["pipeline"][0]["kind"] = Value::from("step9");
    report["runs"][0]["ranks"][0]["surprise"] = Value::from(1);
    let errors = support::schema::validate(&schema(), &report);
    assert_eq!(errors.len(), 3, "{errors:#?}");
}

#[test]
fn fixtures_are_what_the_generator_makes() {
    for (name, cfg) in fixtures() {
        let (text, _) = log_string(&cfg);
        let path = root().join(fixture(name));
        if std::env::var_os("UPDATE_FIXTURES").is_some() {
            std::fs::write(&path, &text).expect("write fixture");
        }
        let on_disk =
            std::fs::read_to_string(&path).expect("fixture exists (UPDATE_FIXTURES=1 makes it)");
        assert!(
            on_disk == text,
            "{name} is stale: rerun with UPDATE_FIXTURES=1"
        );
    }
}

#[test]
fn every_fixture_parses_with_the_expected_counts_and_matches_the_schema() {
    for (name, cfg) in fixtures() {
        let (_, counts) = log_string(&cfg);
        let report = report_json(&[fixture(name).to_str().unwrap()]);
        assert_counts(&report, &counts);
        assert_matches_schema(&report);
    }
}

#[test]
fn text_report_of_a_two_stage_run() {
    let out = memprints()
        .args(["report", "tests/data/report/pp2_plain.log"])
        .assert()
        .success();
    insta::assert_snapshot!(String::from_utf8(out.get_output().stdout.clone()).unwrap());
}

#[test]
fn markdown_report_of_a_two_stage_run() {
    let out = memprints()
        .args([
            "report",
            "tests/data/report/pp2_plain.log",
            "--format",
            "markdown",
            "--rank",
            "0",
        ])
        .assert()
        .success();
    insta::assert_snapshot!(String::from_utf8(out.get_output().stdout.clone()).unwrap());
}

#[test]
fn json_report_of_a_one_stage_run() {
    let report = report_json(&["tests/data/report/pp1_default_prefix.log"]);
    insta::assert_json_snapshot!(report);
}

#[test]
fn an_oom_run_is_reported_as_cut_off_with_each_rank_last_point() {
    let out = memprints()
        .args(["report", "--wide", "tests/data/report/oom_torchrun.log"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("error: The run was cut off by a CUDA out-of-memory error (tried to allocate 2.00 GiB) on rank 1"),
        "{text}"
    );
    assert!(text.contains("Last memory point per rank"));
    let report = report_json(&["tests/data/report/oom_torchrun.log"]);
    let run = &report["runs"][0];
    let rank1 = &run["ranks"][1];
    assert_eq!(rank1["last_point"]["label"], "Step3 i=0 before B1");
    assert_eq!(rank1["snapshots"][0]["after_oom"], true);
    assert_eq!(run["oom"]["ranks"], serde_json::json!([1]));
}

#[test]
fn gzip_and_zstd_logs_give_the_same_report_as_plain_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = std::fs::read(root().join(fixture("pp4_srun_ansi_crlf.log"))).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let gz = write_temp(dir.path(), "node0.log.gz", &gz.finish().unwrap());
    let zst = write_temp(
        dir.path(),
        "node0.log.zst",
        &zstd::encode_all(&plain[..], 3).unwrap(),
    );
    let without_paths = |mut report: Value| {
        report["inputs"] = Value::Null;
        let run = &mut report["runs"][0];
        run["name"] = Value::Null;
        run["sources"] = Value::Null;
        for s in run["memory"]["snapshots"].as_array_mut().unwrap() {
            s["error"] = Value::Null;
        }
        report
    };
    let want = without_paths(report_json(&["tests/data/report/pp4_srun_ansi_crlf.log"]));
    for path in [gz, zst] {
        let got = without_paths(report_json(&[&path]));
        assert_eq!(got, want, "{path}");
    }
}

#[test]
fn a_directory_of_node_logs_is_one_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = LogConfig {
        world: 4,
        pp: 2,
        ..LogConfig::default()
    };
    for (node, ranks) in [(0, vec![0, 1]), (1, vec![2, 3])] {
        let mut file =
            std::fs::File::create(dir.path().join(format!("run_node{node}.log"))).unwrap();
        write_log(
            &LogConfig {
                ranks,
                ..cfg.clone()
            },
            &mut file,
        )
        .unwrap();
    }
    let report = report_json(&[dir.path().to_str().unwrap()]);
    assert_eq!(report["runs"].as_array().unwrap().len(), 1);
    let run = &report["runs"][0];
    let ranks: Vec<u64> = run["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
    assert_eq!(report["inputs"].as_array().unwrap().len(), 2);
    assert_eq!(run["sources"], report["inputs"]);
    assert_eq!(run["summary"]["stages"].as_array().unwrap().len(), 2);
    assert_matches_schema(&report);
}

#[test]
fn the_rank_filter_keeps_only_the_asked_ranks() {
    let report = report_json(&[
        "tests/data/report/pp2_plain.log",
        "--rank",
        "1",
        "--rank",
        "3",
    ]);
    let ranks: Vec<u64> = report["runs"][0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, [1, 3]);
}

#[test]
fn out_writes_the_report_to_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.md");
    memprints()
        .args([
            "report",
            "tests/data/report/pp2_plain.log",
            "--format",
            "markdown",
            "--out",
        ])
        .arg(&out)
        .assert()
        .success()
        .stdout("");
    assert!(
        std::fs::read_to_string(out)
            .unwrap()
            .starts_with("# Memory report")
    );
}

#[test]
fn colour_only_when_asked_or_on_a_terminal_without_no_color() {
    let plain = memprints()
        .args(["report", "tests/data/report/pp2_plain.log"])
        .assert()
        .success();
    assert!(!plain.get_output().stdout.contains(&0x1b));
    let always = memprints()
        .args([
            "report",
            "tests/data/report/pp2_plain.log",
            "--color",
            "always",
        ])
        .assert()
        .success();
    assert!(always.get_output().stdout.starts_with(b"\x1b[1m"));
    let no_color = memprints()
        .env("NO_COLOR", "1")
        .args([
            "report",
            "tests/data/report/pp2_plain.log",
            "--color",
            "auto",
        ])
        .assert()
        .success();
    assert!(!no_color.get_output().stdout.contains(&0x1b));
}

#[test]
fn a_missing_log_fails_with_one_line_naming_it() {
    let out = memprints().args(["report", "no/such.log"]).assert().code(1);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: cannot read no/such.log: "), "{err}");
}

#[test]
fn a_log_without_prints_is_reported_as_such() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = write_temp(dir.path(), "plain.log", b"hello\nworld\n");
    let out = memprints().args(["report", &path]).assert().success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(stdout.contains("No memory prints found"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("no memory prints"));
}

#[test]
fn a_rotated_log_is_read_around_its_nul_bytes_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.log");
    let mut bytes = vec![0u8; 1_258_291];
    bytes.extend_from_slice(&std::fs::read(fixture("pp2_plain.log")).unwrap());
    std::fs::write(&path, bytes).unwrap();
    let out = memprints()
        .args(["report", "--format", "json"])
        .arg(&path)
        .assert()
        .success();
    let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(report["runs"].as_array().unwrap().len(), 1);
    assert_eq!(report["skipped"], Value::Array(vec![]));
    assert!(report["stats"]["memory_lines"].as_u64().unwrap() > 200);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains(&format!(
            "note: {}: skipped 1.20 MiB of NUL bytes at offset 0 (a rotated or \
             preallocated log)",
            path.display()
        )),
        "{stderr}"
    );
    // A file that is binary through and through is still named as such (a pickle is refused
    // before it is read: tests/cli.rs).
    let pickle = dir.path().join("dump.log");
    std::fs::write(
        &pickle,
        b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00",
    )
    .unwrap();
    let report = report_json(&[pickle.to_str().unwrap()]);
    assert_eq!(report["skipped"][0]["reason"], "binary data, not a log");
}

/// The kept real logs: PithTrain runs and the generator's shapes.
fn real_logs() -> Vec<std::path::PathBuf> {
    let mut logs = Vec::new();
    for dir in [
        "tests/data/e2e",
        "tests/data/e2e/defaults-pp1",
        "tests/data/report",
    ] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "log") {
                logs.push(path);
            }
        }
    }
    logs.sort();
    assert!(logs.len() >= 10, "{logs:?}");
    logs
}

#[test]
fn the_text_report_opens_with_its_summary_and_fits_100_columns_in_a_pipe() {
    use unicode_width::UnicodeWidthStr;
    for log in real_logs() {
        // assert_cmd pipes stdout: not a terminal, so the report is wrapped to 80 columns.
        let out = memprints().arg("report").arg(&log).assert().success();
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        for (n, line) in text.lines().enumerate() {
            assert!(
                line.width() <= 100,
                "{}:{}: {} columns: {line}",
                log.display(),
                n + 1,
                line.width()
            );
        }
        let head: Vec<&str> = text.lines().take(15).collect();
        assert!(
            head.iter().any(|l| l.starts_with("  status ")),
            "{}: no summary in the first 15 lines:\n{}",
            log.display(),
            head.join("\n")
        );
        // The summary ends within them: what follows is the header about what was read.
        let read = text.lines().position(|l| l.starts_with("Read ")).unwrap();
        assert!(
            read <= 16,
            "{}: the summary runs past line 15",
            log.display()
        );
        let wide = memprints()
            .args(["report", "--wide"])
            .arg(&log)
            .assert()
            .success();
        let wide = String::from_utf8(wide.get_output().stdout.clone()).unwrap();
        assert!(wide.contains("  status "), "{}", log.display());
    }
}

const QWEN3: &str = "tests/data/e2e/qwen3-tiny-pp1-instr.log";
const DSV2: &str = "tests/data/e2e/dsv2-tiny-pp1-instr.log";

fn diff(args: &[&str]) -> String {
    let out = memprints()
        .args(["report", "diff"])
        .args(args)
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

/// Every `delta` anywhere in a diff's JSON.
fn deltas(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "delta" {
                    out.push(v.clone());
                }
                deltas(v, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| deltas(v, out)),
        _ => {}
    }
}

#[test]
fn a_run_diffed_with_itself_has_every_delta_zero_or_unmeasured() {
    let snapshot = "tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz";
    let json: Value = serde_json::from_str(&diff(&[
        QWEN3,
        QWEN3,
        "--format",
        "json",
        "--snapshots-a",
        snapshot,
        "--snapshots-b",
        snapshot,
    ]))
    .unwrap();
    assert_eq!(json["schema_version"], 1);
    for section in ["ranks", "components", "layers", "steps", "snapshots"] {
        assert!(
            !json[section].as_array().unwrap().is_empty(),
            "{section}: {json}"
        );
    }
    let mut all = Vec::new();
    deltas(&json, &mut all);
    assert!(all.len() > 20, "{all:?}");
    assert!(all.iter().all(|d| d.is_null() || d == 0), "{all:?}");
    // The one unmeasured component (no checkpoint load: no optimizer state) stays null.
    let optimizer = json["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["component"] == "optimizer_state")
        .unwrap();
    assert_eq!(optimizer["delta"], Value::Null);
}

#[test]
fn two_real_runs_diff_in_every_format() {
    let json: Value = serde_json::from_str(&diff(&[QWEN3, DSV2, "--format", "json"])).unwrap();
    let rank = &json["ranks"][0];
    let (a, b) = (
        rank["allocated"]["a"].as_i64().unwrap(),
        rank["allocated"]["b"].as_i64().unwrap(),
    );
    assert_eq!(rank["allocated"]["delta"].as_i64().unwrap(), b - a);
    assert_eq!(json["a"]["name"], QWEN3);
    assert_eq!(json["b"]["name"], DSV2);
    // dsv2's log has no detail layer 3: its side is null, and so is the delta.
    let layer3 = json["layers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layer"] == 3)
        .unwrap();
    assert_eq!(layer3["saved"]["b"], Value::Null);
    assert_eq!(layer3["saved"]["delta"], Value::Null);

    let text = diff(&[QWEN3, DSV2]);
    assert!(text.starts_with("Memory report diff\n"), "{text}");
    assert!(
        text.contains("│    0 ┆   0.17 ┆   0.20 ┆ +0.03 ┆"),
        "{text}"
    );
    assert!(text.contains("highest peak-gpu-memory"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    let md = diff(&[QWEN3, DSV2, "--format", "markdown"]);
    assert!(md.contains("| 0 | 0.17 | 0.20 | +0.03 |"), "{md}");
    let html = diff(&[QWEN3, DSV2, "--format", "html"]);
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains("<td class=\"num\">+0.03</td>"), "{html}");
    assert!(!html.contains("<script"));
}

#[test]
fn report_diff_is_a_subcommand_and_a_log_named_diff_is_dot_slash_diff() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(QWEN3, dir.path().join("diff")).unwrap();
    let out = memprints()
        .current_dir(dir.path())
        .args(["report", "./diff"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(text.contains("  status "), "{text}");
    // `report diff` needs both runs.
    let out = memprints()
        .args(["report", "diff", QWEN3])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A log holding several runs: the last is compared, and stderr says so.
    let two = dir.path().join("two.log");
    let log = std::fs::read_to_string("tests/data/report/pp1_default_prefix.log").unwrap();
    std::fs::write(&two, format!("{log}{log}")).unwrap();
    let runs = report_json(&[two.to_str().unwrap()])["runs"]
        .as_array()
        .unwrap()
        .len();
    let out = memprints()
        .args(["report", "diff", "--format", "json"])
        .args([two.to_str().unwrap(), QWEN3])
        .assert()
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(runs, 2);
    assert_eq!(
        (&json["a"]["run"], &json["a"]["runs"]),
        (&2.into(), &2.into())
    );
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("comparing the last"), "{err}");
}

/// The text report, unwrapped (`--wide`), so that a sentence can be looked for whole.
fn report_text(args: &[&str]) -> String {
    let out = memprints()
        .arg("report")
        .arg("--wide")
        .args(args)
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn a_run_that_died_of_an_exception_says_so_with_its_last_frames_and_where_it_stopped() {
    let log = "tests/data/crash/qwen3-tiny-dataset-too-small.log";
    let report = report_json(&[log]);
    assert_matches_schema(&report);
    let crash = &report["runs"][0]["crash"];
    assert_eq!(crash["exception"], "RuntimeError: Dataset is too small");
    assert_eq!(crash["kind"], "RuntimeError");
    assert_eq!(crash["out_of_memory"], false);
    assert_eq!(crash["rank"], 0);
    assert_eq!(crash["peak_is_lower_bound"], true);
    let frames = crash["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 8, "the last 8 of 9 traceback lines");
    assert_eq!(
        frames.last().unwrap(),
        "    raise RuntimeError(\"Dataset is too small\")"
    );
    assert_eq!(crash["stopped_at"]["last_step"], Value::Null);
    assert_eq!(crash["stopped_at"]["last_print"], "after apply_fsdp");
    assert!(report["runs"][0]["oom"].is_null());
    let text = report_text(&[log]);
    assert!(
        text.contains("The run died of an exception on rank 0: RuntimeError: Dataset is too small"),
        "{text}"
    );
    assert!(text.contains("rank 0's last memory print was “after apply_fsdp”"));
    assert!(text.contains("lower bound"));
    for format in ["markdown", "html"] {
        let out = report_text(&[log, "--format", format]);
        assert!(out.contains("Dataset is too small"), "{format}");
        assert!(out.contains("raise RuntimeError"), "{format}");
    }
}

#[test]
fn an_oom_keeps_pytorchs_whole_message_and_reads_its_figures() {
    let log = "tests/data/crash/qwen3-tiny-oom.log";
    let report = report_json(&[log]);
    assert_matches_schema(&report);
    let run = &report["runs"][0];
    let gib = |x: f64| (x * (1u64 << 30) as f64).round() as i64;
    let oom = &run["oom"];
    assert!(
        oom["message"]
            .as_str()
            .unwrap()
            .ends_with("notes/cuda.html#environment-variables)")
    );
    assert_eq!(oom["tried_to_allocate"], gib(139.5));
    assert_eq!(oom["gpu"], 0);
    assert_eq!(oom["capacity"], gib(139.81));
    assert_eq!(oom["free"], gib(138.46));
    assert_eq!(oom["process_in_use"], gib(1.34));
    assert_eq!(oom["allocated_by_pytorch"], 112_i64 * (1 << 20) + (1 << 19));
    assert_eq!(oom["reserved_unallocated"], 17_i64 * (1 << 20) + (1 << 19));
    let crash = &run["crash"];
    assert_eq!(crash["out_of_memory"], true);
    assert_eq!(crash["kind"], "torch.OutOfMemoryError");
    assert_eq!(
        crash["frames"].as_array().unwrap().last().unwrap(),
        "    return func(*args, **kwargs)"
    );
    assert_eq!(
        crash["stopped_at"]["last_print"],
        "Step2 i=0 forward_chunk(1)"
    );
    for format in ["text", "markdown", "html"] {
        let out = report_text(&[log, "--format", format]);
        assert!(
            out.contains("to avoid fragmentation.  See documentation for Memory Management"),
            "{format}: the whole message"
        );
        assert!(out.contains("free on the GPU"), "{format}");
        assert!(out.contains("138.46"), "{format}");
    }
}

#[test]
fn each_rank_shows_its_capacity_headroom_and_status_in_every_format() {
    let log = "tests/data/e2e/qwen3-tiny-pp1-instr.log";
    // Without a capacity: none, no headroom, no status; never a 0.
    let report = report_json(&[log]);
    assert_matches_schema(&report);
    let rank = &report["runs"][0]["ranks"][0];
    assert!(rank["capacity"].is_null() && rank["headroom_bytes"].is_null());
    assert!(rank["status"].is_null());
    assert!(report_text(&[log]).contains("not known (pass --gpu-memory GIB)"));
    // The peak's device total is 1.47 GiB (alloc 0.18 + cached 0.01 + outside 1.28).
    let total = rank["breakdown"]["total"].as_i64().unwrap();
    for (gib, status) in [("139.81", "fits"), ("1.5", "tight"), ("1", "out_of_memory")] {
        let report = report_json(&[log, "--gpu-memory", gib]);
        assert_matches_schema(&report);
        let rank = &report["runs"][0]["ranks"][0];
        let bytes = (gib.parse::<f64>().unwrap() * (1u64 << 30) as f64).round() as i64;
        assert_eq!(
            rank["capacity"],
            serde_json::json!({"bytes": bytes, "from": "flag"})
        );
        assert_eq!(rank["headroom_bytes"], bytes - total);
        assert_eq!(rank["status"], status, "{gib} GiB");
    }
    for format in ["text", "markdown", "html"] {
        let out = report_text(&[log, "--gpu-memory", "1.5", "--format", format]);
        assert!(out.contains("Capacity and headroom"), "{format}");
        assert!(out.contains("1.50 (--gpu-memory)"), "{format}");
        assert!(out.contains("tight (headroom under 5 %)"), "{format}");
    }
}

#[test]
fn an_oom_message_gives_the_capacity_and_marks_the_rank_out_of_memory() {
    let report = report_json(&["tests/data/crash/qwen3-tiny-oom.log"]);
    let rank = &report["runs"][0]["ranks"][0];
    assert_eq!(rank["capacity"]["from"], "oom_message");
    assert_eq!(
        rank["capacity"]["bytes"],
        report["runs"][0]["oom"]["capacity"]
    );
    assert_eq!(rank["status"], "out_of_memory");
    let err = memprints()
        .args([
            "report",
            "tests/data/crash/qwen3-tiny-oom.log",
            "--gpu-memory",
            "0",
        ])
        .assert()
        .failure();
    let stderr = String::from_utf8(err.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("is not a GPU's memory"), "{stderr}");
}

/// What `torch.cuda.mem_get_info()` gives as the total of one H200.
const H200_TOTAL: i64 = 150_110_011_392;

/// A generated two-stage run whose `init_process_group` prints record `gpu_total` bytes (or,
/// with `None`, do not, as earlier prints did), written to `dir`.
fn run_with_total(dir: &Path, name: &str, gpu_total: Option<i64>, oom: bool) -> String {
    let cfg = LogConfig {
        world: 2,
        pp: 2,
        ranks: vec![0, 1],
        gpu_total,
        // Rank 0 (pp=0) runs Step 3, where the generator runs out of memory.
        oom_rank: oom.then_some(0),
        ..LogConfig::default()
    };
    write_temp(dir, name, log_string(&cfg).0.as_bytes())
}

#[test]
fn the_gpus_total_the_prints_record_gives_capacity_headroom_and_status_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    // The same run without the total: no capacity, as before.
    let old = run_with_total(dir.path(), "old.log", None, false);
    let report = report_json(&[&old]);
    assert_matches_schema(&report);
    let peaks: Vec<i64> = report["runs"][0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|rank| {
            assert!(rank["gpu_total"].is_null() && rank["capacity"].is_null());
            assert!(rank["headroom_bytes"].is_null() && rank["status"].is_null());
            rank["breakdown"]["total"].as_i64().unwrap()
        })
        .collect();
    assert_eq!(peaks.len(), 2);
    assert!(report_text(&[&old]).contains("not known (pass --gpu-memory GIB)"));
    let highest = *peaks.iter().max().unwrap();
    // An H200 fits; a GPU 1 % above the highest peak is tight on that rank; one byte under it
    // is out of memory there.
    for (total, status) in [
        (H200_TOTAL, "fits"),
        (highest + highest / 100, "tight"),
        (highest - 1, "out_of_memory"),
    ] {
        let log = run_with_total(dir.path(), "new.log", Some(total), false);
        let report = report_json(&[&log]);
        assert_matches_schema(&report);
        for (rank, peak) in report["runs"][0]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .zip(&peaks)
        {
            assert_eq!(rank["gpu_total"], total);
            assert_eq!(
                rank["capacity"],
                serde_json::json!({"bytes": total, "from": "prints"})
            );
            assert_eq!(rank["headroom_bytes"], total - peak);
            if *peak == highest {
                assert_eq!(rank["status"], status, "{total} bytes");
            }
        }
    }
    let log = run_with_total(dir.path(), "new.log", Some(H200_TOTAL), false);
    for format in ["text", "markdown", "html"] {
        let out = report_text(&[&log, "--format", format]);
        assert!(out.contains("Capacity and headroom"), "{format}");
        assert!(out.contains("139.80 (prints)"), "{format}");
        assert!(
            !out.contains("not known (pass --gpu-memory GIB)"),
            "{format}"
        );
    }
    let text = report_text(&[&log]);
    let head = text.lines().take(15).collect::<Vec<_>>().join("\n");
    assert!(
        head.contains("capacity rank ")
            && head.contains("GiB free of 139.80 GiB (from the prints)"),
        "{head}"
    );
}

#[test]
fn gpu_memory_wins_over_the_prints_and_the_prints_over_the_oom_message() {
    let dir = tempfile::tempdir().unwrap();
    let log = run_with_total(dir.path(), "oom.log", Some(H200_TOTAL), true);
    let report = report_json(&[&log]);
    assert_matches_schema(&report);
    let run = &report["runs"][0];
    let gib = |x: f64| (x * (1u64 << 30) as f64).round() as i64;
    // The OOM message says 139.81 GiB, rounded; the prints' exact total goes first.
    assert_eq!(run["oom"]["capacity"], gib(139.81));
    for rank in run["ranks"].as_array().unwrap() {
        assert_eq!(
            rank["capacity"],
            serde_json::json!({"bytes": H200_TOTAL, "from": "prints"})
        );
    }
    assert_eq!(run["ranks"][0]["status"], "out_of_memory");
    let report = report_json(&[&log, "--gpu-memory", "80"]);
    for rank in report["runs"][0]["ranks"].as_array().unwrap() {
        assert_eq!(
            rank["capacity"],
            serde_json::json!({"bytes": gib(80.0), "from": "flag"})
        );
        assert_eq!(rank["gpu_total"], H200_TOTAL, "the printed figure is kept");
    }
}

#[test]
fn a_rank_whose_prints_lack_the_total_takes_the_smallest_of_its_run() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        world: 2,
        pp: 2,
        ranks: vec![0, 1],
        gpu_total: Some(H200_TOTAL),
        ..LogConfig::default()
    };
    let text = log_string(&cfg).0;
    let cut = text
        .lines()
        .map(|line| match line.split_once(" gpu_total=") {
            Some((head, _)) if line.starts_with("[rank=1] ") => head.to_owned(),
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert_ne!(cut, text);
    let log = write_temp(dir.path(), "mixed.log", cut.as_bytes());
    let report = report_json(&[&log]);
    assert_matches_schema(&report);
    let ranks = report["runs"][0]["ranks"].as_array().unwrap();
    assert_eq!(ranks[0]["gpu_total"], H200_TOTAL);
    assert!(ranks[1]["gpu_total"].is_null());
    for rank in ranks {
        assert_eq!(
            rank["capacity"],
            serde_json::json!({"bytes": H200_TOTAL, "from": "prints"})
        );
    }
}

#[test]
fn a_plain_launch_then_an_instrumented_one_in_one_file_are_two_runs() {
    let gb = |x: f64| (x * (1u64 << 30) as f64).round() as i64;
    for (log, second_peak, second_ranks) in [
        ("tests/data/pairings/plain-then-instr.log", 0.18, 1),
        ("tests/data/pairings/plain-then-plain.log", 0.26, 0),
    ] {
        let report = report_json(&[log]);
        assert_matches_schema(&report);
        let runs = report["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{log}");
        for run in runs {
            assert_eq!(run["training"]["steps_logged"], 3, "{log}");
        }
        assert_eq!(runs[0]["training"]["first_step_peak_gpu_memory"], gb(0.22));
        assert_eq!(runs[0]["ranks"].as_array().unwrap().len(), 0);
        let second = &runs[1];
        assert_eq!(
            second["training"]["first_step_peak_gpu_memory"],
            gb(second_peak)
        );
        assert_eq!(second["ranks"].as_array().unwrap().len(), second_ranks);
        assert!(second["name"].as_str().unwrap().ends_with(", launch 2"));
    }
}

#[test]
fn a_one_rank_run_puts_no_gap_down_to_another_rank() {
    let text = report_text(&[
        "tests/data/e2e/dsv2-tiny-pp1-instr.log",
        "--snapshots",
        "tests/data/e2e/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz",
    ]);
    assert!(
        text.contains("lies beyond the snapshot of the pipeline too: outside model.step()"),
        "{text}"
    );
    assert!(!text.contains("another rank"), "{text}");
    assert!(!text.contains("train_step on every rank"), "{text}");
}

/// The summary leads with how the run ended, whether it fits and what to change: a run that
/// died of an exception says so in its first line, a capacity given says fits, tight or out
/// of memory, and the ranked changes follow the owners.
#[test]
fn the_summary_says_how_a_run_ended_whether_it_fits_and_what_to_change() {
    let out = memprints()
        .args([
            "report",
            "tests/data/crash/qwen3-tiny-dataset-too-small.log",
        ])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let head: Vec<&str> = text.lines().take(15).collect();
    assert!(
        head.iter()
            .any(|l| l.contains("status   died on rank 0 of RuntimeError")),
        "{text}"
    );
    let out = memprints()
        .args(["report", "tests/data/e2e/qwen3-tiny-pp1-instr.log"])
        .args(["--gpu-memory", "139.81"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let head = text.lines().take(15).collect::<Vec<_>>().join("\n");
    assert!(
        head.contains("capacity fits; 138.34 GiB free of 139.81 GiB (--gpu-memory)"),
        "{head}"
    );
    assert!(
        head.contains("actions  double the pipeline stages (1 → 2) saves 0.11 GiB"),
        "{head}"
    );
}

/// The README's first screen is what `report` prints on the kept real log: the sample cannot
/// drift from the product.
#[test]
fn the_readme_shows_the_reports_real_first_screen() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let command = "$ memprints report qwen3-tiny-pp1-instr.log --gpu-memory 139.81\n";
    let start = readme.find(command).expect("the README's sample") + command.len();
    let sample = &readme[start..start + readme[start..].find("```").unwrap()];
    let out = memprints()
        .args(["report", "tests/data/e2e/qwen3-tiny-pp1-instr.log"])
        .args(["--gpu-memory", "139.81"])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.starts_with(sample),
        "README:\n{sample}\nreport:\n{text}"
    );
}

#[test]
fn a_log_that_repeats_another_runs_step_lines_is_not_counted_again() {
    // Issue 22, item 6 b. dsv2's run, then qwen3's; then a launcher's copy of dsv2's last lines
    // (no launch line: on main it was merged into qwen3's run, 6 steps with dsv2's 0.26 GB peak)
    // or of its logger lines (its own run on main).
    let gb = |x: f64| (x * (1u64 << 30) as f64).round() as i64;
    let dsv2 = "tests/data/e2e/defaults-pp1/dsv2-tiny-pp1-instr.log";
    let qwen3 = "tests/data/e2e/defaults-pp1/qwen3-tiny-pp1-instr.log";
    for copy in [
        "tests/data/pairings/dsv2-steps.log",
        "tests/data/pairings/dsv2-info.log",
    ] {
        let report = report_json(&[dsv2, qwen3, copy]);
        assert_matches_schema(&report);
        let runs = report["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{copy}");
        let second = &runs[1]["training"];
        assert_eq!(second["steps_logged"], 3, "{copy}");
        assert_eq!(second["peak_gpu_memory"], gb(0.21), "{copy}");
        assert_eq!(runs[1]["sources"], serde_json::json!([qwen3]), "{copy}");
        assert_eq!(runs[0]["training"]["steps_logged"], 3, "{copy}");
        let repeated = report["repeated"].as_array().unwrap();
        assert_eq!(repeated.len(), 1, "{copy}");
        assert_eq!(repeated[0]["path"], copy);
        assert_eq!(repeated[0]["repeats"], dsv2);
        assert_eq!(
            (&repeated[0]["steps"], &repeated[0]["prints_too"]),
            (&serde_json::json!(3), &serde_json::json!(false))
        );
        let note =
            format!("{copy} repeats the step lines of {dsv2} (steps 1 to 3); not counted again.");
        let text = report_text(&[dsv2, qwen3, copy]);
        assert!(text.contains(&note), "{text}");
        for format in ["markdown", "html"] {
            let out = report_text(&[dsv2, qwen3, copy, "--format", format]);
            assert!(out.contains("repeats the step lines of"), "{format}: {out}");
            assert!(out.contains("not counted again."), "{format}");
        }
    }
    // A log read twice: the second copy is no run at all.
    let report = report_json(&[qwen3, qwen3]);
    assert_eq!(report["runs"].as_array().unwrap().len(), 1);
    assert_eq!(report["repeated"][0]["prints_too"], true);
}

#[test]
fn a_snapshot_goes_with_the_run_whose_time_span_holds_its_events() {
    // Issue 22, item 6 c. Both runs print `<snapdir>/memory_snapshot_rank0_step0.pickle`; the
    // file of that name beside their logs is dsv2's (it ran later and overwrote qwen3's). Read
    // in name order (dsv2 first), main gave it to the last run that printed the name: qwen3's.
    let by_time = "tests/data/pairings/snapshot-by-time";
    let dsv2 = format!("{by_time}/dsv2-tiny-pp1-instr.log");
    let qwen3 = format!("{by_time}/qwen3-tiny-pp1-instr.log");
    let json = |args: &[&str]| -> Value {
        let out = memprints()
            .env("TZ", "UTC")
            .arg("report")
            .args(args)
            .args(["--format", "json"])
            .assert()
            .success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let report = json(&[&dsv2, &qwen3]);
    assert_matches_schema(&report);
    let snaps = |n: usize| report["runs"][n]["memory"]["snapshots"].clone();
    let (first, second) = (snaps(0), snaps(1));
    assert_eq!(
        first[0]["path"],
        format!("{by_time}/memory_snapshot_rank0_step0.pickle.gz")
    );
    assert_eq!(first[0]["paired_by"], "time");
    assert_eq!(first[0]["peak_allocated"], 227_133_564, "dsv2's 216.61 MiB");
    assert_eq!(
        first[0]["pairing"],
        "paired by time: its events (2026-12-01 22:21:14 to 22:21:24) lie within this run's \
         (2026-12-01 22:21:14 to 22:21:26)"
    );
    assert_eq!(second[0]["path"], Value::Null);
    let error = second[0]["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("within the time span of run {dsv2}")),
        "{error}"
    );
    // Given by a name that matches neither printed one: main skipped it as a snapshot whose
    // run cannot be told; its time tells it.
    let e2e = "tests/data/e2e/defaults-pp1";
    let snapshot = format!("{e2e}/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz");
    let (dsv2, qwen3) = (
        format!("{e2e}/dsv2-tiny-pp1-instr.log"),
        format!("{e2e}/qwen3-tiny-pp1-instr.log"),
    );
    let report = json(&[&qwen3, &dsv2, "--snapshots", &snapshot]);
    assert!(report["skipped"].as_array().unwrap().is_empty());
    let paired = &report["runs"][1]["memory"]["snapshots"][0];
    assert_eq!(paired["path"], snapshot.as_str());
    assert_eq!(paired["paired_by"], "time");
    // One run whose span does not hold it: said, not paired (main paired it with the only run).
    let report = json(&[&qwen3, "--snapshots", &snapshot]);
    let view = &report["runs"][0]["memory"]["snapshots"][0];
    assert_eq!(view["path"], Value::Null);
    assert!(
        view["error"]
            .as_str()
            .unwrap()
            .contains("within no run's time span (this run's: 2026-12-01 22:17:39 to 22:17:52)"),
        "{view}"
    );
    // Its own snapshot, by time; a log without dated step lines, by name.
    let own = format!("{e2e}/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz");
    let report = json(&[&qwen3, "--snapshots", &own]);
    assert_eq!(
        report["runs"][0]["memory"]["snapshots"][0]["paired_by"],
        "time"
    );
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::read_to_string(&qwen3).unwrap();
    let undated = log.replace("2026-12-01 22:17:", "");
    let undated = write_temp(dir.path(), "undated.log", undated.as_bytes());
    let report = json(&[&undated, "--snapshots", &own]);
    let view = &report["runs"][0]["memory"]["snapshots"][0];
    assert_eq!(view["paired_by"], "name");
    assert_eq!(
        view["pairing"],
        "paired by name: the logs give this run no time span"
    );
    let out = memprints()
        .env("TZ", "UTC")
        .args(["report", "--wide", &qwen3, "--snapshots", &own])
        .assert()
        .success();
    let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        text.contains(
            "Paired by time: its events (2026-12-01 22:17:39 to 22:17:49) lie within this run's"
        ),
        "{text}"
    );
}

#[test]
fn a_snapshot_found_by_name_stays_when_either_reading_of_the_dates_holds_it() {
    // qwen3's run (22:17:39 to 22:17:52) and dsv2's (22:21:13 to 22:21:28) ran back to back; the
    // logs' dates are UTC. Read in a zone 3 min 36 s east of UTC, dsv2's dates put its span over
    // qwen3's snapshot's events (22:17:39 to 22:17:49), and qwen3's span over none of them. main
    // read the dates in this machine's zone first and took the snapshot qwen3 found by name
    // away from it, for dsv2.
    let e2e = "tests/data/e2e/defaults-pp1";
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let copy = |from: &str, dir: &Path, to: &str| {
        let to = dir.join(to);
        std::fs::copy(format!("{e2e}/{from}"), &to).unwrap();
        to.display().to_string()
    };
    let qwen3 = copy("qwen3-tiny-pp1-instr.log", a.path(), "qwen3.log");
    let snapshot = copy(
        "qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
        a.path(),
        "memory_snapshot_rank0_step0.pickle.gz",
    );
    let dsv2 = copy("dsv2-tiny-pp1-instr.log", b.path(), "dsv2.log");
    for tz in ["<+000336>-00:03:36", "UTC"] {
        let out = memprints()
            .env("TZ", tz)
            .args(["report", &qwen3, &dsv2, "--format", "json"])
            .assert()
            .success();
        let report: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let view = &report["runs"][0]["memory"]["snapshots"][0];
        assert_eq!(view["path"], snapshot.as_str(), "TZ={tz}: {view}");
        assert_eq!(view["paired_by"], "time", "TZ={tz}");
        let theirs = report["runs"][1]["memory"]["snapshots"].as_array().unwrap();
        assert!(
            theirs.iter().all(|s| s["path"].is_null()),
            "TZ={tz}: {theirs:?}"
        );
    }
}

/// A given snapshot that no printed name claims, in a report of several runs, is skipped with
/// the reason that holds: one that cannot be read says why it was not read, one whose trace has
/// no times says so (both were said to fall in no run's time span).
#[test]
fn an_unclaimed_snapshot_is_skipped_with_its_own_reason() {
    let e2e = "tests/data/e2e/defaults-pp1";
    let (qwen3, dsv2) = (
        format!("{e2e}/qwen3-tiny-pp1-instr.log"),
        format!("{e2e}/dsv2-tiny-pp1-instr.log"),
    );
    let dir = tempfile::tempdir().unwrap();
    let unreadable = write_temp(dir.path(), "mystery.pickle", b"not a pickle\n");
    // A readable snapshot of one segment and an empty trace, written by Python's pickle.
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import pickle,sys; pickle.dump({'segments': [{'device': 0, 'address': 0, \
             'total_size': 2097152, 'allocated_size': 1024, 'active_size': 1024, \
             'segment_type': 'small', 'blocks': [{'size': 1024, 'state': 'active_allocated', \
             'address': 0}]}], 'device_traces': [[]]}, open(sys.argv[1], 'wb'), protocol=4)",
        )
        .arg(dir.path().join("untimed.pickle"))
        .status()
        .unwrap();
    assert!(out.success());
    let untimed = dir.path().join("untimed.pickle").display().to_string();
    let report = report_json(&[&qwen3, &dsv2, "--snapshots", &unreadable, &untimed]);
    let reasons: Vec<(&str, &str)> = report["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["path"].as_str().unwrap(), s["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    for (path, reason) in reasons {
        if path == unreadable {
            assert!(reason.starts_with("not read: "), "{reason}");
        } else {
            assert!(
                reason.ends_with("its trace holds no times to go by"),
                "{reason}"
            );
        }
    }
}
