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
        let e = memprints::snapshot::decode::Snapshot::read(&whole[..len]).unwrap_err();
        assert!(e.to_string().contains("truncated"), "{len}: {e}");
    }
}

/// Found by `cargo fuzz`: trace times near the ends of `i64` overflowed the HTML chart's
/// arithmetic. Every format must still render it.
#[test]
fn extreme_trace_times_render_in_every_format() {
    for format in ["text", "json", "html"] {
        let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("memprints"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "snapshot",
                "tests/data/snapshot/fuzz/extreme_times.pickle",
                "--format",
                format,
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{format}: {stderr}");
        assert!(!stderr.contains("panicked"), "{format}: {stderr}");
    }
}
