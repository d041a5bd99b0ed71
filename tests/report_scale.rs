//! `memprints report` on a folder of many per-rank logs, as a big run writes them (issue 24,
//! item 10): one run of every rank, and a text report a person can read — the sections of the
//! ranks that matter, one warning for the snapshots not found, the files named by their count.
//!
//! The logs are the kept real one-GPU log (`tests/data/e2e/qwen3-tiny-pp1-instr.log`) re-ranked:
//! rank R's file holds its prints (`[rank=R …]`, its snapshot path) and the log's other lines,
//! but PithTrain's INFO lines (the config dump, the step lines) in rank 0's file only, as its
//! logger writes them on rank 0 alone.

mod support;

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use support::root;

const RANKS: u32 = 40;
const PP: u32 = 4;

fn write_folder(dir: &Path) {
    write_ranks(dir, RANKS);
}

fn write_ranks(dir: &Path, ranks: u32) {
    let real = std::fs::read_to_string(root().join("tests/data/e2e/qwen3-tiny-pp1-instr.log"))
        .expect("the kept real log");
    for rank in 0..ranks {
        let mut text = String::new();
        for line in real.lines() {
            if line.starts_with("E2E_") || (rank != 0 && line.contains(" | INFO | ")) {
                continue;
            }
            let line = line
                .replacen(
                    "[rank=0 pp=0]",
                    &format!("[rank={rank} pp={}]", rank % PP),
                    1,
                )
                .replacen("[rank=0]", &format!("[rank={rank}]"), 1)
                .replace("_rank0_", &format!("_rank{rank}_"));
            text += &line;
            text.push('\n');
        }
        std::fs::write(dir.join(format!("rank{rank:04}.log")), text).unwrap();
    }
}

fn report(dir: &Path, format: &str) -> String {
    let out = Command::cargo_bin("memprints")
        .expect("the memprints binary")
        .args(["report", "--format", format])
        .arg(dir)
        .env("NO_COLOR", "1")
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn a_folder_of_per_rank_logs_is_one_run_of_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path());
    let json: Value = serde_json::from_str(&report(dir.path(), "json")).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "one launch (rank 0's config line), one run");
    assert_eq!(runs[0]["ranks"].as_array().unwrap().len(), RANKS as usize);
    // Every rank keeps its detail in JSON, whatever the text shows.
    assert!(
        runs[0]["ranks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| !r["saved_tensors"].as_array().unwrap().is_empty())
    );
}

#[test]
fn the_text_of_a_big_run_shows_the_ranks_that_matter_and_one_snapshot_warning() {
    let dir = tempfile::tempdir().unwrap();
    write_folder(dir.path());
    let text = report(dir.path(), "text");
    let sections = text.lines().filter(|l| l.starts_with("Rank ")).count();
    assert_eq!(sections, PP as usize, "the highest of each stage:\n{text}");
    assert!(text.contains(&format!(
        "Sections of {PP} of the run's {RANKS} ranks below"
    )));
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("memory snapshot"))
        .filter(|l| l.starts_with("warning:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!("warning: {RANKS} of the run's {RANKS} memory")),
        "{warnings:?}"
    );
    assert!(text.contains(&format!("From {RANKS} files (")), "{text}");
    // Stages that peak alike are compared as two stages, not one with itself.
    assert!(!text.contains("pp=0 peaks at 0.17 GiB, pp=0"), "{text}");
}

/// A folder of 2,000 per-rank logs, every rank printing in detail (88 saved tensors, 26 layer
/// probes, …), reported as JSON to a file: the peak RSS stays under 64 MiB (it was 150 MiB: the
/// whole JSON made before a byte was written, every rank's raw detail held with 32 bytes of
/// bookkeeping a print, per-thread malloc arenas holding both the raw prints and the parsed
/// reports; bench/report.sh measures 10,000 logs). Measured with `wait4` on the child alone;
/// this process holds nothing large when it starts it (Linux counts the parent's high-water
/// RSS at the exec into the child's).
#[test]
#[allow(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its rusage"
)]
fn a_folder_of_2000_ranks_is_reported_in_under_64_mib() {
    let dir = tempfile::tempdir().unwrap();
    write_ranks(dir.path(), 2000);
    // Not inside the folder read: `--out` refuses any input.
    let out_dir = tempfile::tempdir().unwrap();
    let out = out_dir.path().join("report.json");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("memprints"))
        .args(["report", "--format", "json", "--out"])
        .arg(&out)
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: `rusage` is plain data that wait4 fills; `pid` is our unwaited child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4 failed");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    let kib = usage.ru_maxrss as u64;
    assert!(kib < 64 * 1024, "peak RSS {kib} KiB");
    let json: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(json["runs"][0]["ranks"].as_array().unwrap().len(), 2000);
}

/// A rank-0 log whose run ran out of memory in its first step (no step line) and whose config
/// line comes after more than 64 KiB of launcher output, in a folder with another rank's log:
/// its config is still found, so what to change is offered as for the log alone (a worker
/// used to look for config lines only in a log that launches near its start or holds steps).
#[test]
fn a_folder_finds_the_config_of_a_run_that_died_before_its_first_step() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::read_to_string(root().join("tests/data/crash/qwen3-tiny-oom.log")).unwrap();
    let noise =
        "node0:4712:4790 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
            .repeat(1000);
    std::fs::write(dir.path().join("rank0.log"), format!("{noise}{real}")).unwrap();
    let other: String = real
        .lines()
        .filter(|l| l.starts_with("[rank=0]"))
        .map(|l| format!("{}\n", l.replacen("[rank=0", "[rank=1", 1)))
        .collect();
    std::fs::write(dir.path().join("rank1.log"), other).unwrap();
    let json: Value = serde_json::from_str(&report(dir.path(), "json")).unwrap();
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    // The actions need the run's settings: without its config line none is offered.
    let actions = runs[0]["what_to_change"]["actions"].as_array().unwrap();
    assert!(!actions.is_empty(), "{}", runs[0]["what_to_change"]);
}
