//! `memprints report` stays within a fixed memory budget whatever the input: lines of hundreds
//! of megabytes, compressed inputs that expand to far more than they hold. The binary runs with
//! its data segment limited (`RLIMIT_DATA`, which covers the heap and every private writable
//! mapping): going past the limit fails an allocation and the run with it.

mod support;

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// The budget: the 3 MiB of chunk buffers, the report, the allocator's and the threads' own.
const DATA_LIMIT: u64 = 100 << 20;

/// Runs `memprints report PATH --format json` under [`DATA_LIMIT`]; returns the JSON.
fn report_within_budget(path: &Path) -> serde_json::Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_memprints"));
    cmd.args(["report", path.to_str().unwrap(), "--format", "json"]);
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: DATA_LIMIT,
                rlim_max: DATA_LIMIT,
            };
            if libc::setrlimit(libc::RLIMIT_DATA, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "report failed within {} MiB: {}",
        DATA_LIMIT >> 20,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn two_hundred_megabyte_print_lines_fit_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.log");
    support::write_two_hundred_megabyte_print_lines(&path);
    let report = report_within_budget(&path);
    let schema =
        std::fs::read_to_string(support::root().join("schema/report.schema.json")).unwrap();
    let errors = support::schema::validate(&serde_json::from_str(&schema).unwrap(), &report);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(report["stats"]["long_lines"], 2);
    assert_eq!(report["stats"]["memory_lines"], 3);
    assert_eq!(report["runs"][0]["ranks"][2]["setup"][0]["label"], "b");
}

#[test]
fn a_gzip_that_expands_to_a_line_of_zeros_fits_the_budget() {
    // Text first (the binary sniff reads 8 KiB), then 160 MiB of `0` digits in one line: about
    // 160 KB of gzip. Reading the line whole would take 160 MiB and more. (NUL bytes would not
    // do: a run of them is read around, as a rotated log's are.)
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.log.gz");
    let mut gz = flate2::write::GzEncoder::new(
        std::fs::File::create(&path).unwrap(),
        flate2::Compression::fast(),
    );
    gz.write_all(b"[rank=0] init_device_mesh | non-pt=1.40 mesh_cost=0.30\n")
        .unwrap();
    gz.write_all(&[b'a'; 10_000]).unwrap();
    let zeros = vec![b'0'; 1 << 20];
    for _ in 0..160 {
        gz.write_all(&zeros).unwrap();
    }
    gz.write_all(b"\n[rank=0] init_device_mesh | non-pt=1.50 mesh_cost=0.30\n")
        .unwrap();
    gz.finish().unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20);
    let report = report_within_budget(&path);
    let stats = &report["stats"];
    assert_eq!(
        (stats["lines_read"].as_u64(), stats["long_lines"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(
        stats["cut_bytes"].as_u64(),
        Some(10_000 + (160 << 20) - 65_536)
    );
    assert_eq!(
        report["runs"][0]["ranks"][0]["setup"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn a_zstd_frame_that_asks_for_a_huge_window_is_an_error_not_an_allocation() {
    // A frame header declaring a 2 GiB window (window log 31): refused by the decoder's limit.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("window.log.zst");
    // Magic, frame header descriptor (no single segment, no checksum, no dict id, no content
    // size), window descriptor: exponent 21 → 2^(10+21) bytes, then a raw block.
    let mut frame = vec![0x28, 0xb5, 0x2f, 0xfd, 0x00, 21 << 3];
    frame.extend_from_slice(&[0x01 | (5 << 3), 0x00, 0x00]);
    frame.extend_from_slice(b"hello");
    std::fs::write(&path, &frame).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_memprints"))
        .args(["report", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot read"), "{err}");
}

#[test]
fn a_log_that_shrinks_while_mapped_stops_the_process_with_one_line() {
    // The scenario runs in a child (this test binary again): it dies by design.
    if std::env::var_os("MEMPRINTS_SHRINK_CHILD").is_some() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node0.log");
        std::fs::write(&path, vec![b'x'; 4 << 20]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let map = memprints_log::scan::mapped::Mapped::new(&file, "node0.log").unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        let byte = std::hint::black_box(map.bytes())[3 << 20];
        panic!("read {byte} past the end of a shrunk file");
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_log_that_shrinks_while_mapped_stops_the_process_with_one_line",
            "--nocapture",
        ])
        .env("MEMPRINTS_SHRINK_CHILD", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("memprints: cannot read node0.log: the file shrank while it was being read"),
        "{err}"
    );
}
