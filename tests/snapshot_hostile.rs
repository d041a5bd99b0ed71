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
            stderr.starts_with("memprints: error: tests/data/snapshot/hostile/"),
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

/// Runs memprints with `args` from the crate root; returns its exit code, its stderr and its
/// peak RSS in KiB, from `wait4` on that child alone (other tests' children do not count).
fn run_measured(args: &[&str]) -> (Option<i32>, String, u64) {
    let (code, _, stderr, kib) = run_measured_with_stdout(args);
    (code, stderr, kib)
}

/// [`run_measured`], with its stdout too (read before its stderr, which must stay short).
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn run_measured_with_stdout(args: &[&str]) -> (Option<i32>, String, String, u64) {
    use std::io::Read;
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memprints"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data that wait4 fills; `pid` is our unwaited child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, stdout, stderr, usage.ru_maxrss as u64)
}

const BLOWUP: &str = "tests/data/snapshot/hostile/blowup.pickle.gz";

/// 201 KB of gzip that grew to 1.4 GB (2.7 GB for a folder of four, read side by side):
/// with `--max-memory 128M` it is refused in one line naming it and the budget, alone or four
/// at once, and the process stays under 256 MiB.
#[test]
fn the_blowup_pickle_is_refused_within_the_budget_alone_and_four_at_once() {
    let four = tempfile::tempdir().unwrap();
    for rank in 0..4 {
        std::fs::copy(
            format!("{}/{BLOWUP}", env!("CARGO_MANIFEST_DIR")),
            four.path()
                .join(format!("memory_snapshot_rank{rank}_step0.pickle.gz")),
        )
        .unwrap();
    }
    let folder = four.path().to_str().unwrap();
    for input in [BLOWUP, folder] {
        let (code, stderr, kib) = run_measured(&["snapshot", "--max-memory", "128M", input]);
        assert_eq!(code, Some(1), "{input}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{input}: {stderr}");
        assert!(!stderr.contains("panicked"), "{input}: {stderr}");
        assert!(
            stderr.contains(
                "blowup.pickle.gz: reading it needs more than 128 MiB (--max-memory): at "
            ) || stderr.contains(
                "_step0.pickle.gz: reading it needs more than 128 MiB (--max-memory): at "
            ),
            "{input}: {stderr}"
        );
        assert!(kib < 256 * 1024, "{input}: peak RSS {kib} KiB: {stderr}");
    }
}

/// Without `--max-memory` the budget is 1 GiB: the file is refused before the process passes
/// it by more than its own code and buffers.
#[test]
fn the_default_budget_is_one_gib() {
    let (code, stderr, kib) = run_measured(&["snapshot", BLOWUP]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("reading it needs more than 1 GiB (--max-memory)"),
        "{stderr}"
    );
    assert!(kib < 1152 * 1024, "peak RSS {kib} KiB: {stderr}");
}

/// A budget too small for any file names the file and the budget, and a malformed size is a
/// usage error.
#[test]
fn a_tiny_budget_refuses_even_a_small_snapshot_and_bad_sizes_are_usage_errors() {
    let (code, stderr, _) = run_measured(&[
        "snapshot",
        "--max-memory",
        "64K",
        "tests/data/snapshot/basic_p4.pickle",
    ]);
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        "memprints: error: tests/data/snapshot/basic_p4.pickle: reading it needs more than 64 KiB (--max-memory): before the first byte (the decompressor alone takes 0 bytes)"
    );
    let (code, stderr, _) = run_measured(&["snapshot", "--max-memory", "lots", "x.pickle"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("'lots': not a size"), "{stderr}");
}

/// 8,192 real-shaped per-rank snapshots in one folder: each report keeps only what is shown,
/// so the whole run stays under 256 MiB, and every rank is reported.
#[test]
fn a_folder_of_8192_snapshots_stays_under_256_mib() {
    let dir = tempfile::tempdir().unwrap();
    let one = format!(
        "{}/tests/data/snapshot/ranks/memory_snapshot_rank0_step0.pickle",
        env!("CARGO_MANIFEST_DIR")
    );
    for rank in 0..8192 {
        let to = dir
            .path()
            .join(format!("memory_snapshot_rank{rank}_step0.pickle"));
        if std::fs::hard_link(&one, &to).is_err() {
            std::fs::copy(&one, &to).unwrap();
        }
    }
    let (code, stdout, stderr, kib) =
        run_measured_with_stdout(&["snapshot", "--format", "json", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(kib < 256 * 1024, "peak RSS {kib} KiB");
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let snapshots = json["snapshots"].as_array().unwrap();
    assert_eq!(snapshots.len(), 8192);
    assert_eq!(snapshots[8191]["rank"], 8191);
}
