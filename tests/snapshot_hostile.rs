//! Hostile or broken pickles fail with one line naming the problem: no panic, no hang.

use assert_cmd::Command;

fn run(file: &str) -> (Option<i32>, String) {
    let out = Command::cargo_bin("memprints")
        .unwrap()
        .args(["snapshot", &format!("tests/data/snapshot/hostile/{file}")])
        .timeout(std::time::Duration::from_secs(20))
        .output()
        .unwrap();
    assert!(out.stdout.is_empty());
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn each_hostile_file_fails_with_one_line() {
    let cases = [
        ("global.pickle", "refused pickle opcode GLOBAL at byte 2"),
        (
            "stack_global.pickle",
            "refused pickle opcode STACK_GLOBAL at byte",
        ),
        ("reduce.pickle", "refused pickle opcode REDUCE at byte 4"),
        ("truncated.pickle", "pickle is truncated"),
        ("deep.pickle", "containers nested deeper than 256"),
        (
            "huge_len.pickle",
            "pickle is truncated: input ends at byte 14 inside BINUNICODE8",
        ),
        ("memo.pickle", "memo index 9 was never stored"),
        (
            "not_snapshot.pickle",
            "not a PyTorch memory snapshot: top level: no 'segments' key",
        ),
    ];
    for (file, needle) in cases {
        let (code, stderr) = run(file);
        assert_eq!(code, Some(1), "{file}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{file}: {stderr}");
        assert!(
            stderr.starts_with("memprints: error: tests/data/snapshot/hostile/"),
            "{file}: {stderr}"
        );
        assert!(stderr.contains(needle), "{file}: {stderr}");
        assert!(!stderr.contains("panicked"), "{file}: {stderr}");
    }
}

#[test]
fn every_prefix_of_a_real_snapshot_fails_cleanly() {
    let whole = std::fs::read("tests/data/snapshot/basic_p4.pickle").unwrap();
    for len in 0..whole.len() - 1 {
        let e = memprints::snapshot::model::Snapshot::read(&whole[..len]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{len}: {e}");
    }
}
