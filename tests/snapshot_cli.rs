//! `memprints snapshot` on the synthetic snapshots of tests/gen_snapshots.py.

mod support;

use assert_cmd::Command;
use serde_json::Value;

const DATA: &str = "tests/data/snapshot";
const MIB: u64 = 1 << 20;

fn memprints() -> Command {
    Command::cargo_bin("memprints").unwrap()
}

fn json(args: &[&str]) -> Value {
    let out = memprints()
        .arg("snapshot")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn protocols_2_4_and_5_give_the_same_report() {
    let mut reports = Vec::new();
    for p in [2, 4, 5] {
        let mut v = json(&[&format!("{DATA}/basic_p{p}.pickle")]);
        let s = &mut v["snapshots"][0];
        s["path"] = Value::Null;
        s["file_bytes"] = Value::Null;
        reports.push(v);
    }
    assert_eq!(reports[0], reports[1]);
    assert_eq!(reports[0], reports[2]);
}

#[test]
fn peak_counts_blocks_live_before_the_trace_and_groups_by_pithtrain_frame() {
    let v = json(&[&format!("{DATA}/basic_p4.pickle")]);
    assert_eq!(v["schema_version"], 2);
    let s = &v["snapshots"][0];
    assert_eq!(s["events"], 14);
    // 3 MiB live throughout + 16 + 8 + 8 + 2 allocated by event 6.
    assert_eq!(s["peak_allocated_bytes"], 37 * MIB);
    assert_eq!(s["peak_time_us"], 1_700_000_000_000_006u64);
    assert_eq!(s["live_before_trace_bytes"], 7 * MIB);
    let top = s["top_stacks"].as_array().unwrap();
    let rows: Vec<_> = top
        .iter()
        .map(|g| {
            (
                g["frame"].as_str().unwrap(),
                g["bytes"].as_u64().unwrap(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            (
                "pithtrain/dualpipe/execution.py:604 layer_forward",
                16 * MIB,
                1
            ),
            ("pithtrain/models/moe.py:210 expert_forward", 16 * MIB, 2),
            ("/work/scripts/run.py:12 step", 5 * MIB, 2),
        ]
    );
    // Reserved includes the segment at 2**63 + ..., whose address needs a 9-byte LONG1.
    assert_eq!(s["reserved_bytes"], 84 * MIB);
    let oom = &s["ooms"][0];
    assert_eq!(oom["requested_bytes"], 100 * 1024 * MIB);
    assert_eq!(oom["device_free_bytes"], MIB);
    assert_eq!(oom["allocated_bytes"], 32 * MIB);
    assert_eq!(oom["reserved_bytes"], 84 * MIB);
    assert_eq!(s["allocator_settings"]["expandable_segments"], "False");
}

#[test]
fn top_limits_the_stack_lists() {
    let v = json(&[&format!("{DATA}/basic_p4.pickle"), "--top", "1"]);
    assert_eq!(v["snapshots"][0]["top_stacks"].as_array().unwrap().len(), 1);
}

#[test]
fn legacy_snapshot_takes_stacks_from_block_history() {
    let v = json(&[&format!("{DATA}/legacy_p2.pickle")]);
    let s = &v["snapshots"][0];
    assert_eq!(s["events"], 0);
    assert_eq!(s["peak_allocated_bytes"], 2 * MIB);
    assert_eq!(s["peak_time_us"], Value::Null);
    assert_eq!(
        s["top_stacks"][0]["frame"],
        "pithtrain/models/moe.py:210 expert_forward"
    );
}

#[test]
fn a_folder_gives_one_snapshot_per_rank_in_rank_order() {
    let v = json(&[&format!("{DATA}/ranks")]);
    let snaps = v["snapshots"].as_array().unwrap();
    let ranks: Vec<_> = snaps.iter().map(|s| s["rank"].as_u64().unwrap()).collect();
    assert_eq!(ranks, vec![0, 1, 2]);
    let peaks: Vec<_> = snaps
        .iter()
        .map(|s| s["peak_allocated_bytes"].as_u64().unwrap())
        .collect();
    assert_eq!(peaks, vec![37 * MIB, 74 * MIB, 111 * MIB]);
}

#[test]
fn text_report_of_a_rank_folder() {
    let out = memprints()
        .args(["snapshot", &format!("{DATA}/ranks"), "--top", "3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

#[test]
fn html_report_has_a_self_contained_timeline_with_peak_and_oom() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    memprints()
        .args([
            "snapshot",
            &format!("{DATA}/basic_p4.pickle"),
            "--format",
            "html",
            "--out",
        ])
        .arg(&path)
        .assert()
        .success()
        .stdout("");
    let html = std::fs::read_to_string(path).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_eq!(html.matches("<div class=\"mp-timeline\"").count(), 1);
    assert_eq!(
        html.matches("<script>").count(),
        1,
        "the script once per page"
    );
    assert!(html.contains("\"peak_label\":\"37.00 MiB\""));
    assert!(html.contains("<td>13 µs into the trace</td><td>100.00 GiB</td>"));
    assert!(html.contains("<b>pithtrain/dualpipe/execution.py:604 layer_forward</b>"));
    assert!(!html.contains("http"), "no links out of the page");
}

#[test]
fn diff_lists_the_stack_that_grew_first() {
    let out = memprints()
        .args([
            "snapshot",
            "diff",
            &format!("{DATA}/diff_a.pickle"),
            &format!("{DATA}/diff_b.pickle"),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &v["diff"];
    assert_eq!(d["peak_delta_bytes"], 8 * MIB);
    assert_eq!(
        d["at_peak"][0]["frame"],
        "pithtrain/models/moe.py:210 expert_forward"
    );
    assert_eq!(d["at_peak"][0]["delta_bytes"], 8 * MIB);
    assert_eq!(d["at_end"][0]["delta_bytes"], 4 * MIB);
    assert_eq!(d["at_peak"].as_array().unwrap().len(), 1);
}

#[test]
fn diff_text_report() {
    let out = memprints()
        .args([
            "snapshot",
            "diff",
            &format!("{DATA}/diff_a.pickle"),
            &format!("{DATA}/diff_b.pickle"),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    insta::assert_snapshot!(String::from_utf8(out.stdout).unwrap());
}

#[test]
fn one_bad_file_among_good_ones_exits_1_and_reports_the_rest() {
    let out = memprints()
        .args([
            "snapshot",
            &format!("{DATA}/basic_p4.pickle"),
            &format!("{DATA}/hostile/reduce.pickle"),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["snapshots"].as_array().unwrap().len(), 1);
    assert!(v["errors"][0]["error"].as_str().unwrap().contains("REDUCE"));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn no_input_is_an_error() {
    let out = memprints().arg("snapshot").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        "error: no snapshot given: pass one or more PICKLE files or folders\n"
    );
}

fn schema() -> Value {
    let text = std::fs::read_to_string(support::root().join("schema/snapshot.schema.json"))
        .expect("schema file");
    serde_json::from_str(&text).expect("schema is JSON")
}

fn assert_matches_schema(v: &Value) {
    let errors = support::schema::validate(&schema(), v);
    assert!(
        errors.is_empty(),
        "schema violations:\n{}",
        errors.join("\n")
    );
}

/// `snapshot diff A B --format json`, which exits 0.
fn diff_json(a: &str, b: &str) -> Value {
    let out = memprints()
        .args(["snapshot", "diff", a, b, "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every key of the JSON output is declared in schema/snapshot.schema.json and vice versa.
#[test]
fn json_keys_match_the_schema() {
    let schema = schema();
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let declared = |def: &str| keys(&schema["$defs"][def]["properties"]);
    let v = json(&[&format!("{DATA}/basic_p4.pickle")]);
    let s = &v["snapshots"][0];
    assert_eq!(keys(&v), declared("SnapshotReport"));
    assert_eq!(keys(s), declared("Snapshot"));
    assert_eq!(keys(&s["devices"][0]), declared("Device"));
    assert_eq!(keys(&s["top_stacks"][0]), declared("StackGroup"));
    assert_eq!(keys(&s["ooms"][0]), declared("OomEvent"));
    let d = diff_json(
        &format!("{DATA}/diff_a.pickle"),
        &format!("{DATA}/diff_b.pickle"),
    );
    assert_eq!(keys(&d), declared("DiffReport"));
    assert_eq!(keys(&d["diff"]), declared("SnapshotDiff"));
    assert_eq!(keys(&d["diff"]["at_peak"][0]), declared("DiffRow"));
}

/// The JSON of every kept snapshot, synthetic and real, of a failed input and of a diff
/// validates against schema/snapshot.schema.json.
#[test]
fn every_kept_snapshot_matches_the_schema() {
    let inputs = [
        "basic_p2.pickle",
        "basic_p4.pickle",
        "basic_p5.pickle",
        "legacy_p2.pickle",
        "diff_a.pickle",
        "diff_b.pickle",
        "fuzz/extreme_times.pickle",
        "ranks",
    ]
    .map(|p| format!("{DATA}/{p}"));
    let mut args: Vec<&str> = inputs.iter().map(String::as_str).collect();
    args.extend([
        "tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
        "tests/data/e2e/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz",
        "--top",
        "100",
    ]);
    let v = json(&args);
    assert_eq!(v["snapshots"].as_array().unwrap().len(), 12);
    assert_matches_schema(&v);

    let out = memprints()
        .args(["snapshot", &format!("{DATA}/basic_p4.pickle")])
        .arg(format!("{DATA}/hostile/truncated.pickle"))
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["errors"].as_array().unwrap().len(), 1);
    assert_matches_schema(&v);

    assert_matches_schema(&diff_json(
        &format!("{DATA}/diff_a.pickle"),
        &format!("{DATA}/diff_b.pickle"),
    ));
}

#[test]
fn the_schema_check_rejects_a_snapshot_that_breaks_the_schema() {
    let mut v = json(&[&format!("{DATA}/basic_p4.pickle")]);
    v["snapshots"][0]["surprise"] = Value::from(1);
    v["snapshots"][0]["devices"][0]["peak_time_us"] = Value::from("soon");
    v["snapshots"][0]["top_stacks"][0]
        .as_object_mut()
        .unwrap()
        .remove("frame");
    v["schema_version"] = Value::from(1);
    let errors = support::schema::validate(&schema(), &v);
    // The report fails on all four; the diff alternative of `oneOf` fails on its own.
    assert_eq!(errors.len(), 1, "{errors:#?}");
    let report = &schema()["$defs"]["SnapshotReport"];
    let errors = support::schema::validate_against(&schema(), report, &v);
    assert_eq!(errors.len(), 4, "{errors:#?}");
}
