//! Memory bounds of reading snapshots, measured as the peak RSS of a `memprints` child.
//!
//! Kept apart from the other snapshot tests on purpose: a child starts as a copy of this test
//! process (vfork, then exec), and Linux counts the parent's high-water RSS at the exec into the
//! child's `ru_maxrss`. So no test here holds a large output in memory: the 8,192-file report
//! goes to a file that is checked by streaming it, and each measured child is started alone.

/// Runs memprints with `args` from the crate root; returns its exit code, its stderr and its
/// peak RSS in KiB, from `wait4` on that child alone (other tests' children do not count).
/// Held by whoever runs a measured child: see [`run_measured_with_stdout`].
static MEASURED: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_measured(args: &[&str]) -> (Option<i32>, String, u64) {
    let (code, _, stderr, kib) = run_measured_with_stdout(args);
    (code, stderr, kib)
}

/// [`run_measured`], with its stdout too (read before its stderr, which must stay short).
fn run_measured_with_stdout(args: &[&str]) -> (Option<i32>, String, String, u64) {
    // A child is forked from this process before it execs, and its peak RSS counts what it
    // shared with this process then: no measured child starts while another test of this file
    // holds a large output in memory (the 8,192-file one reads over 100 MiB of it, and holds
    // the lock until it has dropped it).
    let _one_at_a_time = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    measured_unlocked(args)
}

/// [`run_measured_with_stdout`] for a caller that holds [`MEASURED`].
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn measured_unlocked(args: &[&str]) -> (Option<i32>, String, String, u64) {
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

/// Without `--max-memory` the budget is 1 GiB, and each file may take at most 256 times its
/// compressed size or 192 MiB: the 201 KB blowup is refused at 192 MiB, alone and four at once,
/// and the process stays under 256 MiB (issue 24: "the hostile pickle stays under 256 MiB").
/// Given `--max-memory 1G`, the user's budget is taken as it is.
#[test]
fn by_default_a_small_file_that_needs_gigabytes_is_refused_under_256_mib() {
    let four = tempfile::tempdir().unwrap();
    for rank in 0..4 {
        std::fs::copy(
            format!("{}/{BLOWUP}", env!("CARGO_MANIFEST_DIR")),
            four.path()
                .join(format!("memory_snapshot_rank{rank}_step0.pickle.gz")),
        )
        .unwrap();
    }
    for input in [BLOWUP, four.path().to_str().unwrap()] {
        let (code, stderr, kib) = run_measured(&["snapshot", input]);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{input}: {stderr}");
        assert!(
            stderr.contains("reading it needs more than 192 MiB (--max-memory)"),
            "{stderr}"
        );
        assert!(kib < 256 * 1024, "{input}: peak RSS {kib} KiB: {stderr}");
    }
    let (code, stderr, kib) = run_measured(&["snapshot", "--max-memory", "1G", BLOWUP]);
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
        "error: tests/data/snapshot/basic_p4.pickle: reading it needs more than 64 KiB (--max-memory): before the first byte (the decompressor alone takes 0 bytes)"
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
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("report.json");
    let (code, stderr, kib) = run_measured(&[
        "snapshot",
        "--format",
        "json",
        "--out",
        json.to_str().unwrap(),
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(kib < 256 * 1024, "peak RSS {kib} KiB");
    // Every rank is reported, the last one too: counted while streaming the file.
    let (mut ranks, mut last) = (0, false);
    let mut carry = Vec::new();
    let mut file = std::fs::File::open(&json).unwrap();
    let mut chunk = vec![0; 1 << 20];
    loop {
        use std::io::Read;
        let n = file.read(&mut chunk).unwrap();
        if n == 0 {
            break;
        }
        carry.extend_from_slice(&chunk[..n]);
        let keep = carry.len().saturating_sub(64);
        ranks += memchr::memmem::find_iter(&carry, b"\"rank\":")
            .filter(|&at| at < keep)
            .count();
        last |= memchr::memmem::find(&carry, b"rank8191_step0").is_some();
        carry.drain(..keep);
    }
    ranks += memchr::memmem::find_iter(&carry, b"\"rank\":").count();
    assert!(last, "rank 8191 is reported");
    assert!(ranks >= 8192, "{ranks} ranks reported");
}
