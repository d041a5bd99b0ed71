//! The scanning engine: finding the lines of a log worth reading, in the manner of ripgrep's
//! `grep-searcher` (a [`Scanner`] hands what it finds to a [`Sink`]). Nothing here knows what a
//! report is: the fold (`crate::fold`) only sees the [`Item`]s.
//!
//! Contract, the same for every [`Scanner`]:
//! - The sink gets, in file order, every *physical* line that holds one of the [`NEEDLES`]
//!   ([`Item::Line`], without its `\n`; a trailing `\r` is still there), and [`ScanCounts`]
//!   counts every line read (a last line without a terminator counts as one).
//! - **Bounded lines:** at most [`LINE_CAP`] bytes of a line are kept; needles past them are not
//!   seen, and the counts say how many lines were cut and how many bytes dropped.
//! - With [`Mode::FoldSteps`], every stretch of ASCII step lines without an escape byte between
//!   two items is one [`Item::Steps`] (a stretch may come as several consecutive aggregates,
//!   which fold as one); a line holding `| step ` alone that is not a step line is dropped; a
//!   line that is one plain detail or pipeline print comes read ([`Item::Print`], see
//!   [`lines::pre_read`]); a stretch of such prints may come rank by rank ([`Item::Group`]:
//!   ranks fold independently).
//!
//! The implementations: [`reference::LineByLine`] (one line at a time through `BufRead`, the
//! reference the others are tested against), [`lines::Streamed`] (a ring of chunks scanned on a
//! helper thread), [`lines::Serial`] (the same on the calling thread, for a worker of
//! [`many`]), [`chunked::Chunked`] (a plain file mapped and scanned by chunks on all cores).
//! [`many`] scans many files at once, [`inputs`] opens them (decompressed, binary ones kept
//! out), [`marks`] finds the bytes of print-dense regions 64 at a time.

pub mod chunked;
pub mod inputs;
pub mod lines;
pub mod many;
pub mod mapped;
pub mod marks;
pub mod ordered;
pub mod reference;

use std::fs::File;
use std::io::{self, Read};
use std::sync::Arc;

use memchr::memmem;

use crate::parse::PipelinePoint;
pub use crate::parse::{OOM_NEEDLE, RANK_TAG, STEP_NEEDLE};
use crate::step_and_oom::StepRun;
pub use chunked::Chunked;
pub use lines::{RankGroup, Serial, Streamed};
pub use reference::LineByLine;

/// A line is handed to the sink when it contains any of these.
pub const NEEDLES: [&[u8]; 3] = [RANK_TAG, STEP_NEEDLE, OOM_NEEDLE];
/// The bit of [`STEP_NEEDLE`] in a [`Needles`] set.
pub(crate) const STEP_BIT: Needles = 1 << 1;
/// The bit of [`RANK_TAG`] in a [`Needles`] set.
pub(crate) const RANK_BIT: Needles = 1;
/// The bit of [`OOM_NEEDLE`] in a [`Needles`] set.
pub(crate) const OOM_BIT: Needles = 1 << 2;

/// The most bytes of one line that are kept; the rest of a longer line is counted and skipped.
pub const LINE_CAP: usize = 64 * 1024;

/// The size of one chunk read and scanned at a time.
pub(crate) const CHUNK: usize = 1 << 20;

/// Bit `k` of a [`Needles`] set says the line holds `NEEDLES[k]`.
pub type Needles = u8;

/// What a [`Sink`] gets, in file order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item<'a> {
    /// A line holding the needles of the set (at most its first [`LINE_CAP`] bytes).
    Line(&'a [u8], Needles),
    /// Consecutive step lines, folded ([`Mode::FoldSteps`] only).
    Steps(&'a StepRun),
    /// A line that is one memory print and nothing else of note, read on the scanning thread
    /// ([`Mode::FoldSteps`] only; see [`lines::pre_read`]).
    Print(PreRead<'a>),
    /// The prints of one rank in a chunk whose every hit is an [`Item::Print`], in file order
    /// (see [`RankGroup`]).
    Group(RankGroup<'a>),
}

/// What the scanning thread read of a print line ([`lines::pre_read`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PreRead<'a> {
    /// A detail print of `rank` ([`crate::parse::detail_rank`]), from its tag to the line's end,
    /// and its offset in the file when the file is mapped ([`Chunked`]).
    Detail(u32, &'a [u8], Option<usize>),
    /// A pipeline print, parsed.
    Pipeline(u32, u32, PipelinePoint),
}

/// Whether step lines and prints reach the sink as lines or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every line holding a needle is an [`Item::Line`].
    EveryLine,
    /// Step lines the scanner can read itself come as [`Item::Steps`], and plain print lines
    /// as [`Item::Print`].
    FoldSteps,
}

/// What a scan counted besides the lines it handed over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScanCounts {
    /// Lines read (a cut-off last line counts as one).
    pub lines: u64,
    /// Lines longer than [`LINE_CAP`], cut to it.
    pub long_lines: u64,
    /// Bytes dropped from those lines.
    pub cut_bytes: u64,
}

impl ScanCounts {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: ScanCounts) {
        self.lines += other.lines;
        self.long_lines += other.long_lines;
        self.cut_bytes += other.cut_bytes;
    }
}

/// The needles `raw` (one physical line, as read) holds: what the scanner finds in it, so a
/// needle that only ANSI stripping would make (`[ran\x1b[0mk=`) is none.
pub fn needles(raw: &[u8]) -> Needles {
    let finders = NEEDLES.map(memmem::Finder::new);
    needles_in(raw, &finders)
}

/// The needles `line` holds.
pub(crate) fn needles_in(line: &[u8], finders: &[memmem::Finder<'_>; 3]) -> Needles {
    (0..NEEDLES.len())
        .filter(|&k| finders[k].find(line).is_some())
        .fold(0, |set, k| set | 1 << k)
}

/// Receives what a [`Scanner`] found, in file order.
pub trait Sink {
    /// One item.
    fn item(&mut self, item: Item<'_>);

    /// The bytes that the offsets of [`PreRead::Detail`] point into, given before the first
    /// item by a scanner whose input stays readable (a mapped file). Ignored by default.
    fn backing(&mut self, _bytes: Backing) {}
}

impl<F: FnMut(Item<'_>)> Sink for F {
    fn item(&mut self, item: Item<'_>) {
        self(item)
    }
}

/// An input's bytes that stay readable after the scan (see [`Sink::backing`]).
pub type Backing = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// What a scanner reads.
pub enum Input<'a> {
    /// A stream, such as a log decompressed as it is read.
    Reader(&'a mut dyn Read),
    /// A plain file, which a scanner may map (`name` goes into the message of a bus error).
    File(&'a File, &'a str),
}

impl Input<'_> {
    /// The input as a stream (a file is read from where its cursor is).
    pub fn reader(&mut self) -> &mut dyn Read {
        match self {
            Input::Reader(reader) => *reader,
            Input::File(file, _) => file,
        }
    }
}

/// Finds the items of one input and hands them to a sink (see the module doc for the contract
/// every implementation keeps).
pub trait Scanner {
    /// Scans `input` to its end in `mode`, calls `sink` on the calling thread with each item
    /// in file order, and returns what it counted.
    fn scan(&self, input: Input<'_>, mode: Mode, sink: &mut dyn Sink) -> io::Result<ScanCounts>;
}
