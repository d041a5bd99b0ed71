//! The fast paths of `report` against the plain reading of a log: every physical line that
//! holds a needle (found in its raw bytes, with `memmem`) fed to [`ReportBuilder::line_with`]
//! one by one, file by file. Step lines folded on the scanning thread,
//! lines cut at 64 KiB, files read in parallel: the report must come out byte for byte the same
//! (or, for the cap, say what it cut).

mod support;

use std::path::{Path, PathBuf};

use memprints_log::scan::{LINE_CAP, NEEDLES, inputs};
use memprints_log::{ReportBuilder, ReportOptions, joined, run_report};
use memprints_present::report as render;

/// Feeds `line` to `builder` as the scanner's contract says: cut to [`LINE_CAP`], and only
/// when its raw bytes hold a needle.
fn feed(builder: &mut ReportBuilder, line: &[u8]) {
    builder.count_lines(1);
    let line = &line[..line.len().min(LINE_CAP)];
    let found = (0..NEEDLES.len())
        .filter(|&k| memchr::memmem::find(line, NEEDLES[k]).is_some())
        .fold(0, |set, k| set | 1 << k);
    if found != 0 {
        builder.line_with(line, found);
    }
}
use support::loggen::{LogConfig, Prefix, write_log};
use support::root;

/// The report of `files` with every line fed to the builder as it is.
fn line_by_line(files: &[PathBuf]) -> String {
    let mut builder = ReportBuilder::new(None);
    let mut names = Vec::new();
    for (i, file) in files.iter().enumerate() {
        let bytes = std::fs::read(file).unwrap();
        if files.len() > 1 {
            // Of several files, one that logs PithTrain's launch line near its start begins
            // a run of its own (`report::runs`).
            let head = &bytes[..bytes.len().min(inputs::LAUNCH_HEAD_BYTES)];
            let launches = memchr::memmem::find(head, inputs::LAUNCH_NEEDLE).is_some();
            builder.begin_source_launching(i, launches);
        } else {
            builder.begin_source(i);
        }
        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        if lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        for line in lines {
            feed(&mut builder, line);
        }
        names.push(file.display().to_string());
    }
    let mut report = builder.finish(names);
    memprints_log::headroom::attach(&mut report, None);
    joined::attach_snapshots(&mut report, &[]);
    memprints_log::owners::attach(&mut report);
    memprints_log::whatif::attach(&mut report, &[], None);
    render::json(&report)
}

fn fast(inputs: &[PathBuf]) -> String {
    render::json(&run_report(inputs, &ReportOptions::default()).unwrap())
}

fn assert_same(files: &[PathBuf]) {
    let (want, got) = (line_by_line(files), fast(files));
    if want != got && std::env::var_os("REPORT_SCAN_DUMP").is_some() {
        std::fs::write("/tmp/logspeed/want.json", &want).unwrap();
        std::fs::write("/tmp/logspeed/got.json", &got).unwrap();
    }
    assert!(
        want == got,
        "the fast report of {files:?} differs from the line-by-line one"
    );
}

fn kept_logs() -> Vec<PathBuf> {
    let mut logs = Vec::new();
    for dir in ["tests/data/e2e", "tests/data/e2e/defaults-pp1"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        found.sort();
        logs.extend(found);
    }
    assert!(logs.len() >= 10, "{logs:?}");
    logs
}

#[test]
fn every_kept_real_log_reports_the_same_read_fast() {
    for log in kept_logs() {
        assert_same(std::slice::from_ref(&log));
    }
    // And all of them as one stream of runs, in order.
    assert_same(&kept_logs());
}

fn write(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn generated_logs_with_long_runs_of_step_lines_report_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let base = LogConfig {
        world: 8,
        pp: 4,
        num_chunks: 8,
        profiled_steps: 2,
        train_steps: 30_000,
        noise: 2,
        ..LogConfig::default()
    };
    let configs = [
        base.clone(),
        LogConfig {
            crlf: true,
            timestamps: true,
            prefix: Prefix::TorchrunRank,
            ..base.clone()
        },
        LogConfig {
            ansi: true,
            glue_per_mille: 30,
            garbage: true,
            prefix: Prefix::Srun,
            ..base.clone()
        },
    ];
    for (n, cfg) in configs.iter().enumerate() {
        let mut text = Vec::new();
        write_log(cfg, &mut text).unwrap();
        assert!(text.len() > 3 << 20, "several chunks: {}", text.len());
        let path = write(dir.path(), &format!("g{n}.log"), &text);
        assert_same(&[path]);
    }
}

/// Step lines of every shape the fast path must leave to the slow one or read as it does,
/// across chunk ends, between prints of two launches.
#[test]
fn odd_step_lines_between_prints_and_launches_report_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let shapes = [
        "2026-12-01 20:18:18 | INFO | step {N}/00099999 | step-time 0.{N} sec | cross-entropy-loss 8.3 | peak-gpu-memory 0.{P} GB",
        "\x1b[32m2026-12-01 20:18:18 | INFO | step {N}/00099999 | peak-gpu-memory 0.{P} GB\x1b[0m",
        "2026-12-01 20:18:18 | INFO | step {N}/00099999 | tokens-per-second 1 µs | peak-gpu-memory 0.{P} GB",
        "2026-12-01 20:18:18 | INFO | step {N}/00099999 | peak-gpu-memory 0.{P} GB\r",
        "a | step over {N}",
        "x | step {N} | peak-gpu-memory broken GB",
        "x | step {N} | step-time fast | peak-gpu-memory 1{P} GB | step-time 3 sec",
        "[rank=0] CUDA out of memory | step {N}/5",
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB | step {N}",
        "plain noise {N} with = and | bars",
    ];
    let launch = |rank: u32| {
        format!(
            "[rank={rank}] init_process_group | cuda_ctx=0.52 after_nccl_world=1.10 nccl_world_cost=0.58\n\
             [rank={rank}] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=1.40\n\
             [rank={rank} pp=0] Before pipeline: 1.00 GiB | alloc=1.00 cached=1.00 non-pt=2.00\n"
        )
    };
    let mut text = String::new();
    for n in 0..120_000u64 {
        if n % 40_000 == 0 {
            text += &launch(0);
            text += &launch(1);
        }
        let shape = shapes[(n * 7 % 97 % shapes.len() as u64) as usize];
        text += &shape
            .replace("{N}", &format!("{:08}", n + 1))
            .replace("{P}", &format!("{}", n * 31 % 89));
        text.push('\n');
    }
    assert!(text.len() > 8 << 20, "{}", text.len());
    let path = write(dir.path(), "odd.log", text.as_bytes());
    assert_same(&[path]);
}

#[test]
fn a_folder_of_per_rank_logs_reports_the_same_as_its_files_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for rank in 0..24u32 {
        let cfg = LogConfig {
            world: 24,
            pp: 4,
            num_chunks: 8,
            ranks: vec![rank],
            profiled_steps: 1,
            train_steps: if rank == 0 { 5_000 } else { 3 },
            noise: 1,
            seed: u64::from(rank) + 1,
            ..LogConfig::default()
        };
        let mut text = Vec::new();
        write_log(&cfg, &mut text).unwrap();
        files.push(write(dir.path(), &format!("rank{rank:04}.log"), &text));
    }
    // A relaunch in the folder: the first rank's log again, later in name order, its steps
    // timed anew (a byte-for-byte copy would repeat the run: issue 22, item 6 b).
    let again = std::fs::read_to_string(&files[0]).unwrap();
    let again = again.replace("step-time 1.234 sec", "step-time 1.250 sec");
    files.push(write(dir.path(), "rank9999-relaunch.log", again.as_bytes()));
    let want = line_by_line(&files);
    let got = fast(&[dir.path().to_path_buf()]);
    assert!(want == got, "the folder's report differs");
    let report: serde_json::Value = serde_json::from_str(&got).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "the relaunch is a second run");
    assert_eq!(runs[0]["ranks"].as_array().unwrap().len(), 24);
    // Rank 0 logs 5,000 step lines; the generator writes the same 3 into every other rank's
    // log too, which count once: the other 22 files repeat them.
    assert_eq!(runs[0]["training"]["steps_logged"], 5_000 + 3);
    assert_eq!(report["repeated"].as_array().unwrap().len(), 22);
    assert_eq!(runs[1]["training"]["steps_logged"], 5_000);
}

#[test]
fn two_hundred_megabyte_print_lines_are_cut_and_noted() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.log");
    support::write_two_hundred_megabyte_print_lines(&path);
    let report = run_report(&[path], &ReportOptions::default()).unwrap();
    let s = &report.stats;
    assert_eq!((s.lines_read, s.memory_lines), (3, 3));
    assert_eq!((s.long_lines, s.unparsed_memory_lines), (2, 2));
    let line_len =
        "[rank=0] setup_model | a: alloc=1.".len() + (100 << 20) + " cached=0.00 non-pt=1.00".len();
    assert_eq!(s.cut_bytes, 2 * (line_len as u64 - 65536));
    let json = render::json(&report);
    assert!(json.contains("\"long_lines\": 2"), "noted in the JSON");
    let text = render::render(&report, render::Format::Text, false);
    assert!(
        text.contains("2 lines were longer than 64 KiB"),
        "noted in the text: {text}"
    );
    // Reports without a long line keep the JSON they had.
    let short = write(dir.path(), "short.log", b"[rank=0] x\n");
    let plain = render::json(&run_report(&[short], &ReportOptions::default()).unwrap());
    assert!(!plain.contains("long_lines") && !plain.contains("cut_bytes"));
}

/// Inputs the `report_log` fuzz target found crashing (`tests/data/fuzz/report_log/`, named
/// after what they found), checked as the target checks any bytes (binary ones included, which
/// `run_report` would skip): scanned, they report without a panic, the same as line by line,
/// in every format.
#[test]
fn fuzz_crash_inputs_report_without_a_panic() {
    use memprints_log::scan::{Mode, lines};
    let dir = root().join("tests/data/fuzz/report_log");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty());
    for input in inputs {
        let data = std::fs::read(&input).unwrap();
        let mut fast = ReportBuilder::new(None);
        let counts = lines::scan(&data[..], Mode::FoldSteps, |item| fast.item(item)).unwrap();
        fast.count_scan(counts);
        let fast = fast.finish(vec!["fuzz.log".to_owned()]);
        let mut plain = ReportBuilder::new(None);
        let mut parts: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
        if parts.last().is_some_and(|p| p.is_empty()) {
            parts.pop();
        }
        for line in parts {
            feed(&mut plain, line);
        }
        let plain = plain.finish(vec!["fuzz.log".to_owned()]);
        assert_eq!(render::json(&fast), render::json(&plain), "{input:?}");
        for format in [
            render::Format::Text,
            render::Format::Markdown,
            render::Format::Html,
        ] {
            render::render(&fast, format, false);
        }
    }
}

/// Memory profiling left on at every step, in a log big enough to be read mapped, by chunks
/// on all cores (`report::chunked`): detail prints are deferred by their place in the map and
/// read again only for the passes kept in detail, and the report is the line-by-line one.
#[test]
fn a_log_profiling_every_step_reads_the_same_mapped_and_keeps_three_passes_in_detail() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        world: 16,
        pp: 4,
        num_chunks: 8,
        profiled_steps: 700,
        train_steps: 700,
        noise: 1,
        garbage: true,
        detail_every_step: true,
        ..LogConfig::default()
    };
    let mut text = Vec::new();
    write_log(&cfg, &mut text).unwrap();
    let min = memprints_log::scan::chunked::MIN_SIZE as usize;
    assert!(text.len() > min, "read mapped: {} bytes", text.len());
    let path = write(dir.path(), "every-step.log", &text);
    assert_same(std::slice::from_ref(&path));
    // Prints behind launcher prefixes, with colour, run together, CRLF: the walk's shapes
    // other than one plain print at the line start.
    for (n, odd) in [
        LogConfig {
            ansi: true,
            glue_per_mille: 30,
            prefix: Prefix::Srun,
            ..cfg.clone()
        },
        LogConfig {
            crlf: true,
            timestamps: true,
            prefix: Prefix::TorchrunRank,
            ..cfg.clone()
        },
    ]
    .iter()
    .enumerate()
    {
        let mut text = Vec::new();
        write_log(odd, &mut text).unwrap();
        assert!(text.len() > min, "read mapped: {} bytes", text.len());
        assert_same(&[write(dir.path(), &format!("odd{n}.log"), &text)]);
    }
    let report = run_report(&[path], &ReportOptions::default()).unwrap();
    let run = &report.runs[0];
    assert!(report.stats.detail_prints_not_read > 0);
    for rank in &run.ranks {
        assert!(
            rank.passes.len() > 600,
            "rank {}: {}",
            rank.rank,
            rank.passes.len()
        );
        let detail: Vec<u32> = rank
            .passes
            .iter()
            .filter(|p| p.detail)
            .map(|p| p.pass)
            .collect();
        assert!(
            (1..=3).contains(&detail.len()),
            "rank {}: {detail:?}",
            rank.rank
        );
        assert_eq!(detail.first(), Some(&0));
        assert_eq!(detail.last(), rank.passes.last().map(|p| p.pass).as_ref());
        // The peak is the highest of every pass, and its pass is kept.
        let highest = rank.passes.iter().filter_map(|p| p.peak_allocated).max();
        let peak = rank.peak.as_ref().unwrap();
        assert_eq!(Some(peak.allocated), highest);
        assert!(detail.contains(&rank.pipeline[peak.index].pass));
    }
}

/// `clean` with NUL runs put in: a rotation's at its start (when `rotated`), one between two
/// lines half-way and a preallocation's at its end.
fn with_nul_runs(clean: &[u8], rotated: bool) -> Vec<u8> {
    let half = clean.len() / 2;
    let cut = half + memchr::memchr(b'\n', &clean[half..]).unwrap() + 1;
    let mut out = vec![0u8; if rotated { 1_258_291 } else { 0 }];
    out.extend_from_slice(&clean[..cut]);
    out.extend_from_slice(&[0; 100]);
    out.extend_from_slice(&clean[cut..]);
    out.extend_from_slice(&[0; 5000]);
    out
}

/// A log rotated by `copytruncate` or preallocated reads as the log without its NUL runs, on
/// every path: a big file (mapped when its start is clean), a small one, several at once.
#[test]
fn logs_with_nul_runs_report_as_the_same_logs_without_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut big = Vec::new();
    write_log(
        &LogConfig {
            world: 8,
            pp: 4,
            num_chunks: 8,
            profiled_steps: 2,
            train_steps: 160_000,
            noise: 2,
            ..LogConfig::default()
        },
        &mut big,
    )
    .unwrap();
    assert!(big.len() as u64 > 16 << 20, "read by chunks: {}", big.len());
    let kept = kept_logs();
    let smalls: Vec<Vec<u8>> = kept[..2]
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .collect();
    let cases: Vec<Vec<(&[u8], bool)>> = vec![
        vec![(&big, false)],
        vec![(&big, true)],
        vec![(&smalls[0], true)],
        vec![(&smalls[0], true), (&smalls[1], false)],
    ];
    for (n, case) in cases.iter().enumerate() {
        let files: Vec<PathBuf> = (0..case.len())
            .map(|i| dir.path().join(format!("c{n}_{i}.log")))
            .collect();
        for (path, (clean, _)) in files.iter().zip(case) {
            std::fs::write(path, clean).unwrap();
        }
        let want = line_by_line(&files);
        for (path, (clean, rotated)) in files.iter().zip(case) {
            std::fs::write(path, with_nul_runs(clean, *rotated)).unwrap();
        }
        assert!(
            want == fast(&files),
            "case {n}: the report of {files:?} with NUL runs differs from the one without"
        );
    }
}
