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
        .args(["report", "tests/data/report/oom_torchrun.log"])
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
