//! The GPU harness's host side (`e2e/*.py`: dataset generator and result checks) needs no GPU;
//! its unit tests run here so CI covers them.

use std::process::Command;

#[test]
fn the_e2e_host_scripts_pass_their_unit_tests() {
    let out = Command::new("python3")
        .args(["-m", "unittest", "discover", "-s", "e2e"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "python3 -m unittest discover -s e2e failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn tree_prints_reads_the_instrumented_sample_trees_detail_layers_and_probe_stages() {
    // The demo's tree, kept instrumented: `add tiny-moe --ranks 0,1` with the automatic
    // detail layers (0, 1); its layer_forward's parameter is `block`, not PithTrain's `layer`.
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    assert_cmd::Command::cargo_bin("memprints")
        .unwrap()
        .args(["demo", "--quiet", "--keep"])
        .arg(&tree)
        .assert()
        .success();
    let execution = std::fs::read_to_string(tree.join("pithtrain/dualpipe/execution.py")).unwrap();
    assert!(execution.contains("_SavedTensorsProfiler(block, \"stage3\")"));
    let out = Command::new("python3")
        .arg("e2e/tree_prints.py")
        .arg(&tree)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .strip_prefix("E2E_PRINTS ")
        .unwrap_or_else(|| panic!("one E2E_PRINTS line: {stdout}"));
    let info: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(
        info,
        serde_json::json!({
            "instrumented": true,
            "detail_layers": [0, 1],
            "ranks": [0, 1],
            "stages_after": [1, 2, 3, 4, 5],
            "stages_saved": [1, 3, 5],
        })
    );
}
