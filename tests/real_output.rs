//! Real output of our own templates, from the GPU run kept in `tests/data/e2e/` (see its
//! README): `report` parses every print of it, and `snapshot` reads its step-0 pickles.

use assert_cmd::Command;
use serde_json::Value;

const DATA: &str = "tests/data/e2e";

fn run(args: &[&str]) -> Value {
    let out = Command::cargo_bin("memprints")
        .unwrap()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .assert()
        .success();
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

fn tags(log: &str) -> u64 {
    let text =
        std::fs::read_to_string(format!("{}/{DATA}/{log}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    text.matches("[rank=").count() as u64
}

#[test]
fn report_parses_every_print_of_the_real_logs() {
    for log in [
        "qwen3-tiny-pp1-instr.log",
        "qwen3-tiny-pp1-resume.log",
        "dsv2-tiny-pp1-instr.log",
    ] {
        let report = run(&["report", &format!("{DATA}/{log}"), "--format", "json"]);
        assert_eq!(report["stats"]["unparsed_memory_lines"], 0, "{log}");
        assert_eq!(
            report["stats"]["memory_lines"].as_u64(),
            Some(tags(log)),
            "{log}"
        );
        assert_eq!(report["runs"].as_array().unwrap().len(), 1, "{log}");
        let rank = &report["runs"][0]["ranks"][0];
        assert_eq!(
            rank["setup"].as_array().unwrap().len(),
            8,
            "{log}: 5 setup_model + cuda ctx, nccl, mesh"
        );
        assert!(rank["pipeline"].as_array().unwrap().len() >= 15, "{log}");
        assert!(!rank["layers"].as_array().unwrap().is_empty(), "{log}");
        assert!(
            !rank["saved_tensors"].as_array().unwrap().is_empty(),
            "{log}"
        );
        assert!(!rank["experts"].as_array().unwrap().is_empty(), "{log}");
    }
}

#[test]
fn the_resumed_run_reports_the_checkpoint_load() {
    let report = run(&[
        "report",
        &format!("{DATA}/qwen3-tiny-pp1-resume.log"),
        "--format",
        "json",
    ]);
    let checkpoint = &report["runs"][0]["ranks"][0]["checkpoint"];
    assert_eq!(checkpoint["param_entries"], 51);
    assert!(checkpoint["optimizer_state"].as_u64().unwrap() > 0);
}

#[test]
fn snapshot_reads_the_real_gzipped_pickles_and_names_the_peak() {
    let report = run(&["snapshot", DATA, "--format", "json", "--top", "5"]);
    let snapshots = report["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 2);
    let mib = |v: &Value| v.as_f64().unwrap() / 1024.0 / 1024.0;
    let peaks: Vec<String> = snapshots
        .iter()
        .map(|s| format!("{:.2}", mib(&s["peak_allocated_bytes"])))
        .collect();
    assert_eq!(peaks, vec!["219.61", "179.98"]);
    for snapshot in snapshots {
        let top = snapshot["top_stacks"].as_array().unwrap();
        assert!(
            top.iter()
                .any(|s| s["frame"].as_str().unwrap().starts_with("pithtrain/")),
            "{top:?}"
        );
    }
}

#[test]
fn a_folder_contributes_its_logs_not_the_archives_beside_them() {
    let dir = tempfile::tempdir().unwrap();
    let log = format!(
        "{}/{DATA}/qwen3-tiny-pp1-instr.log",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::copy(&log, dir.path().join("run_node0.log")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, b"[rank=0] not a log, an archive of checkpoints\n").unwrap();
    std::fs::write(dir.path().join("snapshots.tgz"), gz.finish().unwrap()).unwrap();
    let report = run(&["report", dir.path().to_str().unwrap(), "--format", "json"]);
    assert_eq!(
        report["stats"]["memory_lines"].as_u64(),
        Some(tags("qwen3-tiny-pp1-instr.log"))
    );
    assert_eq!(report["stats"]["unparsed_memory_lines"], 0);
}
