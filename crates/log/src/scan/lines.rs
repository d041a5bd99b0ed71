//! The streamed engine: any [`Read`] scanned by 1 MiB chunks (the contract is the module's, see
//! [`super`]).
//!
//! - Lines without a needle are only counted: the scan is memchr over whole chunks, the way grep
//!   works (one `memchr3` pass for a rare byte of each needle, every probe checked), so its cost
//!   barely depends on how much noise the log holds. Where those bytes turn out common the rest
//!   of the region goes another way: where nearly every line holds a needle (memory profiling
//!   left on at every step), one walk over the region's [`super::marks`] (line ends, `[`,
//!   escape bytes, the step and OOM probe bytes, found 64 at a time) that also counts the lines;
//!   else one memmem pass per needle. Step lines are read with
//!   [`step_and_oom::parse_step_ascii`] on the scanning thread.
//! - [`Streamed`] ([`scan`]): the calling thread reads and calls the sink; one scoped helper
//!   thread counts lines, finds needles and folds step lines in the chunks already read, so the
//!   kernel's read copy overlaps the scan (on a page-cached log the read is what grep spends its
//!   time on). The sink therefore needs no `Send`, and neither does the reader. [`Serial`]
//!   ([`scan_serial`]) does the same on the calling thread alone, for callers that read many
//!   files on all cores.
//! - The result does not depend on where chunks or reads happen to split the input.
//! - Memory is a fixed ring of three chunk buffers (1 MiB each) passed back and forth between
//!   the two threads, plus the start of a line carried from one chunk to the next (at most
//!   [`LINE_CAP`] bytes): it does not grow with the input, whatever its lines.

use std::io::{self, Read};
use std::sync::mpsc;
use std::thread;

use memchr::memmem;

use super::{
    CHUNK, Input, Item, LINE_CAP, Mode, NEEDLES, Needles, OOM_BIT, OOM_NEEDLE, PreRead, RANK_BIT,
    RANK_TAG, STEP_BIT, STEP_NEEDLE, ScanCounts, Scanner, Sink, marks, needles_in,
};
use crate::parse::{self, PipelinePoint, rank_finder};
use crate::step_and_oom::{self, StepRun};

/// [`scan`]: a ring of chunks read on the calling thread and scanned on a helper thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Streamed;

impl Scanner for Streamed {
    fn scan(
        &self,
        mut input: Input<'_>,
        mode: Mode,
        sink: &mut dyn Sink,
    ) -> io::Result<ScanCounts> {
        scan(input.reader(), mode, |item| sink.item(item))
    }
}

/// [`scan_serial`]: one chunk at a time on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Serial;

impl Scanner for Serial {
    fn scan(
        &self,
        mut input: Input<'_>,
        mode: Mode,
        sink: &mut dyn Sink,
    ) -> io::Result<ScanCounts> {
        scan_serial(input.reader(), mode, |item| sink.item(item))
    }
}

/// The [`Item::Print`]s of one rank in a chunk that holds nothing else: a chunk where every line
/// is a print (memory profiling left on) is handed over rank by rank, one look-up per rank
/// rather than per print. Ranks fold independently, so this is the fold of the prints in file
/// order; the builder keeps what would show the order across ranks (the unparsed examples)
/// in rank order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankGroup<'a> {
    rank: u32,
    hits: &'a [Hit],
    region: &'a [u8],
    base: Option<usize>,
    points: &'a [PipelinePoint],
}

impl<'a> RankGroup<'a> {
    /// The rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Its prints in the chunk.
    pub fn len(&self) -> usize {
        self.hits.len()
    }

    /// Whether it holds none (never, as handed over).
    pub fn is_empty(&self) -> bool {
        self.hits.is_empty()
    }

    /// Its prints, in file order.
    pub fn prints(&self) -> impl Iterator<Item = PreRead<'a>> + 'a {
        let (region, base, points) = (self.region, self.base, self.points);
        self.hits.iter().filter_map(move |hit| match *hit {
            Hit::Detail { rank, start, end } => Some(PreRead::Detail(
                rank,
                &region[start as usize..end as usize],
                base.map(|b| b + start as usize),
            )),
            Hit::Pipeline { rank, pp, k } => Some(PreRead::Pipeline(rank, pp, points[k as usize])),
            Hit::Line { .. } | Hit::Steps(_) => None,
        })
    }
}

/// Reads `reader` to the end, calls `sink` with each line holding a needle (and, folded, the
/// step lines), and returns what it counted.
///
/// See the module doc for the threads and buffers: `sink` runs on the calling thread.
pub fn scan<R: Read>(
    mut reader: R,
    mode: Mode,
    mut sink: impl FnMut(Item<'_>),
) -> io::Result<ScanCounts> {
    let (work_tx, work_rx) = mpsc::sync_channel::<Batch>(BUFFERS);
    let (done_tx, done_rx) = mpsc::sync_channel::<Batch>(BUFFERS);
    thread::scope(|scope| {
        scope.spawn(move || {
            let finders = NEEDLES.map(memmem::Finder::new);
            for mut batch in work_rx {
                batch.scan(&finders, mode);
                if done_tx.send(batch).is_err() {
                    break;
                }
            }
        });
        let stopped = || io::Error::other("the line scanner stopped");
        let mut counts = ScanCounts::default();
        let mut in_flight = 0;
        let mut fresh = BUFFERS;
        let mut filler = Filler::default();
        loop {
            let mut batch = if fresh > 0 {
                fresh -= 1;
                Batch::new()
            } else {
                let done = done_rx.recv().map_err(|_| stopped())?;
                in_flight -= 1;
                done.finish(&mut counts, &mut sink);
                done
            };
            let at_eof = filler.fill(&mut batch, &mut reader)?;
            if batch.len > 0 {
                in_flight += 1;
                work_tx.send(batch).map_err(|_| stopped())?;
            }
            if at_eof {
                break;
            }
        }
        drop(work_tx);
        for _ in 0..in_flight {
            done_rx
                .recv()
                .map_err(|_| stopped())?
                .finish(&mut counts, &mut sink);
        }
        filler.count(&mut counts);
        Ok(counts)
    })
}

/// What [`scan_serial`] hands over and counts for `bytes`, a whole input held in memory (a
/// mapped file), scanned in place on the calling thread: no chunk is copied out of it, and
/// detail prints come with their offset in it ([`PreRead::Detail`]). For inputs below 4 GiB.
pub fn scan_bytes(bytes: &[u8], mode: Mode, mut sink: impl FnMut(Item<'_>)) -> ScanCounts {
    thread_local! {
        /// The hits of the thread's last scan: a thread that scans file after file reuses
        /// their memory.
        static SPARE: std::cell::Cell<Option<Found>> = const { std::cell::Cell::new(None) };
    }
    let mut counts = ScanCounts::default();
    if bytes.is_empty() {
        return counts;
    }
    let finders = NEEDLES.map(memmem::Finder::new);
    let mut found = SPARE.take().unwrap_or_default();
    found.scan(bytes, true, &finders, mode);
    found.finish(bytes, Some(0), &mut counts, &mut sink);
    SPARE.set(Some(found));
    counts
}

/// [`scan`] on the calling thread alone, with one chunk buffer.
pub fn scan_serial<R: Read>(
    mut reader: R,
    mode: Mode,
    mut sink: impl FnMut(Item<'_>),
) -> io::Result<ScanCounts> {
    thread_local! {
        /// The buffer of the thread's last serial scan: a thread that scans file after file
        /// (see [`super::many`]) zeroes and faults in one chunk, not one per file.
        static SPARE: std::cell::Cell<Option<Batch>> = const { std::cell::Cell::new(None) };
    }
    let finders = NEEDLES.map(memmem::Finder::new);
    let mut counts = ScanCounts::default();
    let mut filler = Filler::default();
    let mut batch = SPARE.take().unwrap_or_else(Batch::new);
    let result = (|| -> io::Result<()> {
        loop {
            let at_eof = filler.fill(&mut batch, &mut reader)?;
            if batch.len > 0 {
                batch.scan(&finders, mode);
                batch.finish(&mut counts, &mut sink);
            }
            if at_eof {
                return Ok(());
            }
        }
    })();
    SPARE.set(Some(batch));
    result?;
    filler.count(&mut counts);
    Ok(counts)
}

/// How many chunk buffers [`scan`] cycles through: one being read, the others being scanned or
/// waiting.
const BUFFERS: usize = 3;

/// The reading side of a scan: the start of a line carried from one chunk to the next, and the
/// rest of a line longer than [`LINE_CAP`] being skipped.
#[derive(Default)]
struct Filler {
    /// Bytes after the last line end of the previous chunk: the start of a line, at most
    /// [`LINE_CAP`] bytes.
    carry: Vec<u8>,
    /// The line in `carry` was cut: bytes are dropped up to the next line end.
    skipping: bool,
    /// Lines cut here (those a chunk holds whole are counted by [`Batch::scan`]).
    long_lines: u64,
    cut_bytes: u64,
}

impl Filler {
    /// Fills `batch` with whole lines: starts its buffer with the carried line start and reads
    /// until it is full or the input ends; keeps the bytes after the last line end for the next
    /// batch (cut to [`LINE_CAP`]). Returns whether the input ended. A batch that holds no line
    /// end yet is filled on; one that is still empty at the end of the input has `len` 0.
    fn fill<R: Read>(&mut self, batch: &mut Batch, reader: &mut R) -> io::Result<bool> {
        loop {
            let at_eof = self.fill_once(batch, reader)?;
            if at_eof || batch.len > 0 {
                return Ok(at_eof);
            }
        }
    }

    fn fill_once<R: Read>(&mut self, batch: &mut Batch, reader: &mut R) -> io::Result<bool> {
        let buf = &mut batch.buf;
        buf[..self.carry.len()].copy_from_slice(&self.carry);
        let mut filled = self.carry.len();
        self.carry.clear();
        let at_eof = loop {
            if filled == buf.len() {
                break false;
            }
            let n = match reader.read(&mut buf[filled..]) {
                Ok(0) => break true,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if !self.skipping {
                filled += n;
                continue;
            }
            match memchr::memchr(b'\n', &buf[filled..filled + n]) {
                None => self.cut_bytes += n as u64,
                Some(p) => {
                    self.cut_bytes += p as u64;
                    buf.copy_within(filled + p..filled + n, filled);
                    filled += n - p;
                    self.skipping = false;
                }
            }
        };
        batch.at_eof = at_eof;
        batch.len = if at_eof {
            filled
        } else {
            memchr::memrchr(b'\n', &buf[..filled]).map_or(0, |p| p + 1)
        };
        let tail = &buf[batch.len..filled];
        if tail.len() > LINE_CAP {
            self.carry.extend_from_slice(&tail[..LINE_CAP]);
            self.cut_bytes += (tail.len() - LINE_CAP) as u64;
            self.long_lines += 1;
            self.skipping = true;
        } else {
            self.carry.extend_from_slice(tail);
        }
        Ok(at_eof)
    }

    fn count(&self, counts: &mut ScanCounts) {
        counts.long_lines += self.long_lines;
        counts.cut_bytes += self.cut_bytes;
    }
}

/// One chunk on its way through [`scan`]: `buf[begin..len]` is whole lines (the last one
/// possibly cut off when `at_eof`); the scanner fills in `found`.
struct Batch {
    buf: Vec<u8>,
    begin: usize,
    len: usize,
    at_eof: bool,
    found: Found,
}

/// What the scan of one region of whole lines found: its counts and its hits, in order.
#[derive(Default)]
pub(super) struct Found {
    /// The region's lines, long lines and cut bytes.
    pub(super) counts: ScanCounts,
    hits: Vec<Hit>,
    /// The step runs of [`Hit::Steps`] and the points of [`Hit::Pipeline`], kept beside the
    /// hits so that a hit stays small.
    steps: Vec<StepRun>,
    points: Vec<PipelinePoint>,
    /// The hits of grouped stretches, rank by rank (in the order the ranks first appear in the
    /// stretch), each rank's in file order.
    grouped: Vec<Hit>,
    /// How the hits are handed over when some are grouped; empty: one by one, in order.
    plan: Vec<Piece>,
    /// Per rank, scratch counts for the grouping (all zero between scans).
    per_rank: Vec<u32>,
}

/// One step of a [`Found`]'s hand-over plan.
#[derive(Debug, Clone, Copy)]
enum Piece {
    /// `hits[k]`.
    Hit(usize),
    /// `grouped[start..end]`, the prints of `rank` in a stretch.
    Group(u32, usize, usize),
}

/// Only prints of ranks below this are grouped.
const GROUPED_RANKS: u32 = 1 << 16;
/// Fewer prints in a row are handed over one by one.
const MIN_GROUP: usize = 64;

/// What [`Found::scan`] found, in file order. Offsets into a region (a chunk and its last
/// line: far below 4 GiB) and indexes are `u32`, so that a hit takes 16 bytes: the fold, on
/// another thread than the scan, reads every one of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Hit {
    /// A line holding a needle: `region[start..end]` without its `\n`, at most [`LINE_CAP`]
    /// long.
    Line {
        start: u32,
        end: u32,
        found: Needles,
    },
    /// Consecutive step lines: `steps[k]`.
    Steps(u32),
    /// A detail print: `region[start..end]`.
    Detail { rank: u32, start: u32, end: u32 },
    /// A pipeline print, parsed: `points[k]`.
    Pipeline { rank: u32, pp: u32, k: u32 },
}

const _: () = assert!(std::mem::size_of::<Hit>() == 16);

/// An offset or index of a [`Hit`].
fn small(n: usize) -> u32 {
    u32::try_from(n).expect("a region below 4 GiB")
}

impl Batch {
    fn new() -> Self {
        Batch {
            buf: vec![0; CHUNK],
            begin: 0,
            len: 0,
            at_eof: false,
            found: Found::default(),
        }
    }

    /// Hands what the scan found to `sink`, in file order, and adds the counts.
    fn finish(&self, counts: &mut ScanCounts, sink: &mut impl FnMut(Item<'_>)) {
        self.found
            .finish(&self.buf[self.begin..self.len], None, counts, sink);
    }

    /// Scans `buf[begin..len]` ([`Found::scan`]).
    fn scan(&mut self, finders: &[memmem::Finder<'_>; 3], mode: Mode) {
        self.found
            .scan(&self.buf[self.begin..self.len], self.at_eof, finders, mode);
    }
}

impl Found {
    /// Hands the hits to `sink` in order (`region` is the one scanned, at `base` in a mapped
    /// file), and adds the counts.
    pub(super) fn finish(
        &self,
        region: &[u8],
        base: Option<usize>,
        counts: &mut ScanCounts,
        sink: &mut impl FnMut(Item<'_>),
    ) {
        counts.add(self.counts);
        if !self.plan.is_empty() {
            for piece in &self.plan {
                match *piece {
                    Piece::Group(rank, start, end) => sink(Item::Group(RankGroup {
                        rank,
                        hits: &self.grouped[start..end],
                        region,
                        base,
                        points: &self.points,
                    })),
                    Piece::Hit(k) => self.hand_over(&self.hits[k], region, base, sink),
                }
            }
            return;
        }
        for hit in &self.hits {
            self.hand_over(hit, region, base, sink);
        }
    }

    /// Hands one hit to `sink`.
    fn hand_over(
        &self,
        hit: &Hit,
        region: &[u8],
        base: Option<usize>,
        sink: &mut impl FnMut(Item<'_>),
    ) {
        match *hit {
            Hit::Line { start, end, found } => {
                sink(Item::Line(&region[start as usize..end as usize], found))
            }
            Hit::Steps(k) => sink(Item::Steps(&self.steps[k as usize])),
            Hit::Detail { rank, start, end } => sink(Item::Print(PreRead::Detail(
                rank,
                &region[start as usize..end as usize],
                base.map(|b| b + start as usize),
            ))),
            Hit::Pipeline { rank, pp, k } => sink(Item::Print(PreRead::Pipeline(
                rank,
                pp,
                self.points[k as usize],
            ))),
        }
    }

    /// Counts the lines of `region` (whole lines from a line start; the last one may lack its
    /// `\n` when `at_eof`) and those longer than [`LINE_CAP`], and collects the lines holding
    /// a needle, folding step lines in [`Mode::FoldSteps`].
    pub(super) fn scan(
        &mut self,
        region: &[u8],
        at_eof: bool,
        finders: &[memmem::Finder<'_>; 3],
        mode: Mode,
    ) {
        let hits = &mut self.hits;
        let (steps, points) = (&mut self.steps, &mut self.points);
        hits.clear();
        steps.clear();
        points.clear();
        let walked = scan_region(region, finders, |start, mut end, mut found, mut shape| {
            if end - start > LINE_CAP {
                end = start + LINE_CAP;
                shape = Shape::Unknown;
                found = needles_in(&region[start..end], finders);
                if found == 0 {
                    return;
                }
            }
            if mode == Mode::FoldSteps && found == STEP_BIT {
                let line = &region[start..end];
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                if line.is_ascii() && memchr::memchr(0x1b, line).is_none() {
                    if let Some(step) = step_and_oom::parse_step_ascii(line) {
                        match hits.last() {
                            // A step number that does not go up is a new launch's
                            // ([`super::runs`]): it starts a stretch of its own.
                            Some(Hit::Steps(_))
                                if steps.last().is_some_and(|r| step.step > r.last_step) =>
                            {
                                steps.last_mut().expect("its run").add(&step)
                            }
                            _ => {
                                hits.push(Hit::Steps(small(steps.len())));
                                steps.push(StepRun::new(step.line()));
                            }
                        }
                    }
                    return;
                }
            }
            if mode == Mode::FoldSteps && found == RANK_BIT {
                let line = &region[start..end];
                let read = match shape {
                    Shape::Unknown => pre_read(line),
                    Shape::OnePrint(at) => pre_read_print(line, at),
                    Shape::Other => None,
                };
                match read {
                    Some(PreRead::Detail(rank, print, _)) => {
                        let at = print.as_ptr() as usize - region.as_ptr() as usize;
                        hits.push(Hit::Detail {
                            rank,
                            start: small(at),
                            end: small(at + print.len()),
                        });
                        return;
                    }
                    Some(PreRead::Pipeline(rank, pp, point)) => {
                        hits.push(Hit::Pipeline {
                            rank,
                            pp,
                            k: small(points.len()),
                        });
                        points.push(point);
                        return;
                    }
                    None => {}
                }
            }
            hits.push(Hit::Line {
                start: small(start),
                end: small(end),
                found,
            });
        });
        // The line ends: those the line walk counted, and the rest by one count.
        let (walked_from, walked) = walked.unwrap_or((region.len(), 0));
        let mut counts = long_lines(region);
        counts.lines = memchr::memchr_iter(b'\n', &region[..walked_from]).count() as u64 + walked;
        if at_eof && region.last().is_some_and(|&b| b != b'\n') {
            counts.lines += 1;
        }
        self.counts = counts;
        self.group_by_rank();
    }

    /// Plans the hand-over ([`Self::plan`]): each stretch of at least [`MIN_GROUP`] prints of
    /// ranks below [`GROUPED_RANKS`] goes rank by rank (a counting sort of the stretch into
    /// `grouped`), every other hit as it is; the plan stays empty when no stretch is grouped.
    fn group_by_rank(&mut self) {
        self.grouped.clear();
        self.plan.clear();
        let rank_of = |hit: &Hit| match *hit {
            Hit::Detail { rank, .. } | Hit::Pipeline { rank, .. } if rank < GROUPED_RANKS => {
                Some(rank)
            }
            _ => None,
        };
        let mut any = false;
        let mut i = 0;
        while i < self.hits.len() {
            let end = self.hits[i..]
                .iter()
                .position(|h| rank_of(h).is_none())
                .map_or(self.hits.len(), |p| i + p);
            if end - i < MIN_GROUP {
                self.plan
                    .extend((i..end.max(i + 1).min(self.hits.len())).map(Piece::Hit));
                i = end.max(i + 1);
                continue;
            }
            any = true;
            let per_rank = &mut self.per_rank;
            let first_piece = self.plan.len();
            for hit in &self.hits[i..end] {
                let rank = rank_of(hit).expect("a print");
                let r = rank as usize;
                if r >= per_rank.len() {
                    per_rank.resize(r + 1, 0);
                }
                if per_rank[r] == 0 {
                    self.plan.push(Piece::Group(rank, 0, 0));
                }
                per_rank[r] += 1;
            }
            // Each rank's start in `grouped`, then its next free slot, kept in `per_rank`.
            let mut at = self.grouped.len();
            for piece in &mut self.plan[first_piece..] {
                if let Piece::Group(rank, start, stop) = piece {
                    let n = per_rank[*rank as usize] as usize;
                    (*start, *stop) = (at, at + n);
                    per_rank[*rank as usize] = at as u32;
                    at += n;
                }
            }
            self.grouped.resize(at, Hit::Steps(0));
            for hit in &self.hits[i..end] {
                let r = rank_of(hit).expect("a print") as usize;
                self.grouped[per_rank[r] as usize] = *hit;
                per_rank[r] += 1;
            }
            for piece in &self.plan[first_piece..] {
                if let Piece::Group(rank, ..) = piece {
                    per_rank[*rank as usize] = 0;
                }
            }
            i = end;
        }
        if !any {
            self.plan.clear();
        }
    }
}

/// Reads a line that holds the rank tag and no other needle when it is one plain print: no
/// escape byte, one tag, and a detail print or a pipeline print that parses. Such a line is
/// what [`crate::parse::clean`] and [`crate::parse::split_prints`] would make one print of; any other comes back `None`,
/// to go to the sink as a line.
pub fn pre_read(line: &[u8]) -> Option<PreRead<'_>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // Most print lines start with the tag.
    let at = if line.starts_with(RANK_TAG) {
        0
    } else {
        rank_finder().find(line)?
    };
    let print = &line[at..];
    // One pass for an escape byte or a second tag.
    if memchr::memchr(0x1b, &line[..at]).is_some()
        || memchr::memchr2_iter(b'[', 0x1b, &print[1..])
            .any(|p| print[1 + p] == 0x1b || print[1 + p..].starts_with(RANK_TAG))
    {
        return None;
    }
    read_print(print)
}

/// [`pre_read`] of a line a walk found to hold one tag, at `at`, and no escape byte.
fn pre_read_print(line: &[u8], at: usize) -> Option<PreRead<'_>> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    read_print(line.get(at..)?)
}

/// The detail print or the pipeline print `print` is, if it is one.
fn read_print(print: &[u8]) -> Option<PreRead<'_>> {
    match parse::tag(print)? {
        (rank, None, body) => {
            parse::is_detail_body(body).then_some(PreRead::Detail(rank, print, None))
        }
        (rank, Some(pp), body) => Some(PreRead::Pipeline(rank, pp, parse::pipeline_body(body)?)),
    }
}

/// The lines of `region` (which starts at a line start) longer than [`LINE_CAP`], and the bytes
/// past the cap. Such a line holds a whole aligned window of `LINE_CAP / 2` bytes without a line
/// end, so only those windows are looked at more closely: one memchr per window otherwise.
fn long_lines(region: &[u8]) -> ScanCounts {
    const WINDOW: usize = LINE_CAP / 2;
    let mut counts = ScanCounts::default();
    let mut at = 0;
    while at + WINDOW <= region.len() {
        if memchr::memchr(b'\n', &region[at..at + WINDOW]).is_some() {
            at += WINDOW;
            continue;
        }
        let start = memchr::memrchr(b'\n', &region[..at]).map_or(0, |p| p + 1);
        let end = memchr::memchr(b'\n', &region[at..]).map_or(region.len(), |p| at + p);
        if end - start > LINE_CAP {
            counts.long_lines += 1;
            counts.cut_bytes += (end - start - LINE_CAP) as u64;
        }
        at = (end + 1).div_ceil(WINDOW) * WINDOW;
    }
    counts
}

/// One byte of each needle, at `PROBES[k].1` in `NEEDLES[k]`, picked for being rare in logs:
/// a single `memchr3` pass finds every place a needle could sit, and each is checked.
/// (memchr's own pick for `[rank=` is `[`, which starts most lines of NCCL and torch noise.)
const PROBES: [(u8, usize); 3] = [(b'=', 5), (b'|', 0), (b'U', 1)];

/// Calls `hit_line` with the bounds and the needles of each line of `region` that holds a
/// needle. `region` ends at a line end (its last byte is `\n`) or at the end of the input.
///
/// One `memchr3` pass over the probe bytes of [`PROBES`] while they stay rare (at most about
/// one false probe per 512 bytes); past that the rest of the region goes through
/// [`scan_region_lines`] or [`scan_region_memmem`], whose cost does not depend on the text.
///
/// Returns the line ends the line walk counted on its way, if it ran: `(from, n)`, `n` line
/// ends in `region[from..]`.
fn scan_region(
    region: &[u8],
    finders: &[memmem::Finder<'_>; 3],
    mut hit_line: impl FnMut(usize, usize, Needles, Shape),
) -> Option<(usize, u64)> {
    // The line being collected: start, end (its `\n` or the region's end), needles so far.
    let mut line: Option<(usize, usize, Needles)> = None;
    let mut misses = 0usize;
    let mut hits = 0usize;
    let [(b0, _), (b1, _), (b2, _)] = PROBES;
    for at in memchr::memchr3_iter(b0, b1, b2, region) {
        if let Some((start, end, found)) = line.take_if(|&mut (_, end, _)| at > end) {
            hit_line(start, end, found, Shape::Unknown);
        }
        let byte = region[at];
        let hit = (0..NEEDLES.len()).find(|&k| {
            let (probe, offset) = PROBES[k];
            byte == probe
                && at
                    .checked_sub(offset)
                    .is_some_and(|s| region[s..].starts_with(NEEDLES[k]))
        });
        let Some(k) = hit else {
            misses += 1;
            if misses > 256 + at / 512 {
                // Too many false probes: hand over at the start of the current line.
                let from = line.map_or_else(
                    || memchr::memrchr(b'\n', &region[..at]).map_or(0, |p| p + 1),
                    |(start, _, _)| start,
                );
                let mut shifted = |s, e, f, shape| hit_line(from + s, from + e, f, shape);
                // A line in fewer than 256 bytes a hit: every line is about to be looked at.
                if hits * 256 > at {
                    return Some((from, scan_region_lines(&region[from..], shifted)));
                }
                scan_region_memmem(&region[from..], finders, &mut shifted);
                return None;
            }
            continue;
        };
        match &mut line {
            Some((_, _, found)) => *found |= 1 << k,
            None => {
                hits += 1;
                let start = memchr::memrchr(b'\n', &region[..at]).map_or(0, |p| p + 1);
                let end = memchr::memchr(b'\n', &region[at..]).map_or(region.len(), |p| at + p);
                line = Some((start, end, 1 << k));
            }
        }
    }
    if let Some((start, end, found)) = line {
        hit_line(start, end, found, Shape::Unknown);
    }
    None
}

/// What a walk over a region saw of a line's prints, for [`pre_read`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Not looked at.
    Unknown,
    /// Exactly one rank tag, at this offset, and no escape byte: one plain print.
    OnePrint(usize),
    /// Several tags or an escape byte: not a plain print.
    Other,
}

/// [`scan_region`] with one memmem pass per needle: slower on the usual log, but its speed
/// does not depend on how often the probe bytes occur.
fn scan_region_memmem(
    region: &[u8],
    finders: &[memmem::Finder<'_>; 3],
    hit_line: &mut dyn FnMut(usize, usize, Needles, Shape),
) {
    let mut next: [Option<usize>; 3] = std::array::from_fn(|k| finders[k].find(region));
    while let Some(hit) = next.iter().flatten().copied().min() {
        let start = memchr::memrchr(b'\n', &region[..hit]).map_or(0, |p| p + 1);
        let end = memchr::memchr(b'\n', &region[hit..]).map_or(region.len(), |p| hit + p);
        let resume = end + 1;
        let found = next.iter().enumerate().fold(0, |set, (k, p)| {
            if p.is_some_and(|p| p < resume) {
                set | 1 << k
            } else {
                set
            }
        });
        hit_line(start, end, found, Shape::Unknown);
        for (k, slot) in next.iter_mut().enumerate() {
            if slot.is_some_and(|p| p < resume) {
                // Where every line is a print, the next tag is most often the next line's
                // first bytes: no search needed.
                let at_next_line = k == 0
                    && region
                        .get(resume..)
                        .is_some_and(|rest| rest.starts_with(RANK_TAG));
                *slot = if at_next_line {
                    Some(resume)
                } else {
                    region
                        .get(resume..)
                        .and_then(|rest| finders[k].find(rest))
                        .map(|p| p + resume)
                };
            }
        }
    }
}

/// [`scan_region`] where nearly every line holds a needle (memory profiling left on): one
/// pass over the region's [`marks`] (line ends, `[`, escape bytes and the step and OOM probe
/// bytes), each mark checked where it sits. Returns the number of line ends in `region`.
fn scan_region_lines(region: &[u8], mut hit_line: impl FnMut(usize, usize, Needles, Shape)) -> u64 {
    let (mut start, mut line_ends) = (0, 0);
    let mut line = LineSeen::default();
    marks::each_mark(region, |at| match region[at] {
        b'\n' => {
            if line.needles() != 0 {
                hit_line(start, at, line.needles(), line.shape());
            }
            (start, line) = (at + 1, LineSeen::default());
            line_ends += 1;
        }
        b'[' if region[at..].starts_with(RANK_TAG) => {
            if line.tags == 0 {
                line.first_tag = at - start;
            }
            line.tags += 1;
        }
        0x1b => line.escape = true,
        b'|' if region[at..].starts_with(STEP_NEEDLE) => line.found |= STEP_BIT,
        // The `U` of `CUDA`, the needle's second byte.
        b'U' if at > 0 && region[at - 1..].starts_with(OOM_NEEDLE) => line.found |= OOM_BIT,
        _ => {}
    });
    if start < region.len() && line.needles() != 0 {
        hit_line(start, region.len(), line.needles(), line.shape());
    }
    line_ends
}

/// What [`scan_region_lines`] saw of the line it is in.
#[derive(Default)]
struct LineSeen {
    /// The step and OOM needles.
    found: Needles,
    /// Rank tags, and the first one's offset in the line.
    tags: u32,
    first_tag: usize,
    /// Whether it holds an escape byte.
    escape: bool,
}

impl LineSeen {
    fn needles(&self) -> Needles {
        self.found | Needles::from(self.tags > 0)
    }

    fn shape(&self) -> Shape {
        if self.tags == 1 && !self.escape {
            Shape::OnePrint(self.first_tag)
        } else {
            Shape::Other
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{clean, split_prints};
    use crate::scan::inputs::open;

    /// [`scan`] with every needle line handed over, as `(line, needles)`; returns the lines read.
    fn scan_lines<R: Read>(reader: R, mut sink: impl FnMut(&[u8], Needles)) -> io::Result<u64> {
        let counts = scan(reader, Mode::EveryLine, |item| match item {
            Item::Line(line, found) => sink(line, found),
            Item::Steps(_) | Item::Print(_) | Item::Group(_) => {
                panic!("no step folding asked for")
            }
        })?;
        Ok(counts.lines)
    }

    fn lines_of(input: &[u8]) -> (Vec<String>, u64) {
        let mut seen = Vec::new();
        let n = scan_lines(input, |l, _| {
            seen.push(String::from_utf8_lossy(l).into_owned())
        })
        .unwrap();
        (seen, n)
    }

    #[test]
    fn only_lines_with_a_needle_reach_the_sink_but_all_are_counted() {
        let (seen, n) =
            lines_of(b"noise\n[rank=0] a\nmore noise\nx | step 00000001/00000002 | y\n");
        assert_eq!(seen, ["[rank=0] a", "x | step 00000001/00000002 | y"]);
        assert_eq!(n, 4);
    }

    #[test]
    fn crlf_lines_keep_their_carriage_return_for_the_caller() {
        let (seen, n) = lines_of(b"[rank=1] a\r\n[rank=2] b\r\n");
        assert_eq!(seen, ["[rank=1] a\r", "[rank=2] b\r"]);
        assert_eq!(n, 2);
    }

    #[test]
    fn a_cut_off_last_line_is_still_passed_and_counted() {
        let (seen, n) = lines_of(b"[rank=0] full\n[rank=0 pp=0] Step1 F0 i=0: 12.3");
        assert_eq!(seen, ["[rank=0] full", "[rank=0 pp=0] Step1 F0 i=0: 12.3"]);
        assert_eq!(n, 2);
    }

    #[test]
    fn empty_input_has_no_lines() {
        assert_eq!(lines_of(b""), (vec![], 0));
    }

    #[test]
    fn a_line_with_several_needles_is_passed_once_with_all_of_them() {
        let mut seen = Vec::new();
        scan_lines(
            &b"[rank=0] x[rank=1] CUDA out of memory\n| step 1\n"[..],
            |l, set| seen.push((l.len(), set)),
        )
        .unwrap();
        assert_eq!(seen, [(37, 0b101), (8, 0b010)]);
    }

    /// A reader that hands out 7 bytes at a time, splitting every line across reads.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(out.len()).min(7);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_line_longer_than_the_cap_is_cut_counted_and_loses_its_late_needles() {
        let long = format!(
            "[rank=2] head{}[rank=3] tail\n[rank=4] next\n{}",
            "x".repeat(3 * CHUNK),
            "y".repeat(LINE_CAP + 5)
        );
        for trickle in [false, true] {
            let mut seen = Vec::new();
            let mut sink = |item: Item<'_>| {
                if let Item::Line(l, found) = item {
                    seen.push((l.len(), found));
                }
            };
            let counts = if trickle {
                scan(Trickle(long.as_bytes()), Mode::FoldSteps, &mut sink)
            } else {
                scan_serial(long.as_bytes(), Mode::FoldSteps, &mut sink)
            }
            .unwrap();
            assert_eq!(seen, [(LINE_CAP, 1), ("[rank=4] next".len(), 1)]);
            let first = "[rank=2] head[rank=3] tail".len() + 3 * CHUNK;
            assert_eq!(
                counts,
                ScanCounts {
                    lines: 3,
                    long_lines: 2,
                    cut_bytes: (first - LINE_CAP + 5) as u64,
                }
            );
        }
    }

    #[test]
    fn a_line_just_over_the_cap_inside_one_chunk_is_cut_like_one_across_chunks() {
        // The same long line inside the first chunk and straddling the first chunk's end.
        for pad in [0, CHUNK - LINE_CAP / 2, CHUNK - LINE_CAP - 8] {
            let padding: String = (0..pad)
                .map(|i| if i % 100 == 99 { '\n' } else { 'p' })
                .collect();
            let input = format!(
                "{padding}\n{}[rank=9] late\n[rank=1] ok\n",
                "z".repeat(LINE_CAP)
            );
            let mut seen = Vec::new();
            let counts = scan(input.as_bytes(), Mode::EveryLine, |item| {
                if let Item::Line(l, _) = item {
                    seen.push(l.to_vec());
                }
            })
            .unwrap();
            assert_eq!(seen, [b"[rank=1] ok".to_vec()], "pad {pad}");
            assert_eq!((counts.long_lines, counts.cut_bytes), (1, 13), "pad {pad}");
        }
    }

    /// What `scan` must report, computed the slow way: split at `\n`, a cut-off tail is a line.
    fn reference(input: &[u8]) -> (Vec<(Vec<u8>, Needles)>, u64) {
        let mut parts: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
        if parts.last().is_some_and(|p| p.is_empty()) {
            parts.pop();
        }
        let hits = parts
            .iter()
            .map(|line| &line[..line.len().min(LINE_CAP)])
            .filter_map(|line| {
                let found = NEEDLES.iter().enumerate().fold(0, |set, (k, n)| {
                    if memmem::find(line, n).is_some() {
                        set | 1 << k
                    } else {
                        set
                    }
                });
                (found != 0).then(|| (line.to_vec(), found))
            })
            .collect();
        (hits, parts.len() as u64)
    }

    /// A reader that hands out at most `step` bytes per call, then fails with `fail` when set.
    struct Steps<'a> {
        rest: &'a [u8],
        step: usize,
        fail: Option<io::ErrorKind>,
    }

    impl Read for Steps<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            if let (true, Some(kind)) = (self.rest.is_empty(), self.fail) {
                return Err(kind.into());
            }
            let n = self.rest.len().min(out.len()).min(self.step);
            out[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    /// A few MiB of noise with needles (some at chunk edges, some several to a line, one line
    /// longer than a chunk), so the scan cycles through every buffer more than once.
    fn many_chunks(cut_off: bool) -> Vec<u8> {
        let mut input = Vec::new();
        let mut i = 0u64;
        while input.len() < 7 * CHUNK {
            i += 1;
            let line = match i % 7 {
                0 => format!("[rank={i} pp=0] Step1 F0 i=0: alloc=1.00 non-pt=3.71\n"),
                1 => format!("{} | step {i:08}/99999999 | loss 1.0\r\n", i % 10),
                2 if i % 5000 == 2 => format!("{}[rank=1] CUDA out of memory\n", "y".repeat(CHUNK)),
                3 if i.is_multiple_of(3) => "[rank=2] a[rank=3] b | step 1\n".to_owned(),
                4 => "\n".to_owned(),
                _ => format!("[W722 10:00:17.000 ProcessGroupNCCL.cpp:4561] rank {i}.\n"),
            };
            input.extend_from_slice(line.as_bytes());
        }
        if cut_off {
            input.extend_from_slice(b"[rank=9 pp=0] cut off mid-wr");
        }
        input
    }

    #[test]
    fn many_chunks_match_a_line_by_line_reference_whatever_the_read_sizes() {
        for cut_off in [false, true] {
            let input = many_chunks(cut_off);
            let want = reference(&input);
            for step in [usize::MAX, CHUNK - 1, 4096 + 3] {
                let mut seen = Vec::new();
                let reader = Steps {
                    rest: &input,
                    step,
                    fail: None,
                };
                let n = scan_lines(reader, |l, set| seen.push((l.to_vec(), set))).unwrap();
                assert_eq!(n, want.1, "lines, step {step}, cut off {cut_off}");
                assert!(
                    seen == want.0,
                    "hits differ, step {step}, cut off {cut_off}"
                );
            }
        }
    }

    #[test]
    fn noise_full_of_probe_bytes_falls_back_without_losing_a_line() {
        let mut input = Vec::new();
        for i in 0..200_000u32 {
            let line = match i % 5 {
                0 => format!("UU||== k=v | a=b [rank={i}] x=y | step {i}\n"),
                1 => "NCCL_ALGO=Ring|Tree UUUU CUDA out of memor CUDA out of memory\n".to_owned(),
                _ => "x=1 y=2 z=3 |U|U|U| w=4 v=5 u=6 ||||\n".to_owned(),
            };
            input.extend_from_slice(line.as_bytes());
        }
        let want = reference(&input);
        let mut seen = Vec::new();
        let n = scan_lines(&input[..], |l, set| seen.push((l.to_vec(), set))).unwrap();
        assert_eq!(n, want.1);
        assert!(seen == want.0, "hits differ");
        // And straight through scan_region, where the switch happens mid-line and mid-region.
        let finders = NEEDLES.map(memmem::Finder::new);
        let mut direct = Vec::new();
        scan_region(&input, &finders, |s, e, f, _| {
            direct.push((input[s..e].to_vec(), f))
        });
        assert!(direct == want.0, "scan_region hits differ");
    }

    /// A region where every line is a print takes the line walk; its needles and its shapes
    /// must be what a plain reading of each line finds, whatever the lines hold.
    #[test]
    fn the_line_walk_of_a_print_dense_region_finds_each_lines_needles_and_prints() {
        let kinds = [
            "[rank=3]     saved (activ): (2, 512) torch.bfloat16 (0.5 MB, 524288 bytes)",
            "[rank=4 pp=1] Step4 i=0: 0.16 GiB | alloc=0.16 cached=0.02 non-pt=1.28",
            "node0: [rank=5]   layer0 after stage1 (forward_stage1): alloc=0.06",
            "[rank=6]   a=1 b=2 [rank=7]   c=3: alloc=0.10",
            "[rank=8]\x1b[0m   colour: alloc=0.10",
            "t | INFO | step 00000001/00000010 | [rank=9] glued: alloc=1.00",
            "no tag here = = = = =",
            "[rank=10]   crlf: alloc=0.20\r",
            "CUDA out of memory [rank=11]   x: alloc=0.30",
        ];
        let mut input = Vec::new();
        for i in 0..9000 {
            input.extend_from_slice(kinds[(i * 7 + i / 5) % kinds.len()].as_bytes());
            input.push(b'\n');
        }
        input.extend_from_slice(b"[rank=1]   last line, no newline: alloc=0.01");
        let want = reference(&input).0;
        let finders = NEEDLES.map(memmem::Finder::new);
        let mut got = Vec::new();
        let mut shapes = Vec::new();
        scan_region(&input, &finders, |s, e, f, shape| {
            got.push((input[s..e].to_vec(), f));
            shapes.push((s, e, shape));
        });
        assert!(got == want, "hits differ");
        assert!(
            shapes.iter().any(|&(_, _, s)| s != Shape::Unknown),
            "the line walk ran"
        );
        for (s, e, shape) in shapes {
            let line = &input[s..e];
            match shape {
                Shape::Unknown => {}
                Shape::OnePrint(at) => {
                    assert_eq!(pre_read_print(line, at), pre_read(line), "{line:?}")
                }
                Shape::Other => assert_eq!(pre_read(line), None, "{line:?}"),
            }
        }
    }

    #[test]
    fn a_read_error_mid_log_is_returned() {
        let input = many_chunks(false);
        let reader = Steps {
            rest: &input,
            step: 100_000,
            fail: Some(io::ErrorKind::InvalidData),
        };
        let err = scan_lines(reader, |_, _| {}).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn an_interrupted_read_is_retried() {
        struct Once<'a>(bool, &'a [u8]);
        impl Read for Once<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                if !std::mem::replace(&mut self.0, true) {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                self.1.read(out)
            }
        }
        let mut seen = 0;
        let n = scan_lines(Once(false, b"[rank=0] a\nb\n"), |_, _| seen += 1).unwrap();
        assert_eq!((n, seen), (2, 1));
    }

    #[test]
    fn prints_that_ran_together_are_split_at_every_rank_tag() {
        let line = b"3: 10:00:01 [rank=1 pp=0] A: alloc=1.00 non-pt=3.71[rank=0 pp=0] B[rank=2]";
        let prints: Vec<&[u8]> = split_prints(line).collect();
        assert_eq!(
            prints,
            [
                &b"[rank=1 pp=0] A: alloc=1.00 non-pt=3.71"[..],
                b"[rank=0 pp=0] B",
                b"[rank=2]"
            ]
        );
    }

    #[test]
    fn a_line_without_a_tag_has_no_prints() {
        assert_eq!(split_prints(b"[rank3]: plain output").count(), 0);
    }

    #[test]
    fn clean_strips_ansi_colours_and_the_carriage_return() {
        let mut scratch = Vec::new();
        let out = clean(
            b"\x1b[32m[rank=0]\x1b[0m   x: alloc=1.00\x1b[K\r",
            &mut scratch,
        );
        assert_eq!(out, b"[rank=0]   x: alloc=1.00");
    }

    #[test]
    fn clean_borrows_lines_without_escapes() {
        let mut scratch = Vec::new();
        assert_eq!(clean(b"[rank=0] a\r", &mut scratch), b"[rank=0] a");
        assert!(scratch.is_empty());
    }

    #[test]
    fn gzip_and_zstd_inputs_are_detected_by_magic_bytes() {
        use std::io::Write;
        let text = b"[rank=0] a\nnoise\n";
        let dir = std::env::temp_dir().join(format!("memprints-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("a.log.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let zst = dir.join("b.bin");
        std::fs::write(&zst, zstd::encode_all(&text[..], 1).unwrap()).unwrap();
        for path in [gz, zst] {
            let mut seen = Vec::new();
            let n = scan_lines(open(&path).unwrap(), |l, _| seen.push(l.to_vec())).unwrap();
            assert_eq!((n, seen), (2, vec![b"[rank=0] a".to_vec()]));
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
