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
