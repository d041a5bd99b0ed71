//! Every scanning engine against the reference, [`LineByLine`]: over generated logs (every
//! print shape, launcher prefixes, ANSI colours, CRLF, prints glued together, NUL bytes, lines
//! over `LINE_CAP` with needles on both sides of the cut, odd step lines, cut-off last lines),
//! each engine must hand over the reference's items and counts, in both modes, and the fold of
//! its items must render the same JSON report.
//!
//! Items are compared after the normalisation the contract allows (`memprints_log::scan`):
//! consecutive step aggregates fold as one, and a stretch of prints may come rank by rank
//! (ranks fold independently), so a stretch is compared as each rank's prints in order. A
//! detail print's offset in a mapped file is not compared, its bytes are.

mod support;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use memprints_log::ReportBuilder;
use memprints_log::scan::{
    Chunked, Input, Item, LINE_CAP, LineByLine, Mode, PreRead, ScanCounts, Scanner, Serial,
    Streamed, many,
};
use memprints_log::step_and_oom::StepRun;
use memprints_present::report as render;
use proptest::prelude::*;
use support::loggen::{LogConfig, Prefix, write_log};

/// One item, owned, as the contract lets engines differ.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Line(Vec<u8>, u8),
    Steps(StepRun),
    /// A stretch of prints: each rank's, in file order.
    Prints(BTreeMap<u32, Vec<String>>),
}

#[derive(Default)]
struct Normalised(Vec<Seen>);

impl Normalised {
    fn print(&mut self, read: PreRead<'_>) {
        let (rank, text) = match read {
            PreRead::Detail(rank, bytes, _) => (rank, String::from_utf8_lossy(bytes).into_owned()),
            PreRead::Pipeline(rank, pp, point) => (rank, format!("{pp} {point:?}")),
        };
        if !matches!(self.0.last(), Some(Seen::Prints(_))) {
            self.0.push(Seen::Prints(BTreeMap::new()));
        }
        let Some(Seen::Prints(ranks)) = self.0.last_mut() else {
            unreachable!("just pushed")
        };
        ranks.entry(rank).or_default().push(text);
    }

    fn item(&mut self, item: Item<'_>) {
        match item {
            Item::Line(line, found) => self.0.push(Seen::Line(line.to_vec(), found)),
            Item::Steps(run) => match self.0.last_mut() {
                // A stretch may come in pieces; a step number that falls starts another.
                Some(Seen::Steps(prev)) if run.first.step > prev.last_step => {
                    prev.steady_peak_gpu_memory =
                        prev.steady_peak_gpu_memory.max(run.steady_peak_gpu_memory);
                    prev.lines += run.lines;
                    prev.last_step = run.last_step;
                    prev.max_steps = run.max_steps.or(prev.max_steps);
                    prev.digest = prev.digest.wrapping_add(run.digest);
                    prev.last_time = run.last_time.or(prev.last_time);
                    if run.peak_gpu_memory > prev.peak_gpu_memory {
                        prev.peak_gpu_memory = run.peak_gpu_memory;
                        prev.peak_step = run.peak_step;
                    }
                }
                _ => self.0.push(Seen::Steps(*run)),
            },
            Item::Print(read) => self.print(read),
            Item::Group(group) => {
                for read in group.prints() {
                    self.print(read);
                }
            }
        }
    }
}

/// What `scanner` hands over of `path`, normalised, and its counts.
fn items(scanner: &dyn Scanner, path: &Path, mode: Mode) -> (Vec<Seen>, ScanCounts) {
    let file = std::fs::File::open(path).unwrap();
    let mut seen = Normalised::default();
    let counts = scanner
        .scan(Input::File(&file, "t.log"), mode, &mut |item: Item<'_>| {
            seen.item(item)
        })
        .unwrap();
    (seen.0, counts)
}

/// The JSON report of `path` scanned by `scanner`.
fn report(scanner: &dyn Scanner, path: &Path, mode: Mode) -> String {
    let file = std::fs::File::open(path).unwrap();
    let mut builder = ReportBuilder::new(None);
    builder.begin_source(0);
    let counts = scanner
        .scan(Input::File(&file, "t.log"), mode, &mut builder)
        .unwrap();
    builder.count_scan(counts);
    render::json(&builder.finish(vec!["t.log".to_owned()]))
}

/// What [`many::scan_files`] kept of `path`, replayed; `None` when it took the file for binary.
fn many_items(path: &Path) -> Option<(Vec<Seen>, ScanCounts)> {
    let mut seen = Normalised::default();
    let mut counts = ScanCounts::default();
    let mut text = true;
    many::scan_files(
        &[path.to_path_buf()],
        |_, _| (),
        |_, outcome| -> Result<(), ()> {
            match outcome.unwrap() {
                Some((collected, ())) => {
                    collected.replay(|item| seen.item(item));
                    counts = collected.counts;
                }
                None => text = false,
            }
            Ok(())
        },
    )
    .unwrap();
    text.then_some((seen.0, counts))
}

fn assert_engines_agree(text: &[u8]) {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(text).unwrap();
    let path = file.path();
    let engines: [(&str, &dyn Scanner); 3] = [
        ("streamed", &Streamed),
        ("serial", &Serial),
        ("chunked", &Chunked),
    ];
    for mode in [Mode::EveryLine, Mode::FoldSteps] {
        let want = items(&LineByLine, path, mode);
        for (name, engine) in engines {
            let got = items(engine, path, mode);
            assert_eq!(got.1, want.1, "{name} {mode:?}: counts");
            assert!(got.0 == want.0, "{name} {mode:?}: items differ");
        }
        let want = report(&LineByLine, path, mode);
        for (name, engine) in engines {
            assert!(
                report(engine, path, mode) == want,
                "{name} {mode:?}: reports differ"
            );
        }
    }
    // `many` opens files itself, through `open_text`: it reads around NUL runs (a rotated log),
    // so its reference is the same text without them. A file it calls binary is left out.
    let without_nuls: Vec<u8> = text.iter().copied().filter(|&b| b != 0).collect();
    let mut clean = tempfile::NamedTempFile::new().unwrap();
    clean.write_all(&without_nuls).unwrap();
    let want = items(&LineByLine, clean.path(), Mode::FoldSteps);
    if let Some(got) = many_items(path) {
        assert!(got == want, "many: items differ");
    }
}

/// Odd lines put into a generated log.
fn odd_line(kind: u8, n: usize) -> Vec<u8> {
    let step = |n: usize| {
        format!(
            "2026-01-01 00:00:00 | INFO | step {n:08}/00004096 | step-time 0.21 sec | \
             peak-gpu-memory {}.{} GB",
            n % 70,
            n % 10
        )
    };
    match kind % 10 {
        // Needles on both sides of the cut.
        0 => {
            let mut line = b"[rank=1] early ".to_vec();
            line.resize(LINE_CAP - 3 + n % 7, b'x');
            line.extend_from_slice(b"[rank=2] late | step CUDA out of memory");
            line
        }
        1 => {
            let mut line = vec![b'n'; LINE_CAP + n % 5000];
            line[..6].copy_from_slice(b"noise ");
            line
        }
        2 => format!("[rank={}] \0\0 not a print\0", n % 4).into_bytes(),
        3 => format!("\x1b[32m{}\x1b[0m", step(n)).into_bytes(),
        4 => format!("{}\r", step(n)).into_bytes(),
        5 => b"x | step not a step line".to_vec(),
        6 => format!(
            "[rank=0 pp=0] Step4 i=0: 1.{n} GiB | alloc=1.00 cached=0.00 non-pt=1.00[rank=1]   \
             layer{n} after stage1: alloc=2.00"
        )
        .into_bytes(),
        7 => step(n).into_bytes(),
        8 => format!("[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried {n}").into_bytes(),
        _ => Vec::new(),
    }
}

fn generated(cfg: &LogConfig, odd: &[(u16, u8)], filler: usize) -> Vec<u8> {
    let mut text = Vec::new();
    write_log(cfg, &mut text).unwrap();
    let mut lines: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    for (i, &(at, kind)) in odd.iter().enumerate() {
        let at = at as usize % (lines.len() + 1);
        lines.insert(at, odd_line(kind, i));
    }
    // Long noise lines, so that some logs span several chunks of the engines.
    for i in 0..filler {
        let at = (i * 7919) % (lines.len() + 1);
        lines.insert(at, odd_line(1, i));
    }
    lines.join(&b"\n"[..])
}

fn config() -> impl Strategy<Value = LogConfig> {
    (
        (
            1u32..6,
            1u32..3,
            1u32..4,
            0u8..4,
            any::<bool>(),
            any::<bool>(),
        ),
        (
            any::<bool>(),
            0u32..200,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (any::<bool>(), 0u32..3, any::<u64>()),
    )
        .prop_map(
            |(
                (world, pp, profiled, prefix, ansi, crlf),
                (timestamps, glue, garbage, oom, cut),
                (detail_every_step, noise, seed),
            )| {
                // The generator wants whole pipelines.
                let world = world * pp;
                LogConfig {
                    world,
                    pp,
                    num_chunks: 4,
                    ranks: (0..world).collect(),
                    profiled_steps: profiled,
                    train_steps: profiled + 1,
                    prefix: [
                        Prefix::None,
                        Prefix::Srun,
                        Prefix::TorchrunRank,
                        Prefix::TorchrunDefault,
                    ][prefix as usize],
                    ansi,
                    crlf,
                    timestamps,
                    glue_per_mille: glue,
                    garbage,
                    oom_rank: oom.then_some(0),
                    cut_last_line: cut,
                    noise,
                    seed,
                    detail_every_step,
                    ..LogConfig::default()
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    #[test]
    fn every_engine_gives_the_references_items_counts_and_report(
        cfg in config(),
        odd in proptest::collection::vec((any::<u16>(), any::<u8>()), 0..24),
        filler in prop_oneof![Just(0usize), 0usize..40],
    ) {
        assert_engines_agree(&generated(&cfg, &odd, filler));
    }
}

#[test]
fn a_log_profiling_every_step_over_many_chunks_agrees() {
    // Print-dense regions (the engines group prints by rank) across many chunk edges.
    let cfg = LogConfig {
        world: 8,
        pp: 2,
        num_chunks: 8,
        profiled_steps: 150,
        train_steps: 150,
        detail_every_step: true,
        ..LogConfig::default()
    };
    let text = generated(&cfg, &[(100, 0), (5000, 6), (9000, 3)], 5);
    assert!(text.len() > 3 << 20, "{} bytes", text.len());
    assert_engines_agree(&text);
}

#[test]
fn empty_and_one_byte_inputs_agree() {
    for text in [&b""[..], b"\n", b"[", b"[rank=0] x", b"\r\n\r\n"] {
        assert_engines_agree(text);
    }
}

#[test]
fn a_step_run_cut_into_pieces_agrees() {
    // Found by CI's proptest run: a step-0 line among the step lines, prints glued, garbage and
    // long noise lines: an engine hands the run over in two pieces, whose digests and last dates
    // fold as one run's.
    let cfg = LogConfig {
        world: 5,
        pp: 1,
        num_chunks: 4,
        ranks: (0..5).collect(),
        profiled_steps: 1,
        train_steps: 2,
        glue_per_mille: 143,
        garbage: true,
        checkpoint: true,
        noise: 1,
        seed: 2706984809681468340,
        ..LogConfig::default()
    };
    assert_engines_agree(&generated(&cfg, &[(21, 217)], 32));
}
