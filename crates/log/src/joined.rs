//! One view of a run's memory: the step-0 prints' peak, PithTrain's own per-step
//! `peak-gpu-memory`, and the step-0 memory snapshots, side by side.
//!
//! What each sees: the prints sample `torch.cuda.memory_allocated()` at fixed points of the
//! pipeline schedule of the first step; PithTrain's step line reports
//! `torch.cuda.max_memory_allocated()` over its whole `train_step` (pipeline, gradient clipping,
//! optimizer step), the highest of all ranks; the snapshot records every allocation of the first
//! `model.step()` (the pipeline only). So the snapshot's peak minus the prints' is what was
//! allocated and freed again between two prints, and the step line's peak minus the prints' is
//! that plus what the optimizer step needed.
//!
//! Contract:
//! - [`prints_and_steps`] reads only the run (no I/O).
//! - [`attach_snapshots`] finds each snapshot a rank printed (`Memory snapshot saved to PATH`):
//!   PATH as printed, then PATH under the printing log's folder when it is relative, then a
//!   file of PATH's name in the log's folder; each also with `.gz` or `.zst` appended. Files
//!   given with `--snapshots` (directories expand to their pickles) replace a printed one of
//!   the same name (compression suffix aside); one matching no printed name fills the one
//!   printed snapshot not found of the same rank and step (`rank(\d+)`, `step(\d+)` in the
//!   names), else joins the run when there is only one. Then time decides (issue 22, item 6 c):
//!   a snapshot whose trace has times belongs to the run whose time span — from the start of its
//!   first logged step (the step line's date less its `step-time`) to its last step line, a
//!   second of slack at either end, on to the start of the report's next run for a run that
//!   crashed (not when that run has no span; for ever when it is the last) — holds all its
//!   events. The log's dates are read both in this machine's time zone (`TZ`) and in UTC: a run
//!   that found the file by name keeps it when its span holds it in either reading, or when the
//!   logs give it no span; else it loses it and says whose it is (or that no run's span holds
//!   it) when one run holds it (the same run in both readings, or the only one in the one
//!   reading where any does), and that run gets it, in place of a printed snapshot of its own
//!   that was not found. A file several runs' spans hold stays where its name put it. Where the
//!   snapshot or the run gives no time, the name decides as before, and the view says it was by
//!   name (`paired_by`, `pairing`). A given file no run can be told for is listed as skipped,
//!   with why. When several runs still claim the same file, it is the last one's (a later run
//!   overwrites an earlier one's file); the others say so. Snapshots are read through
//!   [`memprints_snapshot::load`]; one that cannot be read keeps its error and the rest of the
//!   report is unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::schema::{
    HeldBy, MemoryView, PairedBy, PrintsPeak, Report, Run, SkippedInput, SnapshotOwner,
    SnapshotView, StepsView,
};
use super::step_and_oom;

/// Stack groups kept per snapshot.
const TOP_STACKS: usize = 5;

/// The prints' peak and the step lines beside it; `snapshots` left empty.
pub fn prints_and_steps(run: &Run) -> MemoryView {
    let prints_peak = run.summary.peak_rank.and_then(|rank| {
        let p = run.summary.peaks.iter().find(|p| p.rank == rank)?;
        Some(PrintsPeak {
            rank,
            pp: p.pp,
            label: p.label.clone(),
            allocated: p.allocated,
        })
    });
    let steps = run.training.as_ref().map(|t| {
        let profiled = t.first_step_peak_gpu_memory;
        StepsView {
            profiled_step: t.first_step,
            profiled_step_peak: profiled,
            unseen_by_prints: profiled
                .zip(prints_peak.as_ref())
                .map(|(s, p)| s - p.allocated),
            peak_step: t.peak_step,
            peak: t.peak_gpu_memory,
            later_steps_above: t.peak_gpu_memory.zip(profiled).map(|(p, f)| p - f),
        }
    });
    MemoryView {
        prints_peak,
        steps,
        snapshots: Vec::new(),
    }
}

/// A snapshot to read for a run: which run, which rank, what the log printed.
struct Wanted {
    run: usize,
    rank: Option<u32>,
    printed: Option<String>,
    after_oom: bool,
    found: Option<PathBuf>,
    error: Option<String>,
    /// How `found` was paired with the run, and why ([`pair_by_time`]).
    paired: Option<(PairedBy, String)>,
}

/// A given snapshot file that no printed name claims, in a report of other than one run: its
/// run is told by time, if at all ([`pair_by_time`]).
struct Unclaimed {
    path: PathBuf,
    /// Why it is skipped, when that is known: it cannot be read (known before the pairing), or
    /// its events fall in several runs' spans ([`pair_by_time`]).
    error: Option<String>,
}

/// Seconds of slack at either end of a run's time span: the log's dates are cut to the second.
const SLACK_S: i64 = 1;

/// Which runs' time spans hold a snapshot's events ([`pair_by_time`]).
#[derive(Clone, Copy)]
enum Held {
    /// No run's, under either reading of the dates.
    None,
    /// One run's, with its span: the same run under both readings, or the only one under the
    /// one reading where any does.
    One((usize, Span)),
    /// Several runs', none of them told.
    Several,
}

/// A run's time span in seconds since the epoch, and the log's clock minus the epoch's.
#[derive(Debug, Clone, Copy)]
struct Span {
    start: i64,
    end: i64,
    offset: i64,
}

/// The time spans of `runs` ([`span_of`]); a run that ended in an exception runs on until the
/// next run of the report starts (its OOM snapshot is written after its last step line), or
/// for ever when it is the last; not when that next run has no span (its start is not known).
fn spans(runs: &[Run], local: bool) -> Vec<Option<Span>> {
    let mut spans: Vec<Option<Span>> = runs.iter().map(|r| span_of(r, local)).collect();
    for n in 0..spans.len() {
        if runs[n].crash.is_none() {
            continue;
        }
        let next = match spans.get(n + 1) {
            None => Some(i64::MAX),
            Some(next) => next.map(|s| s.start),
        };
        if let (Some(span), Some(next)) = (spans[n].as_mut(), next) {
            span.end = span.end.max(next);
        }
    }
    spans
}

/// From the start of the run's first logged step (its date less its `step-time`) to its last
/// step line, each end widened by [`SLACK_S`]; the log's dates are read in the local time zone
/// (`TZ`) when `local`, as Python's logging writes them on the machine that ran the training,
/// else as UTC.
fn span_of(run: &Run, local: bool) -> Option<Span> {
    let t = run.training.as_ref()?;
    let first = t.first_time?;
    let last = t.last_time.unwrap_or(first).max(first);
    let offset = if local {
        first - local_to_epoch(first)?
    } else {
        0
    };
    let took = t.first_step_time_s.filter(|s| s.is_finite()).unwrap_or(0.0);
    let took = took.clamp(0.0, 1e9).ceil() as i64;
    Some(Span {
        start: first - offset - took - SLACK_S,
        end: last - offset + 1 + SLACK_S,
        offset,
    })
}

/// A date of the local clock (seconds since 1970-01-01 00:00:00 of that clock) as seconds since
/// the epoch.
fn local_to_epoch(local: i64) -> Option<i64> {
    let t = libc::time_t::try_from(local).ok()?;
    // SAFETY: `tm` is plain data, written by gmtime_r and read by mktime; both take valid
    // pointers to locals.
    let epoch = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::gmtime_r(&t, &mut tm).is_null() {
            return None;
        }
        tm.tm_isdst = -1;
        libc::mktime(&mut tm)
    };
    // `time_t` is `i64` on the targets built (x86_64, aarch64), not everywhere.
    #[allow(clippy::useless_conversion)]
    let epoch = i64::from(epoch);
    (epoch != -1).then_some(epoch)
}

/// The span of a snapshot's events in seconds since the epoch (`None` when its trace has no
/// times).
fn events_of(s: &memprints_snapshot::SnapshotReport) -> Option<(i64, i64)> {
    let d = s.primary();
    let (from, to) = (d.trace_start_us?, d.trace_end_us?);
    (from > 0).then(|| (from.div_euclid(1_000_000), to.div_euclid(1_000_000)))
}

/// A run's span as the log's dates give it: from its first step's start to its last step line.
fn span_text(span: Span) -> String {
    if span.end == i64::MAX {
        return format!(
            "from {} on",
            step_and_oom::format_time(span.start + SLACK_S + span.offset)
        );
    }
    between(span.start + SLACK_S, span.end - SLACK_S - 1, span.offset)
}

/// `from` to `to` (seconds since the epoch) on the log's clock.
fn between(from: i64, to: i64, offset: i64) -> String {
    let (a, b) = (
        step_and_oom::format_time(from + offset),
        step_and_oom::format_time(to + offset),
    );
    match (a.split_once(' '), b.split_once(' ')) {
        (Some((day, _)), Some((same, time))) if day == same => format!("{a} to {time}"),
        _ => format!("{a} to {b}"),
    }
}

/// Finds, reads and sets beside the prints every snapshot of every run (see the module doc).
pub fn attach_snapshots(report: &mut Report, given: &[PathBuf]) {
    attach_snapshots_within(report, given, None);
}

/// [`attach_snapshots`], reading each snapshot within `max_memory` bytes (`--max-memory`); when
/// none is given, within the default budget and each file's size cap.
pub fn attach_snapshots_within(report: &mut Report, given: &[PathBuf], max_memory: Option<u64>) {
    let options = memprints_snapshot::LoadOptions {
        progress: true,
        max_memory: max_memory.unwrap_or(memprints_snapshot::budget::DEFAULT_MAX_MEMORY),
        size_cap: max_memory.is_none(),
        keep_stacks: Some(TOP_STACKS),
        ..memprints_snapshot::LoadOptions::default()
    };
    let mut wanted = printed_snapshots(report);
    let given = match memprints_snapshot::expand_inputs(given) {
        Ok(files) => files,
        Err(err) => {
            report.skipped.push(SkippedInput {
                path: given_names(given),
                reason: format!("cannot list the snapshots given: {err}"),
            });
            Vec::new()
        }
    };
    // The printed snapshots by name, and by the rank and step in their names.
    let mut by_name: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut by_rank_and_step: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
    for (n, w) in wanted.iter().enumerate() {
        let Some(printed) = w.printed.as_deref() else {
            continue;
        };
        let name = bare_name(Path::new(printed));
        if let (Some(rank), Some(step)) = (w.rank, number_after(&name, "step")) {
            by_rank_and_step.entry((rank, step)).or_default().push(n);
        }
        by_name.entry(name).or_default().push(n);
    }
    let mut unclaimed = Vec::new();
    for file in given {
        let name = bare_name(&file);
        if let Some(matching) = by_name.get(&name) {
            for &n in matching {
                wanted[n].found = Some(file.clone());
                wanted[n].error = None;
            }
        } else if let Some(n) =
            the_missing_one_of_its_rank_and_step(&wanted, &by_rank_and_step, &file)
        {
            wanted[n].found = Some(file);
            wanted[n].error = None;
        } else if report.runs.len() == 1 {
            wanted.push(Wanted {
                run: 0,
                rank: memprints_snapshot::rank_of(&file),
                printed: None,
                after_oom: false,
                found: Some(file),
                error: None,
                paired: None,
            });
        } else {
            unclaimed.push(Unclaimed {
                path: file,
                error: None,
            });
        }
    }
    let mut loaded: BTreeMap<PathBuf, Result<memprints_snapshot::SnapshotReport, String>> =
        BTreeMap::new();
    let to_load = wanted.iter().filter_map(|w| w.found.as_ref());
    for path in to_load.chain(unclaimed.iter().map(|u| &u.path)) {
        loaded.entry(path.clone()).or_insert_with(|| {
            memprints_snapshot::load_with(path, options).map_err(|e| e.to_string())
        });
    }
    // A file no name claimed that cannot be read is skipped with the reason it was not read.
    for u in &mut unclaimed {
        if let Err(e) = &loaded[&u.path] {
            u.error = Some(format!("not read: {e}"));
        }
    }
    let (local, utc) = (spans(&report.runs, true), spans(&report.runs, false));
    let times = times_of(&loaded);
    pair_by_time(report, &mut wanted, unclaimed, &times, &local, &utc);
    claim_by_the_last_run(&mut wanted);
    // Each run's first report of each rank: a run of thousands of ranks names as many
    // snapshots, and looking each rank up along the ranks cost milliseconds.
    let first_of_rank: Vec<BTreeMap<u32, usize>> = report
        .runs
        .iter()
        .map(|run| {
            let mut first = BTreeMap::new();
            for (i, r) in run.ranks.iter().enumerate() {
                first.entry(r.rank).or_insert(i);
            }
            first
        })
        .collect();
    for w in wanted {
        let run = &mut report.runs[w.run];
        let prints_peak = w.rank.and_then(|rank| {
            first_of_rank[w.run]
                .get(&rank)
                .and_then(|&i| run.ranks[i].peak.as_ref())
                .map(|p| p.allocated)
        });
        let mut view = SnapshotView {
            rank: w.rank,
            printed_path: w.printed,
            after_oom: w.after_oom,
            path: w.found.as_ref().map(|p| p.display().to_string()),
            error: w.error,
            peak_allocated: None,
            allocated_at_end: None,
            freed_after_peak: None,
            gap_to_prints: None,
            prints_peak,
            top_stacks: Vec::new(),
            peak_reserved: None,
            owners: Vec::new(),
            paired_by: None,
            pairing: None,
        };
        if let Some(path) = &w.found {
            match &loaded[path] {
                Ok(s) => {
                    fill(&mut view, s);
                    let (by, why) = w.paired.unwrap_or_else(|| {
                        (
                            PairedBy::Name,
                            "paired by name: its trace holds no times to go by".to_owned(),
                        )
                    });
                    view.paired_by = Some(by);
                    view.pairing = Some(why);
                }
                Err(e) => view.error = Some(format!("not read: {e}")),
            }
        }
        run.memory.snapshots.push(view);
    }
}

/// Each snapshot a rank of a run printed, with the file found for it (or why none was).
fn printed_snapshots(report: &Report) -> Vec<Wanted> {
    let mut out = Vec::new();
    let printed: Vec<(&Path, &Path)> = report
        .runs
        .iter()
        .flat_map(|run| &run.ranks)
        .flat_map(|rank| &rank.snapshots)
        .map(|s| (Path::new(&s.path), Path::new(&report.inputs[s.source])))
        .collect();
    let mut located = locate_all(&printed).into_iter();
    for (n, run) in report.runs.iter().enumerate() {
        for rank in &run.ranks {
            for s in &rank.snapshots {
                let log = Path::new(&report.inputs[s.source]);
                let found = located.next().expect("one place per snapshot");
                let error = found.is_none().then(|| {
                    format!(
                        "not found: neither {} nor a file of its name beside {} (pass it with \
                         --snapshots)",
                        s.path,
                        log.display()
                    )
                });
                out.push(Wanted {
                    run: n,
                    rank: Some(rank.rank),
                    printed: Some(s.path.clone()),
                    after_oom: s.after_oom,
                    found,
                    error,
                    paired: None,
                });
            }
        }
    }
    out
}

/// The one printed snapshot that was not found whose rank and step are those in `file`'s name
/// (a kept `run-rank0-step0.pickle.gz` for a printed `memory_snapshot_rank0_step0.pickle`);
/// `None` when the name lacks either or several printed ones would fit.
fn the_missing_one_of_its_rank_and_step(
    wanted: &[Wanted],
    by_rank_and_step: &BTreeMap<(u32, u32), Vec<usize>>,
    file: &Path,
) -> Option<usize> {
    let rank = memprints_snapshot::rank_of(file)?;
    let step = number_after(&bare_name(file), "step")?;
    let mut fits = by_rank_and_step
        .get(&(rank, step))?
        .iter()
        .copied()
        .filter(|&n| wanted[n].found.is_none());
    let first = fits.next()?;
    fits.next().is_none().then_some(first)
}

/// The number right after the first `word` followed by a digit in `name`.
fn number_after(name: &str, word: &str) -> Option<u32> {
    name.match_indices(word).find_map(|(i, _)| {
        let digits: String = name[i + word.len()..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// What [`pair_by_time`] needs of a snapshot that was read: the span of its events in seconds
/// since the epoch ([`events_of`]) and its rank.
#[derive(Debug, Clone, Copy)]
struct Times {
    from: i64,
    to: i64,
    rank: Option<u32>,
}

/// The [`Times`] of each snapshot read whose trace has times.
fn times_of(
    loaded: &BTreeMap<PathBuf, Result<memprints_snapshot::SnapshotReport, String>>,
) -> BTreeMap<PathBuf, Times> {
    loaded
        .iter()
        .filter_map(|(path, snapshot)| {
            let snapshot = snapshot.as_ref().ok()?;
            let (from, to) = events_of(snapshot)?;
            let rank = snapshot.rank.or_else(|| memprints_snapshot::rank_of(path));
            Some((path.clone(), Times { from, to, rank }))
        })
        .collect()
}

/// The printed snapshots not found, by run and rank, and by run alone (rank `None`).
#[derive(Default)]
struct Missing(BTreeMap<(usize, Option<u32>), BTreeSet<usize>>);

impl Missing {
    fn insert(&mut self, n: usize, w: &Wanted) {
        if w.found.is_none() && w.printed.is_some() {
            self.0.entry((w.run, w.rank)).or_default().insert(n);
            self.0.entry((w.run, None)).or_default().insert(n);
        }
    }

    fn remove(&mut self, n: usize, w: &Wanted) {
        for key in [(w.run, w.rank), (w.run, None)] {
            if let Some(set) = self.0.get_mut(&key) {
                set.remove(&n);
            }
        }
    }

    /// The first printed snapshot of `run` not found, of `rank` unless that is `None`.
    fn first(&self, run: usize, rank: Option<u32>) -> Option<usize> {
        self.0.get(&(run, rank))?.first().copied()
    }
}

/// Sets each snapshot file beside the run whose time span holds its events ([`span_of`]), the
/// log's dates read in this machine's time zone (`local`) and in UTC (`utc`): a run that found
/// it by name keeps it when either reading's span holds it, or when the logs give it no span;
/// else it loses it (saying whose it is) when one run holds it — the same run under both
/// readings, or the only one under the one reading where any does — and that run gets it when
/// it did not find it. A file no run's span holds is set beside none of the runs that have a
/// span (saying so); one several runs' spans hold stays where its name put it. A file whose
/// trace has no times stays where its name put it. A given file that is still without a run is
/// listed as skipped.
fn pair_by_time(
    report: &mut Report,
    wanted: &mut Vec<Wanted>,
    mut unclaimed: Vec<Unclaimed>,
    times: &BTreeMap<PathBuf, Times>,
    local: &[Option<Span>],
    utc: &[Option<Span>],
) {
    let span = |spans: &[Option<Span>], run: usize| spans.get(run).copied().flatten();
    let mut by_path: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    let mut missing = Missing::default();
    for (n, w) in wanted.iter().enumerate() {
        match &w.found {
            Some(path) => by_path.entry(path.clone()).or_default().push(n),
            None => missing.insert(n, w),
        }
    }
    let mut unclaimed_at: BTreeMap<PathBuf, Vec<usize>> = BTreeMap::new();
    for (n, u) in unclaimed.iter().enumerate() {
        unclaimed_at.entry(u.path.clone()).or_default().push(n);
    }
    // The files that a run kept or got by time.
    let mut attached: BTreeSet<PathBuf> = BTreeSet::new();
    let mut added = Vec::new();
    for (path, &Times { from, to, rank }) in times {
        // The runs whose span holds the file's events, under each reading of the dates.
        let holding = |spans: &[Option<Span>]| -> Vec<(usize, Span)> {
            let holds = |s: &Span| s.start <= from && to <= s.end;
            (spans.iter().enumerate())
                .filter_map(|(n, s)| s.filter(holds).map(|s| (n, s)))
                .collect()
        };
        let (in_local, in_utc) = (holding(local), holding(utc));
        let held = match (&in_local[..], &in_utc[..]) {
            ([], []) => Held::None,
            ([a], [b]) if a.0 == b.0 => Held::One(*a),
            ([a], []) | ([], [a]) => Held::One(*a),
            _ => Held::Several,
        };
        // `run`'s span, under a reading where it holds the file (this machine's zone first).
        let holds = |run: usize| {
            (in_local.iter().chain(&in_utc))
                .find(|(n, _)| *n == run)
                .map(|&(_, s)| s)
        };
        let several = || {
            let mut runs: Vec<usize> = in_local.iter().chain(&in_utc).map(|h| h.0).collect();
            runs.sort_unstable();
            runs.dedup();
            let names: Vec<&str> = runs.iter().map(|&n| report.runs[n].name.as_str()).collect();
            names.join(", ")
        };
        if let Held::Several = held {
            for &n in unclaimed_at.get(path).map_or(&[][..], Vec::as_slice) {
                unclaimed[n].error = Some(untold(&format!(
                    "its events fall in the time spans of several runs ({})",
                    several()
                )));
            }
        }
        let mut kept = false;
        for &n in by_path.get(path).map_or(&[][..], Vec::as_slice) {
            let w = &mut wanted[n];
            // A run the logs give no time span keeps what its name found.
            let Some(own) = span(local, w.run).or_else(|| span(utc, w.run)) else {
                kept = true;
                w.paired = Some((
                    PairedBy::Name,
                    "paired by name: the logs give this run no time span".to_owned(),
                ));
                continue;
            };
            if let Some(s) = holds(w.run) {
                kept = true;
                w.paired = Some((
                    PairedBy::Time,
                    format!(
                        "paired by time: its events ({}) lie within this run's ({})",
                        between(from, to, s.offset),
                        span_text(s)
                    ),
                ));
                continue;
            }
            // Another run's snapshot, or no run's: not this one's.
            let (offset, within) = match held {
                Held::One((h, s)) => (
                    s.offset,
                    format!(
                        "within the time span of run {} ({})",
                        report.runs[h].name,
                        span_text(s)
                    ),
                ),
                Held::None => (
                    own.offset,
                    format!("within no run's time span (this run's: {})", span_text(own)),
                ),
                Held::Several => {
                    kept = true;
                    w.paired = Some((
                        PairedBy::Name,
                        format!(
                            "paired by name: its events ({}) lie within the time spans of \
                             several runs ({}), none of them told",
                            between(from, to, own.offset),
                            several()
                        ),
                    ));
                    continue;
                }
            };
            w.error = Some(format!(
                "{} holds events of {}, {within}: not this run's snapshot",
                path.display(),
                between(from, to, offset),
            ));
            w.found = None;
            missing.insert(n, w);
        }
        if kept {
            attached.insert(path.clone());
            continue;
        }
        let Held::One((holder, s)) = held else {
            continue;
        };
        attached.insert(path.clone());
        let paired = Some((
            PairedBy::Time,
            format!(
                "paired by time, not by its name: its events ({}) lie within this run's ({})",
                between(from, to, s.offset),
                span_text(s)
            ),
        ));
        // The snapshot the run printed and that was not found, if this can be it.
        match missing.first(holder, rank) {
            Some(n) => {
                missing.remove(n, &wanted[n]);
                let w = &mut wanted[n];
                w.found = Some(path.clone());
                w.error = None;
                w.paired = paired;
            }
            None => added.push(Wanted {
                run: holder,
                rank,
                printed: None,
                after_oom: false,
                found: Some(path.clone()),
                error: None,
                paired,
            }),
        }
    }
    wanted.extend(added);
    for u in unclaimed {
        if attached.contains(&u.path) {
            continue;
        }
        // Only a file with times was set against the runs' spans.
        let why = if times.contains_key(&u.path) {
            "its events fall in no run's time span"
        } else {
            "its trace holds no times to go by"
        };
        report.skipped.push(SkippedInput {
            path: u.path.display().to_string(),
            reason: u.error.unwrap_or_else(|| untold(why)),
        });
    }
    wanted.sort_by_key(|w| w.run);
}

/// Why a given snapshot that no printed name claims is set beside no run: `clause`.
fn untold(clause: &str) -> String {
    format!(
        "a snapshot whose run cannot be told: its name matches no `Memory snapshot saved to` \
         line of these logs, and {clause}"
    )
}

/// A file that one path found for several runs belongs to the last of them.
fn claim_by_the_last_run(wanted: &mut [Wanted]) {
    let mut last: BTreeMap<PathBuf, usize> = BTreeMap::new();
    for w in wanted.iter() {
        if let Some(path) = &w.found {
            let entry = last.entry(path.clone()).or_insert(w.run);
            *entry = (*entry).max(w.run);
        }
    }
    for w in wanted.iter_mut() {
        let Some(path) = &w.found else { continue };
        if last[path] != w.run {
            w.error = Some(format!(
                "{} is taken for a later run of these logs, which printed the same path and \
                 overwrote this run's file",
                path.display()
            ));
            w.found = None;
        }
    }
}

/// [`locate`] of each `(printed, log)` pair, in order, on all cores: a run of thousands of
/// ranks names thousands of snapshots, each up to nine file look-ups when it is not there.
fn locate_all(printed: &[(&Path, &Path)]) -> Vec<Option<PathBuf>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Below this a thread costs more than the look-ups it takes over.
    const PER_THREAD: usize = 64;
    let piece = printed.len().div_ceil(workers).max(PER_THREAD);
    if printed.len() <= piece {
        let mut folders = Folders::default();
        return printed
            .iter()
            .map(|(p, log)| locate_in(p, log, &mut folders))
            .collect();
    }
    std::thread::scope(|scope| {
        let parts: Vec<_> = printed
            .chunks(piece)
            .map(|part| {
                scope.spawn(move || {
                    let mut folders = Folders::default();
                    part.iter()
                        .map(|(p, log)| locate_in(p, log, &mut folders))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().expect("a look-up thread panicked"))
            .collect()
    })
}

/// Whether each folder looked in is one, remembered: a path in a folder that is not there is
/// no file, and thousands of ranks print the same folder (three look-ups saved per place).
#[derive(Default)]
struct Folders(std::collections::HashMap<PathBuf, bool>);

impl Folders {
    /// Whether `path` may be a file: its folder is there (the current one always is).
    fn may_hold(&mut self, path: &Path) -> bool {
        match path.parent() {
            None => true,
            Some(folder) if folder.as_os_str().is_empty() => true,
            Some(folder) => *self
                .0
                .entry(folder.to_path_buf())
                .or_insert_with(|| folder.is_dir()),
        }
    }
}

/// [`locate`], skipping the places whose folder is not there.
fn locate_in(printed: &Path, log: &Path, folders: &mut Folders) -> Option<PathBuf> {
    locate_where(printed, log, |candidate| folders.may_hold(candidate))
}

/// Where the snapshot a log printed as `printed` lies (see the module doc): every place looked
/// in, what [`locate_in`] must find.
#[cfg(test)]
fn locate(printed: &Path, log: &Path) -> Option<PathBuf> {
    locate_where(printed, log, |_| true)
}

/// [`locate`] among the places `may_hold` lets through (a `.gz` or `.zst` beside a place is in
/// its folder).
fn locate_where(
    printed: &Path,
    log: &Path,
    mut may_hold: impl FnMut(&Path) -> bool,
) -> Option<PathBuf> {
    let folder = log.parent().unwrap_or(Path::new(""));
    let mut candidates = vec![printed.to_path_buf()];
    if printed.is_relative() {
        candidates.push(folder.join(printed));
    }
    if let Some(name) = printed.file_name() {
        candidates.push(folder.join(name));
    }
    candidates
        .into_iter()
        .filter(|c| may_hold(c))
        .find_map(|c| {
            [None, Some("gz"), Some("zst")].into_iter().find_map(|ext| {
                let path = match ext {
                    None => c.clone(),
                    Some(ext) => {
                        let mut name = c.clone().into_os_string();
                        name.push(".");
                        name.push(ext);
                        PathBuf::from(name)
                    }
                };
                path.is_file().then_some(path)
            })
        })
}

/// A file's name without a `.gz`/`.zst` suffix.
fn bare_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .map_or_else(|| name.clone(), str::to_owned)
}

fn given_names(given: &[PathBuf]) -> String {
    let names: Vec<String> = given.iter().map(|p| p.display().to_string()).collect();
    names.join(", ")
}

fn fill(view: &mut SnapshotView, report: &memprints_snapshot::SnapshotReport) {
    let device = report.primary();
    let bytes = |b: u64| i64::try_from(b).unwrap_or(i64::MAX);
    let peak = bytes(device.peak_allocated_bytes);
    let end = bytes(device.allocated_bytes);
    view.peak_allocated = Some(peak);
    view.allocated_at_end = Some(end);
    view.freed_after_peak = Some(peak - end);
    view.gap_to_prints = view.prints_peak.map(|p| peak - p);
    if view.rank.is_none() {
        view.rank = report.rank;
    }
    view.peak_reserved = Some(bytes(device.peak_reserved_bytes));
    view.owners = device
        .peak_owners
        .iter()
        .map(|o| SnapshotOwner {
            owner: o.owner.clone(),
            kind: o.kind,
            bytes: bytes(o.bytes),
            count: o.count,
            asked_by: o.asked_by.clone(),
        })
        .collect();
    view.top_stacks = device
        .peak_stacks
        .iter()
        .take(TOP_STACKS)
        .map(|g| HeldBy {
            owner: g.owner.clone(),
            frame: g.frame.clone(),
            bytes: bytes(g.bytes),
            count: g.count,
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_are_located_on_all_cores_as_one_by_one() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("rank.log");
        // Every third one is there, beside the log, plain or compressed; printed in a folder
        // that is gone, relative to one that is not there, or in the log's own folder.
        let printed: Vec<PathBuf> = (0..300)
            .map(|i| {
                let name = format!("memory_snapshot_rank{i}_step0.pickle");
                match i % 6 {
                    0 => std::fs::write(dir.path().join(&name), b"x").unwrap(),
                    3 => std::fs::write(dir.path().join(format!("{name}.gz")), b"x").unwrap(),
                    _ => {}
                }
                match i % 5 {
                    1 => PathBuf::from(format!("snapdir/{name}")),
                    2 => dir.path().join(&name),
                    _ => PathBuf::from(format!("/gone/{name}")),
                }
            })
            .collect();
        let pairs: Vec<(&Path, &Path)> = printed
            .iter()
            .map(|p| (p.as_path(), log.as_path()))
            .collect();
        let one_by_one: Vec<Option<PathBuf>> =
            pairs.iter().map(|(p, log)| locate(p, log)).collect();
        assert_eq!(one_by_one.iter().flatten().count(), 100);
        assert_eq!(locate_all(&pairs), one_by_one);
    }

    /// A report of `n` runs, named `run0`.., without step lines or crashes.
    fn runs(n: usize) -> Report {
        let mut b = crate::fold::builder::ReportBuilder::new(None);
        b.begin_source(0);
        b.line(b"[rank=0] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=1.40");
        let mut report = b.finish(vec!["run0".to_owned()]);
        let run = report.runs[0].clone();
        report.runs = (0..n)
            .map(|k| Run {
                name: format!("run{k}"),
                training: None,
                crash: None,
                ..run.clone()
            })
            .collect();
        report
    }

    /// Steps logged from `first` to `last` (seconds of the log's clock), the first taking 1 s.
    fn steps(run: &mut Run, first: i64, last: i64) {
        let mut t = report_training();
        t.first_time = Some(first);
        t.last_time = Some(last);
        t.first_step_time_s = Some(1.0);
        run.training = Some(t);
    }

    fn report_training() -> super::super::schema::Training {
        let text = "2026-12-01 10:00:10 | INFO | step 00000001/00000009 | step-time 1.000 sec | peak-gpu-memory 1.00 GB";
        let mut b = crate::fold::builder::ReportBuilder::new(None);
        b.begin_source(0);
        b.line(text.as_bytes());
        let r = b.finish(vec!["t".to_owned()]);
        r.runs[0].training.clone().expect("a step line")
    }

    fn crashed(report: &mut Report, n: usize) {
        report.runs[n].crash = Some(super::super::schema::Crash {
            exception: "RuntimeError: boom".to_owned(),
            kind: "RuntimeError".to_owned(),
            out_of_memory: false,
            rank: None,
            frames: Vec::new(),
            peak_is_lower_bound: true,
            stopped_at: super::super::schema::StoppedAt {
                last_step: None,
                rank: None,
                last_print: None,
            },
        });
    }

    fn by_name(run: usize, path: &str) -> Wanted {
        Wanted {
            run,
            rank: Some(0),
            printed: Some(format!("/x/{path}")),
            after_oom: false,
            found: Some(PathBuf::from(path)),
            error: None,
            paired: None,
        }
    }

    fn given(path: &str) -> Unclaimed {
        Unclaimed {
            path: PathBuf::from(path),
            error: None,
        }
    }

    fn span(start: i64, end: i64) -> Option<Span> {
        Some(Span {
            start,
            end,
            offset: 0,
        })
    }

    fn times(entries: &[(&str, i64, i64)]) -> BTreeMap<PathBuf, Times> {
        entries
            .iter()
            .map(|&(p, from, to)| {
                (
                    PathBuf::from(p),
                    Times {
                        from,
                        to,
                        rank: Some(0),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_crashed_run_runs_on_to_the_next_run_of_the_report_only() {
        let t0 = 1_000_000;
        // Crashed, steps from t0 to t0 + 10; then a run without step lines; then one at t0 + 3600.
        let mut report = runs(3);
        crashed(&mut report, 0);
        steps(&mut report.runs[0], t0, t0 + 10);
        steps(&mut report.runs[2], t0 + 3600, t0 + 3610);
        let own_end = t0 + 10 + 1 + SLACK_S;
        let s = spans(&report.runs, false);
        assert_eq!(
            s[0].unwrap().end,
            own_end,
            "the next run has no span: not stretched"
        );
        assert!(s[1].is_none());
        // The next run starts before this one's last step: the end stays its own.
        let mut report = runs(2);
        crashed(&mut report, 0);
        steps(&mut report.runs[0], t0, t0 + 10);
        steps(&mut report.runs[1], t0 + 5, t0 + 20);
        assert_eq!(spans(&report.runs, false)[0].unwrap().end, own_end);
        // On to the next run's start; the last run, for ever.
        let mut report = runs(2);
        crashed(&mut report, 0);
        crashed(&mut report, 1);
        steps(&mut report.runs[0], t0, t0 + 10);
        steps(&mut report.runs[1], t0 + 100, t0 + 110);
        let s = spans(&report.runs, false);
        assert_eq!(s[0].unwrap().end, t0 + 100 - 1 - SLACK_S);
        assert_eq!(s[1].unwrap().end, i64::MAX);
    }

    #[test]
    fn a_run_without_a_span_keeps_the_snapshot_it_found_by_name() {
        let mut report = runs(2);
        let mut wanted = vec![by_name(0, "a.pickle")];
        let (spans, at) = (
            vec![None, span(0, i64::MAX)],
            times(&[("a.pickle", 50, 60)]),
        );
        pair_by_time(&mut report, &mut wanted, Vec::new(), &at, &spans, &spans);
        assert_eq!(
            wanted.len(),
            1,
            "{:?}",
            wanted.iter().map(|w| w.run).collect::<Vec<_>>()
        );
        assert_eq!(wanted[0].run, 0);
        assert_eq!(wanted[0].found, Some(PathBuf::from("a.pickle")));
        assert_eq!(wanted[0].paired.as_ref().unwrap().0, PairedBy::Name);
    }

    #[test]
    fn a_run_holding_its_snapshot_in_either_reading_of_the_dates_keeps_it() {
        // Back to back: read in this machine's zone the dates put the events in run 1's span,
        // read in UTC (the container's clock that wrote them) in run 0's.
        let mut report = runs(2);
        let mut wanted = vec![by_name(0, "a.pickle")];
        let at = times(&[("a.pickle", 150, 160)]);
        let local = vec![span(400, 500), span(100, 200)];
        let utc = vec![span(100, 200), span(200, 300)];
        pair_by_time(&mut report, &mut wanted, Vec::new(), &at, &local, &utc);
        assert_eq!(wanted.len(), 1);
        assert_eq!((wanted[0].run, wanted[0].error.as_deref()), (0, None));
        assert_eq!(wanted[0].found, Some(PathBuf::from("a.pickle")));
        assert_eq!(wanted[0].paired.as_ref().unwrap().0, PairedBy::Time);
        // Held by run 1 in one reading and by none in the other: it moves.
        let mut wanted = vec![by_name(0, "a.pickle")];
        let utc = vec![span(400, 500), span(600, 700)];
        pair_by_time(&mut report, &mut wanted, Vec::new(), &at, &local, &utc);
        let got: Vec<(usize, bool)> = wanted.iter().map(|w| (w.run, w.found.is_some())).collect();
        assert_eq!(got, [(0, false), (1, true)]);
    }

    #[test]
    fn an_unclaimed_file_goes_to_the_run_its_time_names_and_the_rest_are_skipped_in_order() {
        let mut report = runs(2);
        let spans = vec![span(0, 100), span(100, 200)];
        // v: in no run's span; u: in run 1's; w: no times (not in `at`).
        let at = times(&[("v.pickle", 500, 600), ("u.pickle", 150, 160)]);
        let unclaimed = vec![given("w.pickle"), given("u.pickle"), given("v.pickle")];
        let mut wanted = Vec::new();
        pair_by_time(&mut report, &mut wanted, unclaimed, &at, &spans, &spans);
        assert_eq!(wanted.len(), 1);
        assert_eq!(wanted[0].run, 1);
        assert_eq!(wanted[0].found, Some(PathBuf::from("u.pickle")));
        assert_eq!(wanted[0].paired.as_ref().unwrap().0, PairedBy::Time);
        let skipped: Vec<(&str, &str)> = report
            .skipped
            .iter()
            .map(|s| (s.path.as_str(), s.reason.as_str()))
            .collect();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert_eq!(skipped[0].0, "w.pickle");
        assert!(skipped[0].1.ends_with("its trace holds no times to go by"));
        assert_eq!(skipped[1].0, "v.pickle");
        assert!(
            skipped[1]
                .1
                .ends_with("its events fall in no run's time span")
        );
    }

    #[test]
    fn a_snapshot_several_runs_hold_is_neither_moved_nor_lost() {
        let mut report = runs(3);
        let spans = vec![span(100, 300), span(100, 300), span(400, 500)];
        let at = times(&[("a.pickle", 150, 160), ("given.pickle", 150, 160)]);
        let mut wanted = vec![by_name(2, "a.pickle")];
        let unclaimed = vec![given("given.pickle")];
        pair_by_time(&mut report, &mut wanted, unclaimed, &at, &spans, &spans);
        assert_eq!(wanted.len(), 1);
        assert_eq!(wanted[0].run, 2);
        assert_eq!(wanted[0].found, Some(PathBuf::from("a.pickle")));
        let (by, why) = wanted[0].paired.clone().unwrap();
        assert_eq!(by, PairedBy::Name);
        assert!(why.contains("several runs (run0, run1)"), "{why}");
        assert_eq!(report.skipped.len(), 1);
        assert_eq!(report.skipped[0].path, "given.pickle");
        assert!(
            report.skipped[0]
                .reason
                .contains("time spans of several runs (run0, run1)"),
            "{}",
            report.skipped[0].reason
        );
    }

    #[test]
    fn twenty_thousand_snapshots_are_paired_by_their_index() {
        // Each rank of run 1 printed its snapshot and none was found; each file given lies in
        // run 1's span and is found by name for run 0, whose span does not hold it.
        let n = 20_000;
        let mut report = runs(2);
        let name = |k: u32| format!("memory_snapshot_rank{k}_step0.pickle");
        let mut wanted: Vec<Wanted> = (0..n).map(|k| by_name(0, &name(k))).collect();
        wanted.extend((0..n).map(|k| Wanted {
            rank: Some(k),
            found: None,
            ..by_name(1, &name(k))
        }));
        let at: BTreeMap<PathBuf, Times> = (0..n)
            .map(|k| {
                (
                    PathBuf::from(name(k)),
                    Times {
                        from: 150,
                        to: 160,
                        rank: Some(k),
                    },
                )
            })
            .collect();
        let spans = vec![span(0, 100), span(100, 200)];
        // Not timed (timings live in bench/): 20,000 pairs took 41 s with the quadratic
        // search and 0.3 s with the index; this checks what the index pairs.
        pair_by_time(&mut report, &mut wanted, Vec::new(), &at, &spans, &spans);
        assert_eq!(wanted.len(), 2 * n as usize);
        assert!(wanted[..n as usize].iter().all(|w| w.found.is_none()));
        for w in &wanted[n as usize..] {
            assert_eq!(w.found, Some(PathBuf::from(name(w.rank.unwrap()))));
        }
    }

    #[test]
    fn a_printed_path_is_found_as_printed_beside_the_log_and_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        let gz = dir.path().join("memory_snapshot_rank0_step0.pickle.gz");
        std::fs::write(&gz, b"x").unwrap();
        let printed = Path::new("/gone/snapdir/memory_snapshot_rank0_step0.pickle");
        assert_eq!(locate(printed, &log), Some(gz.clone()));
        let sub = dir.path().join("snaps");
        std::fs::create_dir(&sub).unwrap();
        let relative = sub.join("memory_snapshot_rank1_step0.pickle");
        std::fs::write(&relative, b"x").unwrap();
        assert_eq!(
            locate(Path::new("snaps/memory_snapshot_rank1_step0.pickle"), &log),
            Some(relative)
        );
        assert_eq!(locate(Path::new("/gone/other.pickle"), &log), None);
        assert_eq!(bare_name(&gz), "memory_snapshot_rank0_step0.pickle");
    }
}
