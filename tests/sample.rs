//! The embedded sample (`memprints demo`) is exactly the fixture tree, and the demo runs clean.

use std::path::Path;

use assert_cmd::Command;

#[test]
fn the_embedded_sample_lists_every_fixture_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minitrain");
    let mut on_disk = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                on_disk.push(
                    path.strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .replace('\\', "/"),
                );
            }
        }
    }
    on_disk.sort();
    let mut embedded: Vec<String> = memprints_codemod::sample::FILES
        .iter()
        .map(|(rel, _)| rel.to_string())
        .collect();
    embedded.sort();
    assert_eq!(
        embedded, on_disk,
        "update crates/codemod/src/sample.rs when the fixture tree changes"
    );
}

#[test]
fn the_demo_adds_shows_and_removes_to_the_byte() {
    let out = Command::cargo_bin("memprints")
        .unwrap()
        .arg("demo")
        .env("PATH", "/usr/bin:/bin")
        .assert()
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(stdout.contains("+        gu = silu_mul(g, u)"), "{stdout}");
    assert!(
        stdout.contains("every file of the sample is back, byte for byte"),
        "{stdout}"
    );
}
