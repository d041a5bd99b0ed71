//! A folder's report folded file by file on all cores (each file alone, merged in input order:
//! `memprints_log::folder`) is the report of the same files folded one after the other
//! (`run_report_in_order`, the fold as it always was), byte for byte in every format: over
//! generated per-rank and per-node logs of every shape the generator writes (several passes,
//! garbage, glued prints, ANSI, CRLF, launcher prefixes, an OOM, a cut-off last line), a log
//! read around NUL bytes, a compressed one, a binary file, with and without `--rank`; over
//! folders whose files go on with one another's ranks (relaunches, a copy), which the per-file
//! fold hands back to the fold in order; and over the kept real logs' folders (launches,
//! repeated step lines, config lines, crashes).

mod support;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use memprints_log::{ReportBuilder, ReportOptions, folder, run_report, run_report_in_order};
use memprints_present::report::{Format, render, render_text, write_json};
use support::loggen::{LogConfig, Prefix, write_log};
use support::root;

/// Every rendering of a report: JSON (one line and indented), text, markdown, HTML.
fn renderings(report: &memprints_log::Report) -> Vec<Vec<u8>> {
    let mut line = Vec::new();
    write_json(report, false, &mut line).unwrap();
    let mut pretty = Vec::new();
    write_json(report, true, &mut pretty).unwrap();
    vec![
        line,
        pretty,
        render_text(report, false, Some(100)).into_bytes(),
        render(report, Format::Markdown, false).into_bytes(),
        render(report, Format::Html, false).into_bytes(),
    ]
}

/// The folder's report both ways, and whether the per-file fold kept to itself (no overlap).
fn assert_same_both_ways(dir: &Path, opts: &ReportOptions) {
    let inputs = [dir.to_path_buf()];
    let per_file = run_report(&inputs, opts).unwrap();
    let in_order = run_report_in_order(&inputs, opts).unwrap();
    let names = ["json", "pretty json", "text", "markdown", "html"];
    for ((ours, want), name) in renderings(&per_file)
        .into_iter()
        .zip(renderings(&in_order))
        .zip(names)
    {
        assert!(
            ours == want,
            "{}: the {name} report differs from the fold in order",
            dir.display()
        );
    }
}

/// Whether the per-file fold takes `dir`'s logs alone, without handing them back.
fn folds_alone(dir: &Path, only: Option<Vec<u32>>) -> bool {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let only = only.map(|r| r.into_iter().collect());
    let mut builder = ReportBuilder::new(only.clone());
    let mut gathered = folder::Gathered::default();
    match folder::fold_files(&files, &only, &mut builder, &mut gathered) {
        Ok(()) => true,
        Err(folder::Stop::Overlap) => false,
        Err(folder::Stop::Error(e)) => panic!("{e}"),
    }
}

fn write(dir: &Path, name: &str, cfg: &LogConfig) -> Vec<u8> {
    let mut text = Vec::new();
    write_log(cfg, &mut text).unwrap();
    std::fs::write(dir.join(name), &text).unwrap();
    text
}

/// Rank `rank`'s log of a run of 8 ranks, in one of the shapes the generator writes.
fn rank_log(rank: u32) -> LogConfig {
    LogConfig {
        world: 8,
        pp: 2,
        ranks: vec![rank],
        profiled_steps: 3,
        train_steps: 4,
        seed: u64::from(rank) + 1,
        garbage: rank.is_multiple_of(3),
        glue_per_mille: if rank == 2 { 80 } else { 0 },
        ansi: rank == 3,
        crlf: rank == 4,
        prefix: match rank {
            5 => Prefix::TorchrunRank,
            6 => Prefix::Srun,
            _ => Prefix::None,
        },
        timestamps: rank == 1,
        oom_rank: (rank == 6).then_some(6),
        cut_last_line: rank == 7,
        detail_every_step: rank == 1,
        noise: 3,
        ..LogConfig::default()
    }
}

#[test]
fn per_rank_logs_fold_alone_as_they_fold_in_order() {
    let dir = tempfile::tempdir().unwrap();
    for rank in 0..8 {
        write(dir.path(), &format!("rank{rank}.log"), &rank_log(rank));
    }
    // A rotated log (NUL bytes first), a compressed one, and a binary file beside them.
    let text = write(
        dir.path(),
        "rank8.log",
        &LogConfig {
            ranks: vec![8],
            world: 10,
            ..rank_log(8)
        },
    );
    let mut nul = vec![0u8; 5000];
    nul.extend_from_slice(&text);
    std::fs::write(dir.path().join("rank8.log"), nul).unwrap();
    let text = write(
        dir.path(),
        "rank9.log",
        &LogConfig {
            ranks: vec![9],
            world: 10,
            ..rank_log(9)
        },
    );
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&text).unwrap();
    std::fs::remove_file(dir.path().join("rank9.log")).unwrap();
    std::fs::write(dir.path().join("rank9.log.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(
        dir.path().join("snap.pickle"),
        b"\x80\x04\x95[rank=0] \x00\x01",
    )
    .unwrap();
    std::fs::write(dir.path().join("rank9z.log"), steps_and_oom()).unwrap();
    assert!(folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
    let some = ReportOptions {
        ranks: vec![1, 6, 9],
        ..ReportOptions::default()
    };
    assert!(folds_alone(dir.path(), Some(some.ranks.clone())));
    assert_same_both_ways(dir.path(), &some);
}

/// Step lines 5 to 7 and an OOM line of rank 3, as a log of their own.
fn steps_and_oom() -> String {
    let mut text = String::new();
    for step in 5..8 {
        text += &format!(
            "2026-12-01 03:11:0{step} | INFO | step 0000000{step}/00000009 | step-time 0.2 sec \
             | peak-gpu-memory {step}.50 GB\n"
        );
    }
    text + "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. \
            GPU 3 has a total capacity of 79.10 GiB of which 0.50 GiB is free.\n"
}

#[test]
fn step_and_oom_lines_of_several_logs_add_up_as_in_order() {
    // Each log's step lines its own (none repeats another's), an OOM line in two of them.
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.log",
        &LogConfig {
            oom_rank: Some(0),
            ..rank_log(0)
        },
    );
    std::fs::write(dir.path().join("b.log"), steps_and_oom()).unwrap();
    let c = LogConfig {
        train_steps: 2,
        ..rank_log(1)
    };
    write(dir.path(), "c.log", &c);
    assert!(folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
}

#[test]
fn launches_and_crashes_fold_as_in_order() {
    // A launch after a log without one goes on with its run, and ends in a traceback; the
    // next launch begins a run of its own.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.log", &rank_log(1));
    for (name, kept) in [
        ("b.log", "tests/data/crash/qwen3-tiny-dataset-too-small.log"),
        (
            "c.log",
            "tests/data/whatif/qwen3-big-pp1-s1024-mb1-instr.log",
        ),
        (
            "d.log",
            "tests/data/whatif/qwen3-big-pp1-s2048-mb1-instr.log",
        ),
    ] {
        std::fs::copy(root().join(kept), dir.path().join(name)).unwrap();
    }
    write(dir.path(), "e.log", &rank_log(2));
    assert!(folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
}

#[test]
fn a_folder_of_hundreds_of_logs_folds_alone_as_it_folds_in_order() {
    // Enough files that the workers take them in batches ([`folder::fold_files`]).
    let dir = tempfile::tempdir().unwrap();
    for rank in 0..300 {
        let cfg = LogConfig {
            world: 300,
            pp: 2,
            ranks: vec![rank],
            train_steps: 1,
            noise: 0,
            checkpoint: false,
            seed: u64::from(rank) + 1,
            garbage: rank % 50 == 7,
            oom_rank: (rank == 123).then_some(123),
            ..LogConfig::default()
        };
        write(dir.path(), &format!("rank{rank:03}.log"), &cfg);
    }
    assert!(folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
}

#[test]
fn per_node_logs_fold_alone_as_they_fold_in_order() {
    let dir = tempfile::tempdir().unwrap();
    for node in 0..3u32 {
        let cfg = LogConfig {
            world: 12,
            pp: 4,
            ranks: (node * 4..node * 4 + 4).collect(),
            profiled_steps: 2,
            seed: u64::from(node) + 7,
            glue_per_mille: 30,
            garbage: node == 1,
            prefix: Prefix::TorchrunDefault,
            oom_rank: (node == 2).then_some(9),
            ..LogConfig::default()
        };
        write(dir.path(), &format!("node{node}.log"), &cfg);
    }
    assert!(folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
}

#[test]
fn logs_that_go_on_with_one_another_s_ranks_fold_in_order() {
    // The same ranks launched again, one log per launch, and a copy of a log.
    let dir = tempfile::tempdir().unwrap();
    for launch in 0..3u64 {
        let cfg = LogConfig {
            seed: launch + 1,
            ..LogConfig::default()
        };
        write(dir.path(), &format!("launch{launch}.log"), &cfg);
    }
    std::fs::copy(
        dir.path().join("launch1.log"),
        dir.path().join("launch1.copy.log"),
    )
    .unwrap();
    assert!(!folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
    // Rank 0's log split in two: the second goes on with the first's rank.
    let dir = tempfile::tempdir().unwrap();
    let mut text = Vec::new();
    write_log(&rank_log(0), &mut text).unwrap();
    let half = text.len() / 2 + memchr::memchr(b'\n', &text[text.len() / 2..]).unwrap() + 1;
    std::fs::write(dir.path().join("a.log"), &text[..half]).unwrap();
    std::fs::write(dir.path().join("b.log"), &text[half..]).unwrap();
    write(dir.path(), "c.log", &rank_log(1));
    assert!(!folds_alone(dir.path(), None));
    assert_same_both_ways(dir.path(), &ReportOptions::default());
}

#[test]
fn the_kept_real_folders_fold_as_they_fold_in_order() {
    for dir in [
        "tests/data/whatif",
        "tests/data/e2e",
        "tests/data/e2e/defaults-pp1",
        "tests/data/pairings",
        "tests/data/pairings/snapshot-by-time",
        "tests/data/report",
        "tests/data/crash",
    ] {
        assert_same_both_ways(&root().join(dir), &ReportOptions::default());
    }
}
