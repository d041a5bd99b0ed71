//! The per-rank fold: physical log lines in, one [`Report`] out.
//!
//! Contract: [`ReportBuilder::line`] takes physical lines in file order (as [`crate::scan`]
//! hands them over) and never fails: a print that matches no format is counted in
//! `unparsed_memory_lines` (globally and, when its tag has a readable rank, on that rank) and
//! skipped. Every `[rank=` tag counts once in `memory_lines`. Each rank's prints are folded in
//! log order into its [`RankReport`]: changes against the previous print of the same kind (for
//! probes, the previous probe in the same pipeline operation), probes attached to the pipeline
//! operation they ran in, saved-tensor groups closed by their summary line, the last memory
//! figure. Step and OOM lines ([`crate::step_and_oom`]) are aggregated over the whole run, not
//! per rank. The builder keeps one compact entry per recognised print, so its
//! memory grows with the number of prints, never with the noise around them.
//! [`ReportBuilder::finish`] hands the ranks to [`super::summary`] for peaks, breakdowns and the
//! cross-rank summary.

use std::collections::BTreeSet;

use crate::parse::{clean, split_prints};
use crate::scan::{self as lines, Backing, Item, Needles, PreRead, ScanCounts, Sink};

use super::passes::{Passes, last_point};
use super::rank_map::RankMap;
use super::runs::{self, RankProgress};
use super::summary;
use crate::parse::{Detail, Event, PipelinePoint, Print, parse_print, tag_rank};
use crate::schema::{
    Checkpoint, Crash, LastPoint, Oom, PipelineEntry, PointSource, RankReport, Report, Run,
    RunStats, SCHEMA_VERSION, SetupEntry, SetupPhase, SnapshotFile, Stats, StoppedAt, Training,
};
use crate::step_and_oom::{StepRun, parse_oom_line, parse_step_line};
use crate::{crash, joined};

mod merge;
pub use merge::Overlap;

/// Unparsed prints kept as examples in [`Stats::unparsed_examples`].
const UNPARSED_EXAMPLES: usize = 5;
/// Characters kept of an example print.
const EXAMPLE_CHARS: usize = 200;

/// One rank's report while it is being folded, and what the next print is compared with.
#[derive(Default)]
struct RankState {
    /// Setup, checkpoint, snapshots and counts; the passes' detail goes in at the end. Boxed,
    /// as the kept passes are: what every print touches then fits a few cache lines per rank.
    report: Box<RankReport>,
    /// Its pipeline passes ([`passes`]).
    passes: Passes,
    /// Allocated at the latest pipeline print.
    last_pipeline_alloc: Option<i64>,
    /// Allocated at the latest `setup_model` print.
    last_setup_alloc: Option<i64>,
    /// The rank's prints so far: orders [`Self::last_point`] against the probes.
    seq: u64,
    /// The latest print other than a detail print that names a memory figure, and its `seq`.
    last_point: Option<(u64, LastPoint)>,
    /// Detail prints of passes just read that matched no format, until [`Self::settle`]
    /// counts them.
    unparsed: Vec<Vec<u8>>,
    /// Detail prints read that matched no format, and the first few of them: they are counted
    /// in the stats when the report is made, rank by rank, so that the order in which the ranks'
    /// passes were read does not show.
    unparsed_detail: u64,
    unparsed_detail_examples: Vec<Vec<u8>>,
    /// Detail prints of passes not kept, once the passes are closed.
    not_read: u64,
    /// The run's progress of this rank has seen a detail print.
    detail_recorded: bool,
    /// The input the rank's prints are being read from.
    source: usize,
    /// Closed already, by the worker that folded its file alone ([`ReportBuilder::close_ranks`]).
    closed: bool,
}

/// One run while it is being folded.
#[derive(Default)]
struct RunState {
    ranks: RankMap<RankState>,
    /// What every rank (wanted or not) printed so far, to see a relaunch.
    progress: RankMap<RankProgress>,
    stats: RunStats,
    training: Option<Training>,
    oom: Option<Oom>,
    oom_ranks: BTreeSet<u32>,
    /// The exception at the end of one of its sources' logs ([`crash`]).
    exception: Option<crash::Exception>,
    sources: BTreeSet<usize>,
    /// The source last inserted into `sources` (the look-up runs on every print).
    noted_source: Option<usize>,
    /// A source of this run holds PithTrain's launch line.
    launched: bool,
    /// The source of the run's latest step line: setup printed after it, or a step that does
    /// not go up, in the same source is a new launch ([`runs`]).
    steps_source: Option<usize>,
    /// The run's step lines source by source, in order: a source whose step lines repeat
    /// another run's is taken out at the end ([`drop_repeated_steps`]).
    step_parts: Vec<StepPart>,
}

/// The step lines one source gave a run.
struct StepPart {
    source: usize,
    /// Their training figures, as if they were the run's only step lines.
    training: Training,
    /// The wrapping sum of their [`crate::step_and_oom::StepLine::digest`]s.
    digest: u64,
}

impl StepPart {
    /// What two sets of the same step lines share: the count, the first and last steps and the
    /// sum of the lines' fingerprints.
    fn key(&self) -> (u64, u64, u64, u64) {
        let t = &self.training;
        (t.steps_logged, t.first_step, t.last_step, self.digest)
    }
}

/// Builds a [`Report`] from lines fed in file order.
pub struct ReportBuilder {
    /// Finished runs, then the current one.
    runs: Vec<RunState>,
    only: Option<BTreeSet<u32>>,
    stats: Stats,
    /// The input being read (see [`Self::begin_source`]).
    source: usize,
    /// The file being read when it is mapped: detail prints are deferred by their place in it.
    map: Option<Backing>,
    scratch: Vec<u8>,
}

impl ReportBuilder {
    /// `only`: keep these ranks (all when `None`); the stats still count every rank.
    pub fn new(only: Option<BTreeSet<u32>>) -> Self {
        ReportBuilder {
            runs: Vec::new(),
            only,
            stats: Stats::default(),
            source: 0,
            map: None,
            scratch: Vec::new(),
        }
    }

    /// Says that the lines fed from now on come from input `index` (of the names given to
    /// [`Self::finish`]); inputs are fed in order.
    pub fn begin_source(&mut self, index: usize) {
        self.source = index;
    }

    /// [`Self::begin_source`] for a file of several, saying whether the file holds PithTrain's
    /// launch line near its start (see [`runs`]): one that does begins a new run when the
    /// current run already has a launching file, so a plain run's log after an instrumented
    /// one's is a run of its own, not more steps of the first.
    pub fn begin_source_launching(&mut self, index: usize, launches: bool) {
        self.source = index;
        if !launches {
            return;
        }
        match self.runs.last_mut() {
            Some(run) if !run.launched => run.launched = true,
            _ => self.runs.push(RunState {
                launched: true,
                ..RunState::default()
            }),
        }
    }

    /// Says that the input being read ended with `tail` (its last bytes, [`crash::TAIL_BYTES`]
    /// at most): the exception of a traceback there ended the run being read.
    pub fn end_source(&mut self, tail: &[u8]) {
        self.end_source_with(crash::last_exception(tail));
    }

    /// [`Self::end_source`] with the exception already read off the input's tail (by the
    /// thread that scanned it).
    pub fn end_source_with(&mut self, exception: Option<crash::Exception>) {
        if let Some(exception) = exception {
            self.run().exception = Some(exception);
        }
    }

    /// Adds lines that were read but not passed to [`Self::line`].
    pub fn count_lines(&mut self, n: u64) {
        self.stats.lines_read += n;
    }

    /// Adds what a scan of one input counted ([`lines::Scanner::scan`]).
    pub fn count_scan(&mut self, counts: ScanCounts) {
        self.stats.lines_read += counts.lines;
        self.stats.long_lines += counts.long_lines;
        self.stats.cut_bytes += counts.cut_bytes;
    }

    /// Feeds one item of [`lines::Scanner::scan`].
    pub fn item(&mut self, item: Item<'_>) {
        match item {
            Item::Line(line, found) => self.line_with(line, found),
            Item::Steps(steps) => self.steps(steps),
            Item::Print(read) => {
                let rank = match read {
                    PreRead::Detail(rank, ..) | PreRead::Pipeline(rank, ..) => rank,
                };
                self.pre_read(rank, 1, std::iter::once(read));
            }
            Item::Group(group) => self.pre_read(group.rank(), group.len() as u64, group.prints()),
        }
    }

    /// Folds consecutive step lines into the current run's training figures, as feeding them
    /// one by one would.
    pub fn steps(&mut self, steps: &StepRun) {
        let first = steps.first;
        let source = self.source;
        if self.runs.last().is_some_and(|run| {
            run.steps_source == Some(source)
                && run
                    .training
                    .as_ref()
                    .is_some_and(|t| first.step <= t.last_step)
        }) {
            self.runs.push(RunState::default());
        }
        // Step lines alone do not make a source one of the run's: a source whose step lines
        // turn out to repeat another run's is no part of it ([`drop_repeated_steps`]).
        let run = self.current_run();
        run.steps_source = Some(source);
        let more = training_of(steps);
        match &mut run.training {
            Some(t) => extend_training(t, &more),
            None => run.training = Some(more.clone()),
        }
        match run.step_parts.last_mut() {
            Some(part) if part.source == source => {
                extend_training(&mut part.training, &more);
                part.digest = part.digest.wrapping_add(steps.digest);
            }
            _ => run.step_parts.push(StepPart {
                source,
                training: more,
                digest: steps.digest,
            }),
        }
    }

    /// Feeds one physical line (without its `\n`) as the scanner would: with the needles its
    /// bytes hold ([`lines::needles`]).
    pub fn line(&mut self, raw: &[u8]) {
        self.line_with(raw, lines::needles(raw));
    }

    /// Feeds one physical line that holds (at most) the needles in `found`, as
    /// [`lines::Scanner::scan`] reports them.
    pub fn line_with(&mut self, raw: &[u8], found: Needles) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let line = clean(raw, &mut scratch);
        if found & 1 != 0 {
            for print in split_prints(line) {
                self.print(print);
            }
        }
        // A step or OOM line may also have been glued to a print by interleaving.
        if found & 0b110 != 0 {
            let text = String::from_utf8_lossy(line);
            self.untagged(&text);
        }
        self.scratch = scratch;
    }

    /// The current run, begun on the first line fed; the source being read is not noted as one
    /// of its sources.
    fn current_run(&mut self) -> &mut RunState {
        if self.runs.is_empty() {
            self.runs.push(RunState::default());
        }
        self.runs.last_mut().expect("just ensured")
    }

    /// The current run, begun on the first line fed, with the source being read noted as one of
    /// its sources.
    fn run(&mut self) -> &mut RunState {
        let source = self.source;
        let run = self.current_run();
        if run.noted_source != Some(source) {
            run.sources.insert(source);
            run.noted_source = Some(source);
        }
        run
    }

    fn print(&mut self, print: &[u8]) {
        if let Some(rank) = crate::parse::detail_rank(print) {
            let read = PreRead::Detail(rank, print, None);
            self.pre_read(rank, 1, std::iter::once(read));
            return;
        }
        self.stats.memory_lines += 1;
        let Some(parsed) = parse_print(print) else {
            self.unparsed(print);
            return;
        };
        self.parsed(parsed);
    }

    /// A print other than a detail print, parsed.
    fn parsed(&mut self, parsed: Print<'_>) {
        // Only setup prints can begin a launch: the others skip the look-up.
        let may_relaunch = matches!(
            parsed.event,
            Event::ProcessGroup { .. } | Event::Setup { .. }
        );
        let source = self.source;
        if may_relaunch
            && self.runs.last().is_some_and(|run| {
                run.progress
                    .get(parsed.rank)
                    .is_some_and(|p| p.relaunches(&parsed.event))
                    || (run.steps_source == Some(source) && runs::starts_setup(&parsed.event))
            })
        {
            self.runs.push(RunState::default());
        }
        let wanted = self.wanted(parsed.rank);
        // Taken for the fold of this print, which may read kept detail from it.
        let map = self.map.take();
        let rank = parsed.rank;
        let run = self.run();
        run.stats.memory_lines += 1;
        run.progress.get_or_default(rank).record(&parsed.event);
        if wanted {
            let state = run.rank(rank);
            state.source = source;
            state.report.memory_lines += 1;
            state.seq += 1;
            state.event(parsed.event, backed(&map));
            state.settle();
        }
        self.map = map;
    }

    /// `n` detail and pipeline prints of `rank` ([`lines::PreRead`]), in file order: one print
    /// pre-read by the scanner or found by [`Self::print`], or a [`lines::RankGroup`] of a
    /// chunk's prints. Ranks do not depend on each other's prints, so a chunk's prints may be
    /// taken rank by rank. A detail print is kept raw in its rank's open pass ([`passes`]);
    /// a pipeline print is folded as [`Self::parsed`] would (it can never begin a launch).
    fn pre_read<'a>(&mut self, rank: u32, n: u64, prints: impl Iterator<Item = PreRead<'a>>) {
        self.stats.memory_lines += n;
        let wanted = self.wanted(rank);
        let source = self.source;
        let map = self.map.take();
        let run = self.run();
        run.stats.memory_lines += n;
        // A detail or pipeline print sets a rank's progress the same way, once.
        if !wanted {
            run.progress.get_or_default(rank).record_detail();
            let details = prints.filter(|p| matches!(p, PreRead::Detail(..))).count() as u64;
            run.stats.detail_prints_not_read += details;
            self.stats.detail_prints_not_read += details;
            self.map = map;
            return;
        }
        let state = run.ranks.get_or_insert_with(rank, || RankState::new(rank));
        // A detail or a pipeline print sets a rank's progress the same way, once; after that
        // the look-up is skipped (it runs on every print).
        if !state.detail_recorded {
            run.progress.get_or_default(rank).record_detail();
            state.detail_recorded = true;
        }
        state.source = source;
        state.report.memory_lines += n;
        for print in prints {
            state.seq += 1;
            match print {
                PreRead::Detail(_, bytes, at) => {
                    let at = at.filter(|_| map.is_some());
                    state.passes.defer(bytes, at, state.seq);
                }
                // What `event` does with a pipeline print, without building the event.
                PreRead::Pipeline(_, pp, point) => state.pipeline(pp, point, backed(&map)),
            }
        }
        state.settle();
        self.map = map;
    }

    fn unparsed(&mut self, print: &[u8]) {
        let rank = tag_rank(print).filter(|r| self.wanted(*r));
        self.run();
        let run = self.runs.last_mut().expect("just begun");
        run.stats.memory_lines += 1;
        count_unparsed(&mut self.stats, &mut run.stats, print);
        if let Some(rank) = rank {
            let state = run.rank(rank);
            state.report.memory_lines += 1;
            state.report.unparsed_memory_lines += 1;
        }
    }

    fn wanted(&self, rank: u32) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(&rank))
    }

    fn untagged(&mut self, line: &str) {
        if line.contains("| step ")
            && let Some(step) = parse_step_line(line)
        {
            self.steps(&StepRun::new(step));
        }
        if let Some(oom) = parse_oom_line(line) {
            let run = self.run();
            let entry = run.oom.get_or_insert_with(|| Oom {
                lines: 0,
                ranks: Vec::new(),
                tried_to_allocate: oom.tried_to_allocate,
                message: oom.message.to_owned(),
                gpu: oom.gpu,
                capacity: oom.capacity,
                free: oom.free,
                process_in_use: oom.process_in_use,
                allocated_by_pytorch: oom.allocated_by_pytorch,
                reserved_unallocated: oom.reserved_unallocated,
            });
            entry.lines += 1;
            run.oom_ranks.extend(oom.rank);
        }
    }

    /// The report of everything fed so far: per run, peaks, breakdowns, the cross-rank summary
    /// and the prints' side of the memory view (the snapshots are [`joined::attach_snapshots`]'s
    /// job); `inputs` names the inputs by index.
    pub fn finish(mut self, inputs: Vec<String>) -> Report {
        // Closing a rank reads its last pass in detail, its text and shapes shared with the
        // ranks closed before through this thread's copies ([`super::intern`]). On this
        // thread, not on all cores: the parsed reports then reuse the memory the raw prints,
        // read on this thread, are freed into (glibc keeps a heap per arena, and what one frees
        // the others do not reuse: 10,000 ranks closed on all cores held 515 MB for 280 MB of
        // heap), and it is cheap (10,000 ranks: a few tenths of a second). A rank closed by the
        // worker that folded its file alone is closed already and shares that worker's copies.
        self.close_ranks();
        for run in &mut self.runs {
            for state in run.ranks.values_mut() {
                for print in &state.unparsed_detail_examples {
                    count_unparsed(&mut self.stats, &mut run.stats, print);
                }
                let rest = state.unparsed_detail - state.unparsed_detail_examples.len() as u64;
                self.stats.unparsed_memory_lines += rest;
                run.stats.unparsed_memory_lines += rest;
                state.report.unparsed_memory_lines += state.unparsed_detail;
            }
            let not_read: u64 = run.ranks.values().map(|s| s.not_read).sum();
            run.stats.detail_prints_not_read += not_read;
            self.stats.detail_prints_not_read += not_read;
        }
        let repeats = drop_repeated_steps(&mut self.runs);
        let mut sources: Vec<BTreeSet<usize>> = self
            .runs
            .iter()
            .map(|r| {
                let mut s = r.sources.clone();
                s.extend(r.step_parts.iter().map(|p| p.source));
                s
            })
            .collect();
        let mut runs: Vec<Run> = self
            .runs
            .into_iter()
            .zip(&sources)
            .map(|(state, sources)| state.finish(sources, &inputs))
            .collect();
        let repeated = repeated_inputs(&mut runs, &mut sources, repeats, &inputs);
        for (run, name) in runs.iter_mut().zip(runs::names(&sources, &inputs)) {
            run.name = name;
        }
        let repeated = repeated
            .into_iter()
            .map(|(r, mut input)| {
                input.repeats = runs[r].name.clone();
                input
            })
            .collect();
        Report {
            schema_version: SCHEMA_VERSION,
            inputs,
            skipped: Vec::new(),
            repeated,
            stats: self.stats,
            runs,
            notes: Vec::new(),
        }
    }
}

impl Sink for ReportBuilder {
    fn item(&mut self, item: Item<'_>) {
        ReportBuilder::item(self, item);
    }

    /// Detail prints of the input are deferred by their place in `bytes` and read again from
    /// it only for the passes kept in detail. Kept to the end: the last passes are read then.
    fn backing(&mut self, bytes: Backing) {
        self.map = Some(bytes);
    }
}

/// The bytes of a backed input.
fn backed(map: &Option<Backing>) -> Option<&[u8]> {
    map.as_ref().map(|bytes| (**bytes).as_ref())
}

impl RunState {
    fn rank(&mut self, rank: u32) -> &mut RankState {
        self.ranks.get_or_insert_with(rank, || RankState::new(rank))
    }

    /// The run, from `sources` (its sources and those of its step lines); named later.
    fn finish(self, sources: &BTreeSet<usize>, inputs: &[String]) -> Run {
        let mut ranks: Vec<RankReport> = self.ranks.into_values().map(|s| *s.report).collect();
        for rank in &mut ranks {
            rank.peak = summary::peak(&rank.pipeline);
            rank.breakdown = summary::breakdown(rank);
            rank.non_pytorch_growth = summary::non_pytorch_growth(&rank.pipeline);
        }
        let oom = self.oom.map(|mut o| {
            o.ranks = self.oom_ranks.into_iter().collect();
            o
        });
        let training = self.training.map(|mut t| {
            t.first_logged_at = t.first_time.map(crate::step_and_oom::format_time);
            t.last_logged_at = t.last_time.map(crate::step_and_oom::format_time);
            t
        });
        let crash = crash_of(self.exception, oom.as_ref(), training.as_ref(), &ranks);
        let mut run = Run {
            name: String::new(),
            sources: sources.iter().map(|&s| inputs[s].clone()).collect(),
            stats: self.stats,
            training,
            oom,
            crash,
            summary: summary::across_ranks(&ranks),
            memory: Default::default(),
            ranks,
            estimate: None,
            what_if: None,
            what_to_change: None,
        };
        run.memory = joined::prints_and_steps(&run);
        run
    }
}

/// A stretch of step lines as a [`Training`] of its own.
fn training_of(steps: &StepRun) -> Training {
    let first = steps.first;
    Training {
        steps_logged: steps.lines,
        first_step: first.step,
        last_step: steps.last_step,
        max_steps: steps.max_steps.or(first.max_steps),
        first_step_time_s: first.step_time_s,
        first_step_peak_gpu_memory: first.peak_gpu_memory,
        peak_gpu_memory: steps.peak_gpu_memory,
        peak_step: steps.peak_gpu_memory.and(steps.peak_step),
        steady_peak_gpu_memory: steps.steady_peak_gpu_memory,
        first_logged_at: None,
        last_logged_at: None,
        first_time: first.time,
        last_time: steps.last_time,
    }
}

/// `t`'s step lines followed by those of `more`: the figures that go on from one stretch of
/// lines to the next (the first step's stay `t`'s, its date included).
pub(super) fn extend_training(t: &mut Training, more: &Training) {
    t.steps_logged += more.steps_logged;
    t.last_step = more.last_step;
    t.max_steps = more.max_steps.or(t.max_steps);
    if more.peak_gpu_memory > t.peak_gpu_memory {
        t.peak_gpu_memory = more.peak_gpu_memory;
        t.peak_step = more.peak_step;
    }
    if more.steady_peak_gpu_memory > t.steady_peak_gpu_memory {
        t.steady_peak_gpu_memory = more.steady_peak_gpu_memory;
    }
    t.last_time = more.last_time.or(t.last_time);
}

/// `a`'s step lines followed by `b`'s, as one [`Training`]: a run's parts joined again, where a
/// part whose first line had no date takes the next part's.
fn join_training(mut a: Training, b: &Training) -> Training {
    extend_training(&mut a, b);
    a.first_time = a.first_time.or(b.first_time);
    a
}

/// Step lines of a source taken out of a run because they repeat those of run `of`.
struct Repeat {
    source: usize,
    /// The run they were read into.
    run: usize,
    /// The run read before whose step lines they are.
    of: usize,
    training: Training,
}

/// Takes out of every run the step lines of a source that repeat those read before from
/// another file (the same count, first and last step, and fingerprints: [`StepPart::key`]) —
/// those of a single source of a run, or all of a run's step lines; the run's training figures
/// are then those of the step lines left.
fn drop_repeated_steps(runs: &mut [RunState]) -> Vec<Repeat> {
    let mut seen = std::collections::HashMap::new();
    let mut repeats = Vec::new();
    for (n, run) in runs.iter_mut().enumerate() {
        let parts = std::mem::take(&mut run.step_parts);
        let had = parts.len();
        for part in parts {
            match seen.get(&part.key()) {
                // Another file's: one file that holds the same lines twice holds two runs
                // ([`runs`]), as it always did.
                Some(&(of, source)) if source != part.source => repeats.push(Repeat {
                    source: part.source,
                    run: n,
                    of,
                    training: part.training,
                }),
                Some(_) => run.step_parts.push(part),
                None => {
                    seen.insert(part.key(), (n, part.source));
                    run.step_parts.push(part);
                }
            }
        }
        if run.step_parts.len() > 1 {
            let (mut lines, mut digest) = (0u64, 0u64);
            for part in &run.step_parts {
                lines += part.training.steps_logged;
                digest = digest.wrapping_add(part.digest);
            }
            let first = run.step_parts[0].training.first_step;
            let last = run.step_parts[run.step_parts.len() - 1].training.last_step;
            seen.entry((lines, first, last, digest))
                .or_insert((n, usize::MAX));
        }
        if run.step_parts.len() < had {
            run.training = run
                .step_parts
                .iter()
                .map(|p| p.training.clone())
                .reduce(|a, b| join_training(a, &b));
        }
    }
    repeats
}

/// What the report says of `repeats`, each with the index of the run repeated (whose name is
/// known once the runs are named); a run left with nothing of its own — no step lines, and no
/// prints or prints that are those of the run it repeats, no OOM, no exception — is taken out,
/// with its `sources`.
fn repeated_inputs(
    runs: &mut Vec<Run>,
    sources: &mut Vec<BTreeSet<usize>>,
    repeats: Vec<Repeat>,
    inputs: &[String],
) -> Vec<(usize, crate::schema::RepeatedInput)> {
    if repeats.is_empty() {
        return Vec::new();
    }
    let copy_of = |n: usize| -> Option<usize> {
        let run = &runs[n];
        let mut of = repeats.iter().filter(|r| r.run == n).map(|r| r.of);
        let first = of.next()?;
        let same_ranks = || run.ranks.is_empty() || same_ranks(&run.ranks, &runs[first].ranks);
        (of.all(|o| o == first)
            && run.training.is_none()
            && run.oom.is_none()
            && run.crash.is_none()
            && same_ranks())
        .then_some(first)
    };
    let copies: Vec<Option<usize>> = (0..runs.len()).map(copy_of).collect();
    let mut out: Vec<(usize, crate::schema::RepeatedInput)> = repeats
        .iter()
        .map(|r| {
            let t = &r.training;
            (
                r.of,
                crate::schema::RepeatedInput {
                    path: inputs[r.source].clone(),
                    repeats: String::new(),
                    steps: t.steps_logged,
                    first_step: t.first_step,
                    last_step: t.last_step,
                    prints_too: copies[r.run].is_some() && !runs[r.run].ranks.is_empty(),
                },
            )
        })
        .collect();
    // Take the copies out, and renumber what the rest repeat.
    let mut index = Vec::with_capacity(runs.len());
    let mut kept = 0;
    for copy in &copies {
        index.push(kept);
        kept += usize::from(copy.is_none());
    }
    let mut n = 0;
    runs.retain(|_| {
        n += 1;
        copies[n - 1].is_none()
    });
    let mut n = 0;
    sources.retain(|_| {
        n += 1;
        copies[n - 1].is_none()
    });
    for (of, _) in &mut out {
        *of = index[*of];
    }
    out
}

/// Whether `a` and `b` report the same ranks alike: the same number of ranks, each serialised
/// the same, compared rank by rank and stopping at the first that differs (a run may have
/// thousands of ranks; no JSON of all of them is built).
fn same_ranks(a: &[RankReport], b: &[RankReport]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(
            |(x, y)| match (serde_json::to_value(x), serde_json::to_value(y)) {
                (Ok(x), Ok(y)) => x == y,
                _ => false,
            },
        )
}

/// The [`Crash`] of a run that ended in `exception` or logged `oom` (an OOM line without a
/// traceback at the end of the log: the crash is that line); `None` when neither.
fn crash_of(
    exception: Option<crash::Exception>,
    oom: Option<&Oom>,
    training: Option<&Training>,
    ranks: &[RankReport],
) -> Option<Crash> {
    let exception = exception.or_else(|| {
        oom.map(|o| crash::Exception {
            rank: o.ranks.first().copied(),
            line: o.message.clone(),
            frames: Vec::new(),
        })
    })?;
    let stopped = exception
        .rank
        .and_then(|r| ranks.iter().find(|x| x.rank == r))
        .or_else(|| ranks.first())
        .filter(|r| r.last_point.is_some());
    Some(Crash {
        kind: exception.kind().to_owned(),
        out_of_memory: exception.line.contains("CUDA out of memory"),
        exception: exception.line,
        rank: exception.rank,
        frames: exception.frames,
        peak_is_lower_bound: true,
        stopped_at: StoppedAt {
            last_step: training.map(|t| t.last_step),
            rank: stopped.map(|r| r.rank),
            last_print: stopped.and_then(|r| r.last_point.as_ref().map(|p| p.label.clone())),
        },
    })
}

impl RankState {
    fn new(rank: u32) -> Self {
        RankState {
            report: Box::new(RankReport {
                rank,
                ..RankReport::default()
            }),
            ..RankState::default()
        }
    }

    fn event(&mut self, event: Event<'_>, map: Option<&[u8]>) {
        let seq = self.seq;
        let r = &mut self.report;
        match event {
            Event::Setup { label, detail } => {
                let change = self.last_setup_alloc.map(|prev| detail.allocated - prev);
                self.last_setup_alloc = Some(detail.allocated);
                r.setup.push(SetupEntry {
                    phase: SetupPhase::SetupModel,
                    label: label.to_owned(),
                    allocated: Some(detail.allocated),
                    cached: Some(detail.cached),
                    non_pytorch: Some(detail.non_pytorch),
                    change,
                });
                self.last_point = last_point(seq, PointSource::Setup, label, detail.allocated);
            }
            Event::ProcessGroup {
                cuda_context,
                after_nccl_world,
                nccl_world_cost,
                gpu_total,
            } => {
                if gpu_total.is_some() {
                    r.gpu_total = gpu_total;
                }
                let entry = |label: &str, non_pytorch, change| SetupEntry {
                    phase: SetupPhase::InitProcessGroup,
                    label: label.to_owned(),
                    allocated: None,
                    cached: None,
                    non_pytorch: Some(non_pytorch),
                    change,
                };
                r.setup.push(entry("CUDA context", cuda_context, None));
                r.setup.push(entry(
                    "after NCCL world",
                    after_nccl_world,
                    Some(nccl_world_cost),
                ));
            }
            Event::DeviceMesh {
                non_pytorch,
                mesh_cost,
            } => r.setup.push(SetupEntry {
                phase: SetupPhase::InitDeviceMesh,
                label: "after device mesh".to_owned(),
                allocated: None,
                cached: None,
                non_pytorch: Some(non_pytorch),
                change: Some(mesh_cost),
            }),
            Event::CheckpointLoad {
                optimizer_state,
                param_entries,
                detail,
            } => {
                r.checkpoint = Some(Checkpoint {
                    optimizer_state,
                    param_entries,
                    allocated: detail.allocated,
                    cached: detail.cached,
                    non_pytorch: detail.non_pytorch,
                });
                self.last_point = last_point(
                    seq,
                    PointSource::Checkpoint,
                    "after checkpoint load",
                    detail.allocated,
                );
            }
            Event::Pipeline { pp, point } => self.pipeline(pp, point, map),
            Event::Snapshot { path } => r.snapshots.push(SnapshotFile {
                path: path.to_owned(),
                after_oom: !path.contains("_step"),
                source: self.source,
            }),
            // Detail prints never come here: `passes::detail_rank` takes every print that can
            // parse as one.
            Event::Probe { .. }
            | Event::SavedHeader { .. }
            | Event::SavedTensor { .. }
            | Event::SavedSummary { .. } => {
                debug_assert!(false, "a detail print was not deferred")
            }
        }
    }

    fn pipeline(&mut self, pp: u32, point: PipelinePoint, map: Option<&[u8]>) {
        self.report.pp.get_or_insert(pp);
        let Detail {
            cached,
            non_pytorch,
            ..
        } = point.detail;
        let change = self.last_pipeline_alloc.map(|prev| point.allocated - prev);
        self.last_pipeline_alloc = Some(point.allocated);
        let entry = PipelineEntry {
            pass: 0,
            kind: point.kind,
            i: point.i,
            count: point.count,
            allocated: point.allocated,
            cached,
            non_pytorch,
            delta: point.delta,
            change,
        };
        // The label is made at the end, from the last pipeline entry: building it per print
        // would cost an allocation on the hot path.
        self.last_point = Some((
            self.seq,
            LastPoint {
                source: PointSource::Pipeline,
                label: String::new(),
                allocated: point.allocated,
            },
        ));
        self.passes.pipeline(entry, &mut self.unparsed, map);
    }

    /// Counts the detail prints just found unparsed, keeping the first few.
    fn settle(&mut self) {
        for print in self.unparsed.drain(..) {
            self.unparsed_detail += 1;
            if self.unparsed_detail_examples.len() < UNPARSED_EXAMPLES {
                self.unparsed_detail_examples.push(print);
            }
        }
    }

    /// Ends the rank's passes and puts the kept ones into its report.
    fn close(&mut self, map: Option<&[u8]>) {
        let passes = std::mem::take(&mut self.passes);
        let (kept, summaries, not_read) = passes.finish(&mut self.unparsed, map);
        self.not_read = not_read;
        let r = &mut self.report;
        r.passes = summaries;
        let mut last = self.last_point.take();
        for pass in kept {
            let base = r.pipeline.len();
            r.pipeline.extend(pass.pipeline);
            r.layers.extend(pass.layers.into_iter().map(|mut p| {
                p.pipeline_position += base;
                p
            }));
            r.experts.extend(pass.experts.into_iter().map(|mut p| {
                p.pipeline_position += base;
                p
            }));
            r.saved_tensors.extend(pass.saved_tensors);
            r.unparsed_memory_lines += pass.orphans;
            if let Some((seq, probe)) = pass.last_probe
                && last.as_ref().is_none_or(|(at, _)| *at < seq)
            {
                last = Some((seq, probe));
            }
        }
        // A run of 10,000 ranks holds every rank's report to the end: no room to spare (a
        // vector grown by doubling is a quarter empty on average).
        r.pipeline.shrink_to_fit();
        r.layers.shrink_to_fit();
        r.experts.shrink_to_fit();
        r.saved_tensors.shrink_to_fit();
        for group in &mut r.saved_tensors {
            group.tensors.shrink_to_fit();
        }
        r.setup.shrink_to_fit();
        r.passes.shrink_to_fit();
        r.last_point = last.map(|(_, mut point)| {
            if point.source == PointSource::Pipeline {
                point.label = r
                    .pipeline
                    .last()
                    .map(PipelineEntry::label)
                    .unwrap_or_default();
            }
            point
        });
    }
}

/// Counts one unparsed print in the stats of everything read and of its run, keeping the
/// first few as examples.
fn count_unparsed(stats: &mut Stats, run: &mut RunStats, print: &[u8]) {
    let example = || -> String {
        String::from_utf8_lossy(print)
            .chars()
            .take(EXAMPLE_CHARS)
            .collect()
    };
    stats.unparsed_memory_lines += 1;
    if stats.unparsed_examples.len() < UNPARSED_EXAMPLES {
        stats.unparsed_examples.push(example());
    }
    run.unparsed_memory_lines += 1;
    if run.unparsed_examples.len() < UNPARSED_EXAMPLES {
        run.unparsed_examples.push(example());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fold::passes::{parse_shape, split_tensor};

    const G: i64 = 1 << 30;

    fn build_all(text: &str) -> Report {
        let mut b = ReportBuilder::new(None);
        for line in text.split('\n') {
            b.count_lines(1);
            b.line(line.as_bytes());
        }
        b.finish(vec!["t.log".to_owned()])
    }

    /// The one run of `text`.
    fn build(text: &str) -> Run {
        let mut report = build_all(text);
        assert_eq!(report.runs.len(), 1, "one run");
        report.runs.remove(0)
    }

    fn pipe(rank: u32, pp: u32, label: &str, gib: &str) -> String {
        format!("[rank={rank} pp={pp}] {label}: {gib} GiB | alloc={gib} cached=1.00 non-pt=2.00")
    }

    #[test]
    fn every_rank_tag_counts_as_one_memory_line_even_when_prints_share_a_line() {
        let line = format!(
            "{}{}",
            pipe(0, 0, "Before pipeline", "1.00"),
            pipe(1, 1, "Before pipeline", "2.00")
        );
        let r = build(&format!("{line}\n[rank=5] garbage"));
        assert_eq!(r.stats.memory_lines, 3);
        assert_eq!(r.stats.unparsed_memory_lines, 1);
        assert_eq!(r.stats.unparsed_examples, ["[rank=5] garbage"]);
        let counts: Vec<_> = r
            .ranks
            .iter()
            .map(|r| (r.rank, r.pipeline.len(), r.unparsed_memory_lines))
            .collect();
        assert_eq!(counts, [(0, 1, 0), (1, 1, 0), (5, 0, 1)]);
    }

    #[test]
    fn interleaved_ranks_get_their_own_timelines_and_changes() {
        let r = build(
            &[
                pipe(0, 0, "Before pipeline", "10.00"),
                pipe(1, 1, "Before pipeline", "20.00"),
                pipe(0, 0, "Step1 F0 i=0", "12.00"),
                pipe(1, 1, "Step1 F0 i=0", "21.00"),
                pipe(0, 0, "After Step8 (end of pipeline)", "11.00"),
            ]
            .join("\n"),
        );
        let changes =
            |rank: usize| -> Vec<_> { r.ranks[rank].pipeline.iter().map(|e| e.change).collect() };
        assert_eq!(changes(0), [None, Some(2 * G), Some(-G)]);
        assert_eq!(changes(1), [None, Some(G)]);
        assert_eq!((r.ranks[0].pp, r.ranks[1].pp), (Some(0), Some(1)));
        let last = r.ranks[0].last_point.as_ref().unwrap();
        assert_eq!(
            (last.source, last.label.as_str()),
            (PointSource::Pipeline, "After Step8 (end of pipeline)")
        );
    }

    #[test]
    fn probes_are_split_into_layers_and_experts_with_per_pass_changes() {
        let r = build(&[
            pipe(0, 0, "Step1 F0 i=0", "1.00"),
            "[rank=0]     layer5 stage1: before forward_stage1_compute: alloc=1.00".to_owned(),
            "[rank=0]     layer5 stage1: after dispatch_prep  dispatch=(8192, 2048): alloc=1.50".to_owned(),
            "[rank=0]       experts: after gate_up_proj gate_up=(4096, 1536): alloc=1.75".to_owned(),
            "[rank=0]   layer5 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=2.00".to_owned(),
            pipe(0, 0, "Step1 F0 i=1", "2.00"),
            "[rank=0]   after prolog (embed_tokens): alloc=2.50".to_owned(),
        ]
        .join("\n"));
        let rank = &r.ranks[0];
        let layers: Vec<_> = rank
            .layers
            .iter()
            .map(|l| (l.depth, l.layer, l.stage, l.change))
            .collect();
        assert_eq!(
            layers,
            [
                (1, Some(5), Some(1), None),
                (1, Some(5), Some(1), Some(G / 2)),
                (0, Some(5), Some(1), Some(G / 4)),
                (0, None, None, None)
            ]
        );
        assert_eq!(rank.layers[1].tensor.as_deref(), Some("dispatch"));
        assert_eq!(rank.layers[1].shape, Some(vec![8192, 2048].into()));
        let e = &rank.experts[0];
        assert_eq!(
            (&*e.step, e.tensor.as_deref(), e.change),
            ("after gate_up_proj", Some("gate_up"), Some(G / 4))
        );
        assert_eq!(
            rank.last_point.as_ref().unwrap().label,
            "after prolog (embed_tokens)"
        );
    }

    #[test]
    fn saved_tensor_groups_use_the_summary_and_survive_a_missing_one() {
        let r = build(
            "[rank=0] layer5 stage1 saved tensors:\n\
             [rank=0]     saved (activ): (4096, 2048) torch.bfloat16 (16.0 MB)\n\
             [rank=0]     saved (weight): (2048,) torch.float32 (0.5 MB)\n\
             [rank=0]   activ=16.0 MB, weight=0.5 MB, total=2 tensors\n\
             [rank=0] layer5 stage3 saved tensors:\n\
             [rank=0]     saved (activ): (8, 4) torch.bfloat16 (1.0 MB)",
        );
        let g = &r.ranks[0].saved_tensors;
        assert_eq!(
            (g[0].activations, g[0].weights, g[0].count, g[0].complete),
            (16 << 20, 1 << 19, 2, true)
        );
        assert_eq!(g[0].tensors[1].shape, Some(vec![2048].into()));
        assert_eq!(&*g[0].tensors[0].dtype, "bfloat16");
        assert_eq!(
            (g[1].stage.as_str(), g[1].activations, g[1].complete),
            ("stage3", 1 << 20, false)
        );
    }

    #[test]
    fn an_oom_is_reported_with_each_rank_last_point() {
        let r = build(&[
            pipe(0, 0, "Step3 i=0 before B1", "30.00"),
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has".to_owned(),
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has".to_owned(),
            "[rank=0] Memory snapshot saved to /tmp/memory_snapshot_rank0.pickle".to_owned(),
        ]
        .join("\n"));
        let oom = r.oom.as_ref().unwrap();
        assert_eq!(
            (oom.lines, oom.ranks.as_slice(), oom.tried_to_allocate),
            (2, &[0][..], Some(2 * G))
        );
        let last = r.ranks[0].last_point.as_ref().unwrap();
        assert_eq!(
            (last.label.as_str(), last.allocated),
            ("Step3 i=0 before B1", 30 * G)
        );
        assert!(r.ranks[0].snapshots[0].after_oom);
    }

    #[test]
    fn step_lines_are_aggregated() {
        let r = build(
            "t | INFO | step 00000001/00000100 | step-time 9.000 sec | peak-gpu-memory 60.00 GB\n\
             t | INFO | step 00000002/00000100 | step-time 1.000 sec | peak-gpu-memory 61.00 GB",
        );
        let t = r.training.unwrap();
        assert_eq!(
            (t.steps_logged, t.first_step, t.last_step, t.max_steps),
            (2, 1, 2, Some(100))
        );
        assert_eq!(
            (t.first_step_time_s, t.peak_gpu_memory),
            (Some(9.0), Some(61 * G))
        );
    }

    #[test]
    fn a_rank_filter_keeps_stats_for_all_ranks() {
        let mut b = ReportBuilder::new(Some([1].into()));
        b.line(pipe(0, 0, "Before pipeline", "1.00").as_bytes());
        b.line(pipe(1, 0, "Before pipeline", "1.00").as_bytes());
        let r = b.finish(vec!["t.log".to_owned()]);
        assert_eq!(r.stats.memory_lines, 2);
        assert_eq!(r.runs[0].stats.memory_lines, 2);
        assert_eq!(
            r.runs[0].ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
            [1]
        );
    }

    fn launch(rank: u32) -> Vec<String> {
        vec![
            format!(
                "[rank={rank}] init_process_group | cuda_ctx=0.52 after_nccl_world=1.10 nccl_world_cost=0.58"
            ),
            format!(
                "[rank={rank}] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=1.40"
            ),
            pipe(rank, 0, "Before pipeline", "1.00"),
            pipe(rank, 0, "After Step8 (end of pipeline)", "1.00"),
        ]
    }

    #[test]
    fn a_rank_that_sets_up_again_starts_a_new_run_and_sources_follow() {
        let mut b = ReportBuilder::new(None);
        let feed = |b: &mut ReportBuilder, lines: Vec<String>| {
            for l in lines {
                b.line(l.as_bytes());
            }
        };
        b.begin_source(0);
        feed(&mut b, launch(0));
        feed(&mut b, launch(1));
        b.line(b"t | INFO | step 00000001/00000002 | peak-gpu-memory 1.50 GB");
        // A restart appended to the same log: rank 0 launches again.
        feed(&mut b, launch(0));
        b.begin_source(1);
        // The next file goes on with rank 1 of the restarted run.
        feed(&mut b, launch(1));
        // Profiling a second step repeats `Before pipeline` without setup: the same run.
        b.line(pipe(1, 0, "Before pipeline", "1.00").as_bytes());
        let r = b.finish(vec!["a.log".to_owned(), "b.log".to_owned()]);
        let runs: Vec<_> = r
            .runs
            .iter()
            .map(|run| {
                (
                    run.name.as_str(),
                    run.sources.len(),
                    run.ranks.len(),
                    run.training.is_some(),
                )
            })
            .collect();
        assert_eq!(
            runs,
            [
                ("a.log, launch 1", 1, 2, true),
                ("a.log + b.log, launch 2", 2, 2, false)
            ]
        );
        assert_eq!(r.runs[1].ranks[1].pipeline.len(), 3);
        assert_eq!(r.stats.memory_lines, 17);
        assert_eq!(
            r.runs.iter().map(|run| run.stats.memory_lines).sum::<u64>(),
            17
        );
    }

    #[test]
    fn ranks_are_compared_one_by_one_and_a_different_count_is_not_the_same() {
        let text = [launch(0), launch(1)].concat().join("\n");
        let ranks = build(&text).ranks;
        assert_eq!(ranks.len(), 2);
        assert!(same_ranks(&ranks, &ranks.clone()));
        assert!(!same_ranks(&ranks, &ranks[..1]));
        assert!(!same_ranks(&ranks[..1], &ranks[1..]));
        assert!(same_ranks(&[], &[]));
    }

    #[test]
    fn step_lines_another_file_repeats_are_counted_once_and_said() {
        let steps = "2026-12-01 22:17:50 | INFO | step 00000001/00000002 | step-time 9.000 sec | peak-gpu-memory 1.00 GB\n\
                     2026-12-01 22:17:51 | INFO | step 00000002/00000002 | step-time 1.000 sec | peak-gpu-memory 2.00 GB";
        let mut b = ReportBuilder::new(None);
        b.begin_source(0);
        for line in launch(0) {
            b.line(line.as_bytes());
        }
        for line in steps.lines() {
            b.line(line.as_bytes());
        }
        b.begin_source(1);
        for line in launch(1) {
            b.line(line.as_bytes());
        }
        b.begin_source(2);
        for line in steps.lines() {
            b.line(line.as_bytes());
        }
        let r = b.finish(["a.log", "b.log", "c.log"].map(String::from).into());
        assert_eq!(r.runs.len(), 1);
        let t = r.runs[0].training.as_ref().unwrap();
        assert_eq!((t.steps_logged, t.peak_gpu_memory), (2, Some(2 * G)));
        assert_eq!(
            (t.first_logged_at.as_deref(), t.last_logged_at.as_deref()),
            (Some("2026-12-01 22:17:50"), Some("2026-12-01 22:17:51"))
        );
        assert_eq!(r.runs[0].sources, ["a.log", "b.log"]);
        assert_eq!(r.runs[0].name, "a.log + b.log");
        let rep = &r.repeated[0];
        assert_eq!(
            (rep.path.as_str(), rep.repeats.as_str(), rep.steps),
            ("c.log", "a.log + b.log", 2)
        );
    }

    #[test]
    fn the_step_peak_names_its_first_step() {
        let r = build(
            "t | INFO | step 00000001/00000003 | peak-gpu-memory 0.18 GB\n\
             t | INFO | step 00000002/00000003 | peak-gpu-memory 0.21 GB\n\
             t | INFO | step 00000003/00000003 | peak-gpu-memory 0.21 GB",
        );
        let t = r.training.unwrap();
        assert_eq!((t.peak_step, t.first_step), (Some(2), 1));
    }

    /// One profiled step of rank 0: `Before pipeline` at 1 GiB, a probe and a saved-tensor
    /// group, a peak at `peak` GiB, then `After Step8` at 1 GiB.
    fn pass(peak: &str, probe: &str) -> Vec<String> {
        vec![
            pipe(0, 0, "Before pipeline", "1.00"),
            format!("[rank=0]   layer0 after stage1 (forward_stage1): alloc={probe}"),
            "[rank=0] layer0 stage1 saved tensors:".to_owned(),
            "[rank=0]     saved (activ): (512,) torch.float32 (0.0 MB, 2048 bytes)".to_owned(),
            "[rank=0]   activ=0.0 MB (2048 bytes), weight=0.0 MB (0 bytes), total=1 tensors"
                .to_owned(),
            pipe(0, 0, "Step4 i=0", peak),
            pipe(0, 0, "After Step8 (end of pipeline)", "1.00"),
        ]
    }

    #[test]
    fn every_pass_is_summarised_and_the_first_highest_and_last_are_kept_in_detail() {
        let mut lines = Vec::new();
        for (peak, probe) in [
            ("2.00", "1.10"),
            ("4.00", "1.20"),
            ("3.00", "1.30"),
            ("3.00", "1.40"),
        ] {
            lines.extend(pass(peak, probe));
        }
        // A malformed detail print in pass 2, which is not kept: counted, not read.
        lines.insert(16, "[rank=0]   garbage".to_owned());
        let r = build(&lines.join("\n"));
        let rank = &r.ranks[0];
        let passes: Vec<_> = rank
            .passes
            .iter()
            .map(|p| {
                (
                    p.pass,
                    p.detail,
                    p.pipeline_prints,
                    p.detail_prints,
                    p.peak_allocated,
                )
            })
            .collect();
        assert_eq!(
            passes,
            [
                (0, true, 3, 4, Some(2 * G)),
                (1, true, 3, 4, Some(4 * G)),
                (2, false, 3, 5, Some(3 * G)),
                (3, true, 3, 4, Some(3 * G)),
            ]
        );
        let kept: Vec<u32> = rank.pipeline.iter().map(|e| e.pass).collect();
        assert_eq!(kept, [0, 0, 0, 1, 1, 1, 3, 3, 3]);
        let probes: Vec<_> = rank
            .layers
            .iter()
            .map(|l| (l.pass, l.pipeline_position))
            .collect();
        assert_eq!(probes, [(0, 1), (1, 4), (3, 7)]);
        assert_eq!(
            rank.saved_tensors
                .iter()
                .map(|g| g.pass)
                .collect::<Vec<_>>(),
            [0, 1, 3]
        );
        assert_eq!(rank.peak.as_ref().unwrap().index, 4);
        assert_eq!(rank.unparsed_memory_lines, 0);
        assert_eq!(r.stats.unparsed_memory_lines, 0);
        assert_eq!(r.stats.detail_prints_not_read, 5);
        assert_eq!(r.stats.memory_lines, 29);
        assert_eq!(rank.memory_lines, 29);
    }

    #[test]
    fn a_malformed_detail_print_of_a_kept_pass_is_unparsed_and_the_last_probe_is_the_last_point() {
        let mut lines = pass("2.00", "1.10");
        lines.push("[rank=0]   garbage".to_owned());
        lines.push("[rank=0]   after prolog (embed_tokens): alloc=1.50".to_owned());
        let r = build(&lines.join("\n"));
        let rank = &r.ranks[0];
        assert_eq!(rank.unparsed_memory_lines, 1);
        assert_eq!(r.stats.unparsed_examples, ["[rank=0]   garbage"]);
        assert_eq!(r.stats.detail_prints_not_read, 0);
        let last = rank.last_point.as_ref().unwrap();
        assert_eq!(
            (last.source, last.label.as_str(), last.allocated),
            (PointSource::Layer, "after prolog (embed_tokens)", 3 * G / 2)
        );
    }

    #[test]
    fn the_breakdown_at_a_later_peak_starts_from_that_pass() {
        let mut lines = pass("2.00", "1.10");
        let mut second = pass("4.00", "1.20");
        second[0] = pipe(0, 0, "Before pipeline", "1.50");
        lines.extend(second);
        let r = build(&lines.join("\n"));
        let b = r.ranks[0].breakdown.as_ref().unwrap();
        assert_eq!((b.other_static, b.activations), (3 * G / 2, 5 * G / 2));
    }

    #[test]
    fn shapes_and_tensor_names_are_read_off_labels() {
        assert_eq!(
            split_tensor("after scatter      output_tokens=(4, 2)"),
            Some(("after scatter", "output_tokens", "(4, 2)"))
        );
        assert_eq!(split_tensor("after norm, before lm_head"), None);
        assert_eq!(parse_shape("()"), Some(vec![].into()));
        assert_eq!(parse_shape("(a, 2)"), None);
    }
}
