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
    // It ends with the report of the bundled log, its summary first, and says it parsed whole.
    let report = &stdout[stdout.find("== memprints report").expect("the report step")..];
    let head: Vec<&str> = report.lines().skip(2).take(15).collect();
    assert!(head.iter().any(|l| l.starts_with("  peak ")), "{report}");
    assert!(
        stdout
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .ends_with("0 unparsed"),
        "{stdout}"
    );
}

#[test]
fn the_bundled_demo_log_parses_whole_with_the_sample_ranks_and_layers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(memprints_codemod::demo::LOG_NAME);
    std::fs::write(&path, memprints_codemod::demo::LOG).unwrap();
    let report = memprints_log::run_report(&[path], &Default::default()).unwrap();
    assert_eq!(report.stats.unparsed_memory_lines, 0);
    let (run,) = (&report.runs[0],);
    assert_eq!(report.runs.len(), 1);
    let ranks: Vec<(u32, Option<u32>)> = run.ranks.iter().map(|r| (r.rank, r.pp)).collect();
    assert_eq!(ranks, [(0, Some(0)), (1, Some(1))]);
    // The demo's detail layers: layer 0 prints on rank 0, layer 1 on rank 1.
    let layers = |r: usize| -> Vec<u32> {
        let mut l: Vec<u32> = run.ranks[r].layers.iter().filter_map(|p| p.layer).collect();
        l.dedup();
        l
    };
    assert_eq!((layers(0), layers(1)), (vec![0], vec![1]));
    assert_eq!(run.training.as_ref().unwrap().steps_logged, 3);
}
