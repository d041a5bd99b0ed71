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
        // 97 KB gzipped, 30,000,001 references to one trace entry (Python reads it as such).
        (
            "shared_entry.pickle.gz",
            "trace entry 0 is referenced a second time: PyTorch writes each once, and a shared one would be expanded in full, so it is refused",
        ),
        (
            "shared_segment.pickle",
            "segments[1]: refers to a list or dict already used elsewhere",
        ),
        (
            "shared_trace.pickle",
            "device_traces[1]: refers to a list or dict already used elsewhere",
        ),
    ];
    for (file, needle) in cases {
        let (code, stderr) = run(file);
        assert_eq!(code, Some(1), "{file}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{file}: {stderr}");
        assert!(
            stderr.starts_with("error: tests/data/snapshot/hostile/"),
            "{file}: {stderr}"
        );
        assert!(stderr.contains(needle), "{file}: {stderr}");
        assert!(!stderr.contains("panicked"), "{file}: {stderr}");
    }
}

/// Shared references cost O(1) and are refused before they expand: the 30M-reference file
/// stays far below 1 GiB (it took 3 GB before).
#[test]
fn shared_references_stay_small() {
    let time = std::path::Path::new("/usr/bin/time");
    if !time.exists() {
        eprintln!("note: /usr/bin/time is missing; skipping the memory check");
        return;
    }
    let out = std::process::Command::new(time)
        .args(["-f", "%M"])
        .arg(assert_cmd::cargo::cargo_bin("memprints"))
        .args([
            "snapshot",
            "tests/data/snapshot/hostile/shared_entry.pickle.gz",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kib: u64 = stderr.lines().last().unwrap().trim().parse().unwrap();
    assert!(kib < 200 * 1024, "max RSS {kib} KiB: {stderr}");
}

/// Millions of references to one string in a list: each costs 8 bytes, and past
/// `MAX_GENERIC_VALUES` the reader stops with the limit named.
#[test]
fn too_many_generic_values_are_refused_with_the_limit() {
    let n = memprints_snapshot::decode::MAX_GENERIC_VALUES + 10;
    let mut bytes = b"\x80\x02}(X\x08\x00\x00\x00segmentsq\x00]q\x01".to_vec();
    for chunk in 0..n.div_ceil(1000) {
        bytes.push(b'(');
        for _ in 0..1000.min(n - chunk * 1000) {
            bytes.extend_from_slice(b"h\x00");
        }
        bytes.push(b'e');
    }
    bytes.extend_from_slice(b"u.");
    let e = memprints_snapshot::decode::Snapshot::read(&bytes[..])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("more than 16777216 values outside trace entries, blocks and frames"),
        "{e}"
    );
}

/// The fuzz target's seeds and the crashes it found read or fail cleanly, and render.
#[test]
fn fuzz_seeds_and_crashes_read_or_fail_cleanly() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut files: Vec<_> = ["fuzz/seeds/snapshot_pickle", "tests/data/snapshot/fuzz"]
        .iter()
        .flat_map(|d| std::fs::read_dir(format!("{root}/{d}")).unwrap())
        .map(|e| e.unwrap().path())
        // Other targets' seeds live in folders of their own (`fuzz/seeds/strip/`, `fuzz/seeds/report_log/`).
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let Ok(snapshot) = memprints_snapshot::decode::Snapshot::read(&bytes[..]) else {
            continue;
        };
        let devices = memprints_snapshot::analyze::analyze(&snapshot);
        for d in &devices {
            let t = memprints_snapshot::timeline::DeviceTimeline::build(&snapshot, d);
            assert!(t.events <= d.events, "{}", path.display());
        }
    }
}

#[test]
fn every_prefix_of_a_real_snapshot_fails_cleanly() {
    let whole = std::fs::read("tests/data/snapshot/basic_p4.pickle").unwrap();
    for len in 0..whole.len() - 1 {
        let e = memprints_snapshot::decode::Snapshot::read(&whole[..len]).unwrap_err();
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
