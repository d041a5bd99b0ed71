//! The structure of a `torch.cuda.memory._snapshot()` pickle, decoded compactly from the values
//! [`super::pickle`] reads.
//!
//! Checked against PyTorch's `torch/csrc/cuda/memory_snapshot.cpp` (`_memory_snapshot_pickled`)
//! and `torch/cuda/_memory_viz.py`. The top level is a dict:
//! - `segments`: list of dicts `device, address, total_size, allocated_size, active_size,
//!   requested_size, stream, segment_type ("large"/"small"), segment_pool_id (tuple),
//!   is_expandable, frames, blocks`; each block is `address, size, requested_size, state
//!   ("active_allocated" | "active_pending_free" | "inactive"), frames`. Older snapshots carry
//!   `history: [{addr, real_size, frames}]` on blocks instead of `frames`, and may lack `address`
//!   on blocks (it is then the running sum of sizes from the segment's address, as PyTorch
//!   computes it). A bare list at the top level is read as the segments of the oldest format.
//! - `device_traces`: one list per device of dicts `action, addr, size, stream, time_us, frames`
//!   (an `oom` entry has `device_free` instead of `addr`); extra keys such as `compile_context`
//!   or `user_metadata` are ignored.
//! - `allocator_settings`: a dict kept as `key = repr` text.
//!
//! Frames are `{filename, line, name}` dicts listed innermost first. PyTorch shares one frame
//! dict per distinct frame and one list per distinct traceback, and `pickle.dump` memoizes both,
//! so the reader interns them: a [`Frame`] and a stack (a `[FrameId]`) are stored once in the
//! [`FrameTable`]. Trace-entry and block dicts become records ([`TraceEntry`], 32 bytes) as soon
//! as the reader finishes each one, and a list of consecutive records is kept as its first index
//! and length, so the generic value tree of a 10,000,000-entry trace never exists.
//!
//! # Bounded cost
//! A memo reference costs 8 bytes whatever it points to, and nothing is expanded by reference:
//! PyTorch writes every trace entry, block, segment and trace list once, so one that appears a
//! second time is refused (a 128 KB file repeating one entry 30 million times would otherwise
//! be analysed as 30 million events). Values outside records and frames (segment dicts,
//! settings) are capped at [`MAX_GENERIC_VALUES`], records at [`MAX_RECORDS`], and strings
//! at [`super::pickle::MAX_BYTES`].
//!
//! Within those limits, everything the reader and the builder allocate is charged to a
//! [`Meter`] ([`Snapshot::read_metered`]): records and generic values in batches as their
//! counts pass a mark, strings, frames and stacks as they are interned, the reader's memo and
//! stack as they grow (see [`super::pickle`]). Past the meter's limit the read stops with
//! [`SnapshotError::OverBudget`].

use foldhash::HashMap;
use std::io::Read;
use std::sync::Arc;

use super::budget::Meter;
use super::pickle::{self, Build, PickleError};

/// Index of an interned frame in [`FrameTable::frames`].
pub type FrameId = u32;
/// Index of an interned stack in [`FrameTable::stacks`]; [`EMPTY_STACK`] has no frames.
pub type StackId = u32;
/// The stack of no frames, always present in a [`FrameTable`].
pub const EMPTY_STACK: StackId = 0;
/// Most values kept outside trace entries, blocks and frames (segment dicts, settings, unknown
/// keys); a real snapshot holds a few hundred thousand.
pub const MAX_GENERIC_VALUES: usize = 1 << 24;
/// Most trace entries and blocks (32 bytes each: 1 GiB); PyTorch's default keeps 100,000.
pub const MAX_RECORDS: usize = 1 << 25;
/// Most distinct CUDA streams in one snapshot.
pub const MAX_STREAMS: usize = 1 << 16;

/// One Python or C++ frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The source file as recorded (absolute, or `??` when unknown).
    pub filename: Arc<str>,
    /// The line number (an offset into the library for native frames).
    pub line: i64,
    /// The function.
    pub name: Arc<str>,
}

/// Interned frames and stacks. Stacks list frames innermost first; stack [`EMPTY_STACK`] is
/// always present and empty.
#[derive(Debug)]
pub struct FrameTable {
    /// Every distinct frame, by [`FrameId`].
    pub frames: Vec<Frame>,
    /// Every distinct stack, by [`StackId`]: its frames, innermost first.
    pub stacks: Vec<Box<[FrameId]>>,
}

impl Default for FrameTable {
    fn default() -> Self {
        FrameTable {
            frames: Vec::new(),
            stacks: vec![Box::new([])],
        }
    }
}

impl FrameTable {
    /// The frames of stack `id`, innermost first.
    pub fn stack(&self, id: StackId) -> impl Iterator<Item = &Frame> {
        self.stacks[id as usize]
            .iter()
            .map(|&f| &self.frames[f as usize])
    }
}

/// What a trace entry records, from PyTorch's `TraceEntry::Action`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    /// `alloc`: a block was handed out.
    Alloc,
    /// `free_requested`: the program freed a block (it may wait for its streams).
    FreeRequested,
    /// `free_completed`: the block is back in the allocator's cache.
    FreeCompleted,
    /// `segment_alloc`: the allocator took memory from CUDA (`cudaMalloc`).
    SegmentAlloc,
    /// `segment_free`: the allocator gave memory back to CUDA.
    SegmentFree,
    /// `segment_map`: an expandable segment grew.
    SegmentMap,
    /// `segment_unmap`: an expandable segment shrank.
    SegmentUnmap,
    /// `oom`: an allocation failed.
    Oom,
    /// `snapshot`: the snapshot was taken.
    Snapshot,
    /// An action name this version of memprints does not know; ignored by the analysis.
    Other,
}

/// PyTorch's action names, in [`Action`] order.
const ACTION_NAMES: [&str; 9] = [
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
];

const ACTIONS: [Action; 9] = [
    Action::Alloc,
    Action::FreeRequested,
    Action::FreeCompleted,
    Action::SegmentAlloc,
    Action::SegmentFree,
    Action::SegmentMap,
    Action::SegmentUnmap,
    Action::Oom,
    Action::Snapshot,
];

impl Action {
    /// PyTorch's name of the action (`other` for one memprints does not know).
    pub fn name(self) -> &'static str {
        ACTION_NAMES.get(self as usize).copied().unwrap_or("other")
    }
}

/// One entry of a device trace: 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEntry {
    /// `addr`, or `device_free` (bytes free on the device) for [`Action::Oom`].
    pub addr: u64,
    /// Bytes of the block or segment (of the failed request for [`Action::Oom`]).
    pub size: u64,
    /// 0 when the snapshot predates `time_us`.
    pub time_us: i64,
    /// Where it happened ([`EMPTY_STACK`] when no frames were recorded).
    pub stack: StackId,
    /// The CUDA stream, as an index into [`Snapshot::streams`].
    pub stream: u16,
    /// What happened.
    pub action: Action,
}

/// The state of a block in a segment at snapshot time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockState {
    /// Handed out and in use.
    ActiveAllocated,
    /// Freed by the program, waiting for its streams (`active_pending_free`).
    ActivePendingFree,
    /// Free, cached by the allocator.
    Inactive,
}

/// A block of a segment at snapshot time.
#[derive(Debug, Clone)]
pub struct Block {
    /// Its device address.
    pub address: u64,
    /// Its size, rounded up by the allocator.
    pub size: u64,
    /// The size the program asked for.
    pub requested_size: u64,
    /// In use, pending free, or free.
    pub state: BlockState,
    /// Where it was allocated.
    pub stack: StackId,
}

/// A segment the caching allocator holds at snapshot time: one `cudaMalloc` (or an expandable
/// segment), cut into blocks.
#[derive(Debug, Clone)]
pub struct Segment {
    /// The CUDA device index.
    pub device: i64,
    /// Its device address.
    pub address: u64,
    /// Its size.
    pub total_size: u64,
    /// Bytes in its active allocated blocks.
    pub allocated_size: u64,
    /// Bytes in its active blocks (allocated or pending free).
    pub active_size: u64,
    /// Bytes the program asked for in its blocks.
    pub requested_size: u64,
    /// The CUDA stream it serves.
    pub stream: i64,
    /// `large` or `small` (the allocator's two pools).
    pub segment_type: String,
    /// An expandable segment, grown and shrunk by mapping.
    pub is_expandable: bool,
    /// Where it was allocated.
    pub stack: StackId,
    /// Its blocks, in address order.
    pub blocks: Vec<Block>,
}

/// A whole snapshot.
#[derive(Debug)]
pub struct Snapshot {
    /// The allocator's segments at snapshot time.
    pub segments: Vec<Segment>,
    /// Indexed by device.
    pub device_traces: Vec<Vec<TraceEntry>>,
    /// The distinct CUDA streams of the trace, by [`TraceEntry::stream`]; stream 0 first.
    pub streams: Vec<i64>,
    /// The caching allocator's settings as `(key, repr of the value)`.
    pub allocator_settings: Vec<(String, String)>,
    /// The frames and stacks the other fields point into.
    pub frames: FrameTable,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            segments: Vec::new(),
            device_traces: Vec::new(),
            streams: vec![0],
            allocator_settings: Vec::new(),
            frames: FrameTable::default(),
        }
    }
}

/// Why a pickle is not a readable snapshot. One line each.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The bytes are not a pickle this reader accepts.
    #[error(transparent)]
    Pickle(#[from] PickleError),
    /// A pickle, but not shaped like a memory snapshot.
    #[error("not a PyTorch memory snapshot: {path}: {reason}")]
    Shape {
        /// Where in the value tree (`segments[3].blocks[0]`).
        path: String,
        /// What is wrong there.
        reason: String,
    },
    /// Reading it would pass the [`Meter`]'s limit.
    #[error("stopped {at}")]
    OverBudget {
        /// Where reading stopped (`at MEMOIZE, byte 1234 of the pickle`).
        at: String,
    },
}

/// The reason a builder refusal carries when the meter ran out (the error is rebuilt from
/// [`SnapshotBuilder::over_budget`], so the text is never shown).
const OVER_BUDGET: &str = "over the memory budget";

impl Snapshot {
    /// Reads a snapshot pickle from `input`.
    pub fn read<R: Read>(input: R) -> Result<Snapshot, SnapshotError> {
        Snapshot::read_sized(input, 0)
    }

    /// Reads a snapshot pickle of about `pickle_bytes` bytes (0: unknown), reserving room for
    /// its records up front so that a large trace is never copied while it grows.
    pub fn read_sized<R: Read>(input: R, pickle_bytes: u64) -> Result<Snapshot, SnapshotError> {
        Snapshot::read_metered(input, pickle_bytes, &mut Meter::unlimited())
    }

    /// [`Snapshot::read_sized`], charging what it allocates to `meter`:
    /// [`SnapshotError::OverBudget`] once that passes the meter's limit.
    pub fn read_metered<R: Read>(
        input: R,
        pickle_bytes: u64,
        meter: &mut Meter,
    ) -> Result<Snapshot, SnapshotError> {
        let mut builder = SnapshotBuilder::new(*meter);
        // A trace entry takes at least ~40 bytes of pickle (address, size, time, memo refs).
        let entries = usize::try_from(pickle_bytes / 40).unwrap_or(0).min(1 << 28);
        // Only a hint, and only address space until written (records are charged as they
        // come): a refused reservation just means the records grow as they come.
        let _ = builder.traces.try_reserve_exact(entries);
        let read = pickle::read(input, &mut builder);
        let read = match read {
            Ok(root) => builder.take_snapshot(root),
            Err(e) => Err(e.into()),
        };
        *meter = builder.meter;
        match read {
            Err(e) if builder.over_budget => Err(SnapshotError::OverBudget {
                at: match e {
                    SnapshotError::Pickle(
                        PickleError::Limit { opcode, offset, .. }
                        | PickleError::Malformed { opcode, offset, .. },
                    ) => format!("at {opcode}, byte {offset} of the pickle"),
                    _ => "while assembling the snapshot from the pickle's values".into(),
                },
            }),
            read => read,
        }
    }
}

/// A compact pickle value: 8 bytes, `Copy`, strings interned. The low 4 bits are a [`Tag`];
/// the rest is an int (60-bit two's complement) or an index into one of the builder's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Val(u64);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Tag {
    None,
    False,
    True,
    /// Inline int.
    Int,
    /// An int outside 60 bits: index into `SnapshotBuilder::wide`.
    Wide,
    /// Index into `SnapshotBuilder::floats`.
    Float,
    Str,
    Bytes,
    EmptyList,
    /// Index into `SnapshotBuilder::lists`.
    List,
    /// Index into `SnapshotBuilder::dicts`.
    Dict,
    Frame,
    Stack,
    Trace,
    Block,
}

const TAGS: [Tag; 15] = [
    Tag::None,
    Tag::False,
    Tag::True,
    Tag::Int,
    Tag::Wide,
    Tag::Float,
    Tag::Str,
    Tag::Bytes,
    Tag::EmptyList,
    Tag::List,
    Tag::Dict,
    Tag::Frame,
    Tag::Stack,
    Tag::Trace,
    Tag::Block,
];

impl Val {
    const NONE: Val = Val(Tag::None as u64);

    #[inline(always)]
    fn of(tag: Tag, id: u32) -> Val {
        Val(u64::from(id) << 4 | tag as u64)
    }

    #[inline(always)]
    fn tag(self) -> Tag {
        TAGS.get((self.0 & 0xf) as usize)
            .copied()
            .unwrap_or(Tag::None)
    }

    #[inline(always)]
    fn id(self) -> u32 {
        (self.0 >> 4) as u32
    }

    /// The inline int, when it is one.
    #[inline(always)]
    fn small_int(self) -> Option<i64> {
        self.is(Tag::Int).then_some(self.0 as i64 >> 4)
    }

    #[inline(always)]
    fn is(self, tag: Tag) -> bool {
        self.0 & 0xf == tag as u64
    }
}

/// An open list: a run of consecutive records is two numbers, frames are ids.
enum ListAcc {
    Empty,
    Run { kind: Tag, first: u32, len: u32 },
    Frames(Vec<FrameId>),
    Vals(Vec<Val>),
}

/// A finished list in `SnapshotBuilder::lists`.
enum ListBody {
    /// Records `first..first + len` of kind `Tag::Trace` or `Tag::Block`.
    Run {
        kind: Tag,
        first: u32,
        len: u32,
    },
    Vals(Vec<Val>),
}

/// Key ids the builder compares against: the first [`KEY_COUNT`] strings interned, so that
/// [`Fields`] can find them all in one pass over a dict.
mod key {
    pub const ACTION: u32 = 0;
    pub const ADDR: u32 = 1;
    pub const DEVICE_FREE: u32 = 2;
    pub const SIZE: u32 = 3;
    pub const STREAM: u32 = 4;
    pub const TIME_US: u32 = 5;
    pub const FRAMES: u32 = 6;
    pub const FILENAME: u32 = 7;
    pub const LINE: u32 = 8;
    pub const NAME: u32 = 9;
    pub const ADDRESS: u32 = 10;
    pub const REQUESTED_SIZE: u32 = 11;
    pub const STATE: u32 = 12;
    pub const HISTORY: u32 = 13;
    /// In this order, interned first.
    pub const NAMES: [&str; super::KEY_COUNT] = [
        "action",
        "addr",
        "device_free",
        "size",
        "stream",
        "time_us",
        "frames",
        "filename",
        "line",
        "name",
        "address",
        "requested_size",
        "state",
        "history",
    ];
}

const KEY_COUNT: usize = 14;
/// The string id of [`ACTION_NAMES`]`[0]`; the others follow.
const FIRST_ACTION_ID: u32 = KEY_COUNT as u32;
/// The string ids of the block states, after the actions.
const STATE_IDS: u32 = FIRST_ACTION_ID + ACTION_NAMES.len() as u32;
const STATE_NAMES: [&str; 4] = [
    "active_allocated",
    "active_pending_free",
    "active_awaiting_free",
    "inactive",
];

/// The value of the first occurrence of each key of [`key`] in a dict, indexed by key id.
/// Plain values with a sentinel keep it 112 bytes, built in place for every dict read.
struct Fields([Val; KEY_COUNT]);

/// Marks a key not in the dict: tag 15 is no [`Tag`].
const ABSENT: Val = Val(0xf);

impl Fields {
    #[inline(always)]
    fn of(items: &[(Val, Val)]) -> Self {
        let mut found = [ABSENT; KEY_COUNT];
        // Last to first, each key overwriting: the first occurrence is written last, without
        // a test of the slot per item.
        for &(k, v) in items.iter().rev() {
            if k.is(Tag::Str)
                && let Some(slot) = found.get_mut(k.id() as usize)
            {
                *slot = v;
            }
        }
        Fields(found)
    }

    #[inline(always)]
    fn get(&self, key: u32) -> Option<Val> {
        let v = self.0[key as usize];
        (v != ABSENT).then_some(v)
    }
}

/// A block as read: the address and requested size may be missing (older snapshots).
struct RawBlock {
    address: Option<u64>,
    size: u64,
    requested_size: Option<u64>,
    state: BlockState,
    stack: StackId,
}

/// A set of record indices, one bit each.
#[derive(Default)]
struct Placed(Vec<u64>);

impl Placed {
    /// Marks `id`; `false` if it was marked already.
    #[inline(always)]
    fn mark(&mut self, id: u32) -> bool {
        let (word, bit) = (id as usize / 64, id % 64);
        if word >= self.0.len() {
            self.grow(word);
        }
        let was = self.0[word] >> bit & 1 == 1;
        self.0[word] |= 1 << bit;
        !was
    }

    /// Room for word `word`: once every 64 records, so kept out of [`Placed::mark`].
    #[cold]
    #[inline(never)]
    fn grow(&mut self, word: usize) {
        self.0.resize(word + 1, 0);
    }
}

enum Wide {
    Int(i64),
    Big(Vec<u8>),
}

struct SnapshotBuilder {
    strings: Vec<Arc<str>>,
    string_ids: HashMap<Arc<str>, u32>,
    frames: FrameTable,
    frame_ids: HashMap<Frame, FrameId>,
    stack_ids: HashMap<Box<[FrameId]>, StackId>,
    traces: Vec<TraceEntry>,
    blocks: Vec<RawBlock>,
    placed_traces: Placed,
    placed_blocks: Placed,
    streams: Vec<i64>,
    wide: Vec<Wide>,
    floats: Vec<f64>,
    lists: Vec<Option<ListBody>>,
    dicts: Vec<Option<Vec<(Val, Val)>>>,
    /// Values held in `lists` and `dicts`, against [`MAX_GENERIC_VALUES`].
    generic: usize,
    /// What has been allocated, against the budget.
    meter: Meter,
    /// The meter ran out: every later charge fails too, and the reader stops at its next test.
    over_budget: bool,
    /// Records and generic values already charged for.
    records_room: usize,
    generic_room: usize,
}

/// Records or generic values charged for at once.
const CHARGE_BATCH: usize = 1 << 16;
/// What interning a string costs besides its bytes: its `Arc`, its slot and its hash entry.
const STRING_OVERHEAD: usize = 80;

impl SnapshotBuilder {
    fn new(meter: Meter) -> Self {
        let mut b = SnapshotBuilder {
            strings: Vec::new(),
            string_ids: HashMap::default(),
            frames: FrameTable::default(),
            frame_ids: HashMap::default(),
            stack_ids: HashMap::default(),
            traces: Vec::new(),
            blocks: Vec::new(),
            placed_traces: Placed::default(),
            placed_blocks: Placed::default(),
            streams: vec![0],
            wide: Vec::new(),
            floats: Vec::new(),
            lists: Vec::new(),
            dicts: Vec::new(),
            generic: 0,
            meter,
            over_budget: false,
            records_room: 0,
            generic_room: 0,
        };
        for name in key::NAMES.iter().chain(&ACTION_NAMES).chain(&STATE_NAMES) {
            b.intern(name);
        }
        debug_assert_eq!(b.strings.len() as u32, STATE_IDS + STATE_NAMES.len() as u32);
        b.stack_ids.insert(Box::new([]), EMPTY_STACK);
        b
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        // A refusal is kept in `over_budget`; the reader stops at its next push.
        let _ = self.spend(s.len() + STRING_OVERHEAD);
        let id = self.strings.len() as u32;
        let rc: Arc<str> = s.into();
        self.strings.push(rc.clone());
        self.string_ids.insert(rc, id);
        id
    }

    fn str_of(&self, v: Val) -> Option<&Arc<str>> {
        v.is(Tag::Str).then(|| &self.strings[v.id() as usize])
    }

    #[inline(always)]
    fn i64_of(&self, v: Val) -> Option<i64> {
        if let Some(i) = v.small_int() {
            return Some(i);
        }
        self.i64_of_other(v)
    }

    #[inline(never)]
    fn i64_of_other(&self, v: Val) -> Option<i64> {
        match v.tag() {
            Tag::Int => v.small_int(),
            Tag::False => Some(0),
            Tag::True => Some(1),
            Tag::Wide => match &self.wide[v.id() as usize] {
                Wide::Int(i) => Some(*i),
                // A stream handle above i64::MAX still identifies the stream.
                Wide::Big(_) => self.u64_of(v).map(|u| u as i64),
            },
            _ => None,
        }
    }

    #[inline(always)]
    fn u64_of(&self, v: Val) -> Option<u64> {
        if let Some(i) = v.small_int() {
            return u64::try_from(i).ok();
        }
        self.u64_of_other(v)
    }

    #[inline(never)]
    fn u64_of_other(&self, v: Val) -> Option<u64> {
        match v.tag() {
            Tag::Wide => match &self.wide[v.id() as usize] {
                Wide::Int(i) => u64::try_from(*i).ok(),
                Wide::Big(bytes) => {
                    let (low, high) = bytes.split_at(8.min(bytes.len()));
                    if high.iter().all(|&b| b == 0) {
                        let mut buf = [0; 8];
                        buf[..low.len()].copy_from_slice(low);
                        Some(u64::from_le_bytes(buf))
                    } else {
                        None
                    }
                }
            },
            _ => self.i64_of(v).and_then(|i| u64::try_from(i).ok()),
        }
    }

    fn field(items: &[(Val, Val)], key: u32) -> Option<Val> {
        items
            .iter()
            .find(|(k, _)| k.is(Tag::Str) && k.id() == key)
            .map(|&(_, v)| v)
    }

    #[inline]
    fn count_generic(&mut self, n: usize) -> Result<(), String> {
        self.generic += n;
        if self.generic > self.generic_room {
            return self.charge_generic();
        }
        Ok(())
    }

    /// Charges generic values up to the next batch past their count, or refuses past
    /// [`MAX_GENERIC_VALUES`].
    #[cold]
    #[inline(never)]
    fn charge_generic(&mut self) -> Result<(), String> {
        if self.generic > MAX_GENERIC_VALUES {
            return Err(format!(
                "more than {MAX_GENERIC_VALUES} values outside trace entries, blocks and frames (a memory snapshot holds far fewer); stopped to keep memory bounded"
            ));
        }
        let room = (self.generic + CHARGE_BATCH).min(MAX_GENERIC_VALUES);
        self.spend((room - self.generic_room) * size_of::<Val>())?;
        self.generic_room = room;
        Ok(())
    }

    /// Makes room for one more record: charges the next batch of them, or refuses past
    /// [`MAX_RECORDS`]. One test per record on the hot path.
    #[inline(always)]
    fn record_room(&mut self) -> Result<(), String> {
        if self.traces.len() + self.blocks.len() >= self.records_room {
            return self.charge_records();
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn charge_records(&mut self) -> Result<(), String> {
        if self.records_room >= MAX_RECORDS {
            return Err(too_many_records());
        }
        let room = (self.records_room + CHARGE_BATCH).min(MAX_RECORDS);
        let record = size_of::<TraceEntry>().max(size_of::<RawBlock>());
        self.spend((room - self.records_room) * record)?;
        self.records_room = room;
        Ok(())
    }

    /// Charges `bytes` to the meter; once it runs out, this and every later charge fail.
    #[inline]
    fn spend(&mut self, bytes: usize) -> Result<(), String> {
        if self.meter.charge(bytes as u64).is_err() {
            self.over_budget = true;
            return Err(OVER_BUDGET.into());
        }
        Ok(())
    }

    fn try_frame(&mut self, fields: &Fields) -> Option<FrameId> {
        let filename = self.str_of(fields.get(key::FILENAME)?)?.clone();
        let name = self.str_of(fields.get(key::NAME)?)?.clone();
        let line = self.i64_of(fields.get(key::LINE)?)?;
        let frame = Frame {
            filename,
            line,
            name,
        };
        if let Some(&id) = self.frame_ids.get(&frame) {
            return Some(id);
        }
        let _ = self.spend(2 * size_of::<Frame>() + 16);
        let id = self.frames.frames.len() as FrameId;
        self.frames.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        Some(id)
    }

    #[inline]
    fn stack_of(&self, v: Val) -> Result<StackId, String> {
        match v.tag() {
            Tag::Stack => Ok(v.id()),
            Tag::EmptyList => Ok(EMPTY_STACK),
            _ => Err("'frames' is not a list of {filename, line, name} dicts".into()),
        }
    }

    fn stream_index(&mut self, stream: i64) -> Result<u16, String> {
        if let Some(i) = self.streams.iter().rposition(|&s| s == stream) {
            return Ok(i as u16);
        }
        if self.streams.len() >= MAX_STREAMS {
            return Err(format!("more than {MAX_STREAMS} distinct CUDA streams"));
        }
        self.streams.push(stream);
        Ok((self.streams.len() - 1) as u16)
    }

    /// Converts the fields of a trace-entry dict; `Err` names what is wrong.
    #[inline]
    fn trace_entry(&mut self, fields: &Fields) -> Result<TraceEntry, String> {
        let action = fields
            .get(key::ACTION)
            .filter(|v| v.is(Tag::Str))
            .ok_or("missing string 'action'")?
            .id();
        let action = match action.checked_sub(FIRST_ACTION_ID) {
            Some(i) if (i as usize) < ACTIONS.len() => ACTIONS[i as usize],
            _ => Action::Other,
        };
        let addr_key = if action == Action::Oom {
            key::DEVICE_FREE
        } else {
            key::ADDR
        };
        let addr = match fields.get(addr_key) {
            Some(v) => self.u64_of(v).ok_or("'addr' is not a non-negative int")?,
            None => 0,
        };
        let size = fields.get(key::SIZE).ok_or("missing 'size'")?;
        let size = self
            .u64_of(size)
            .ok_or("'size' is not a non-negative int")?;
        let stream = match fields.get(key::STREAM).and_then(|v| self.i64_of(v)) {
            None | Some(0) => 0,
            Some(s) => self.stream_index(s)?,
        };
        let time_us = fields
            .get(key::TIME_US)
            .and_then(|v| self.i64_of(v))
            .unwrap_or(0);
        let stack = match fields.get(key::FRAMES) {
            Some(v) => self.stack_of(v)?,
            None => EMPTY_STACK,
        };
        Ok(TraceEntry {
            addr,
            size,
            time_us,
            stack,
            stream,
            action,
        })
    }

    /// A block from its dict, or `None` if the dict is not one.
    fn try_block(&self, fields: &Fields) -> Option<RawBlock> {
        let state = fields.get(key::STATE).filter(|v| v.is(Tag::Str))?.id();
        let state = match state.checked_sub(STATE_IDS)? {
            0 => BlockState::ActiveAllocated,
            1 | 2 => BlockState::ActivePendingFree,
            3 => BlockState::Inactive,
            _ => return None,
        };
        let size = self.u64_of(fields.get(key::SIZE)?)?;
        let mut stack = match fields.get(key::FRAMES) {
            Some(f) => self.stack_of(f).ok()?,
            None => EMPTY_STACK,
        };
        // Older snapshots: the allocation stack is on the last history entry.
        if stack == EMPTY_STACK
            && let Some(history) = fields.get(key::HISTORY).filter(|v| v.is(Tag::List))
            && let Some(Some(ListBody::Vals(entries))) = self.lists.get(history.id() as usize)
            && let Some(last) = entries.last().filter(|v| v.is(Tag::Dict))
            && let Some(Some(items)) = self.dicts.get(last.id() as usize)
            && let Some(f) = Self::field(items, key::FRAMES)
        {
            stack = self.stack_of(f).ok()?;
        }
        Some(RawBlock {
            address: fields.get(key::ADDRESS).and_then(|v| self.u64_of(v)),
            size,
            requested_size: fields.get(key::REQUESTED_SIZE).and_then(|v| self.u64_of(v)),
            state,
            stack,
        })
    }

    /// Marks a record as placed in a list or dict; `Err` when it already was.
    #[inline(always)]
    fn place(&mut self, v: Val) -> Result<(), String> {
        let fresh = match v.tag() {
            Tag::Trace => self.placed_traces.mark(v.id()),
            Tag::Block => self.placed_blocks.mark(v.id()),
            _ => true,
        };
        if fresh { Ok(()) } else { Err(placed_twice(v)) }
    }

    fn take_list(&mut self, v: Val, path: &str) -> Result<ListBody, SnapshotError> {
        match v.tag() {
            Tag::EmptyList => Ok(ListBody::Vals(Vec::new())),
            Tag::List => self.lists[v.id() as usize]
                .take()
                .ok_or_else(|| shared(path)),
            _ => Err(shape(path, "expected a list")),
        }
    }

    fn take_dict(&mut self, v: Val, path: &str) -> Result<Vec<(Val, Val)>, SnapshotError> {
        match v.tag() {
            Tag::Dict => self.dicts[v.id() as usize]
                .take()
                .ok_or_else(|| shared(path)),
            _ => Err(shape(path, "expected a dict")),
        }
    }

    fn take_snapshot(&mut self, root: Val) -> Result<Snapshot, SnapshotError> {
        let mut snapshot = Snapshot::default();
        let top = match root.tag() {
            Tag::Dict => self.take_dict(root, "top level")?,
            Tag::List | Tag::EmptyList => vec![(Val::of(Tag::Str, self.intern("segments")), root)],
            _ => return Err(shape("top level", "expected a dict with 'segments'")),
        };
        let segments_key = self.intern("segments");
        let traces_key = self.intern("device_traces");
        let settings_key = self.intern("allocator_settings");
        let Some(segments) = Self::field(&top, segments_key) else {
            return Err(shape("top level", "no 'segments' key"));
        };
        let ListBody::Vals(segments) = self.take_list(segments, "segments")? else {
            return Err(shape("segments", "expected a list of segment dicts"));
        };
        for (i, seg) in segments.into_iter().enumerate() {
            let path = format!("segments[{i}]");
            let segment = self.segment(seg, &path)?;
            snapshot.segments.push(segment);
        }
        if let Some(traces) = Self::field(&top, traces_key) {
            let ListBody::Vals(devices) = self.take_list(traces, "device_traces")? else {
                return Err(shape("device_traces", "expected a list of lists"));
            };
            for (d, device) in devices.into_iter().enumerate() {
                let path = format!("device_traces[{d}]");
                let entries = self.device_trace(device, &path)?;
                snapshot.device_traces.push(entries);
            }
        }
        if let Some(settings) = Self::field(&top, settings_key).filter(|v| v.is(Tag::Dict)) {
            let settings = self.take_dict(settings, "allocator_settings")?;
            for (k, v) in settings {
                let setting = (self.setting(k)?, self.setting(v)?);
                snapshot.allocator_settings.push(setting);
            }
        }
        snapshot.streams = std::mem::take(&mut self.streams);
        snapshot.frames = std::mem::take(&mut self.frames);
        Ok(snapshot)
    }

    fn device_trace(&mut self, device: Val, path: &str) -> Result<Vec<TraceEntry>, SnapshotError> {
        match self.take_list(device, path)? {
            ListBody::Run {
                kind: Tag::Trace,
                first,
                len,
            } => {
                let (first, len) = (first as usize, len as usize);
                // The usual single-device trace owns every record in order: move, don't copy.
                if first == 0 && len == self.traces.len() {
                    Ok(std::mem::take(&mut self.traces))
                } else {
                    self.spend(len * size_of::<TraceEntry>())
                        .map_err(|_| over_budget_assembling())?;
                    Ok(self.traces[first..first + len].to_vec())
                }
            }
            ListBody::Run { .. } => Err(shape(path, "expected trace entries, found blocks")),
            ListBody::Vals(entries) => {
                self.spend(entries.len() * size_of::<TraceEntry>())
                    .map_err(|_| over_budget_assembling())?;
                let mut out = Vec::with_capacity(entries.len());
                for (i, entry) in entries.into_iter().enumerate() {
                    let at = || format!("{path}[{i}]");
                    out.push(match entry.tag() {
                        Tag::Trace => self.traces[entry.id() as usize],
                        Tag::Dict => {
                            let items = self.take_dict(entry, &at())?;
                            self.trace_entry(&Fields::of(&items))
                                .map_err(|reason| shape(&at(), &reason))?
                        }
                        _ => return Err(shape(&at(), "expected a dict")),
                    });
                }
                Ok(out)
            }
        }
    }

    fn segment(&mut self, v: Val, path: &str) -> Result<Segment, SnapshotError> {
        let items = self.take_dict(v, path)?;
        let get = |b: &Self, key: &str| {
            b.string_ids
                .get(key)
                .and_then(|&id| Self::field(&items, id))
        };
        let uint = |b: &Self, key: &str| -> Result<u64, SnapshotError> {
            match get(b, key) {
                None => Ok(0),
                Some(v) => b
                    .u64_of(v)
                    .ok_or_else(|| shape(path, &format!("'{key}' is not a non-negative int"))),
            }
        };
        let address = uint(self, "address")?;
        let stack = match Self::field(&items, key::FRAMES) {
            Some(f) => self.stack_of(f).map_err(|r| shape(path, &r))?,
            None => EMPTY_STACK,
        };
        let mut segment = Segment {
            device: get(self, "device")
                .and_then(|v| self.i64_of(v))
                .unwrap_or(0),
            address,
            total_size: uint(self, "total_size")?,
            allocated_size: uint(self, "allocated_size")?,
            active_size: uint(self, "active_size")?,
            requested_size: uint(self, "requested_size")?,
            stream: get(self, "stream")
                .and_then(|v| self.i64_of(v))
                .unwrap_or(0),
            segment_type: get(self, "segment_type")
                .and_then(|v| self.str_of(v))
                .map_or_else(String::new, |s| s.to_string()),
            is_expandable: get(self, "is_expandable") == Some(Val(Tag::True as u64)),
            stack,
            blocks: Vec::new(),
        };
        let mut next_address = address;
        if let Some(blocks) = get(self, "blocks") {
            let blocks_path = format!("{path}.blocks");
            let ids: Vec<u32> = match self.take_list(blocks, &blocks_path)? {
                ListBody::Run {
                    kind: Tag::Block,
                    first,
                    len,
                } => (first..first + len).collect(),
                ListBody::Run { .. } => {
                    return Err(shape(&blocks_path, "expected blocks, found trace entries"));
                }
                ListBody::Vals(vals) => {
                    let mut ids = Vec::with_capacity(vals.len());
                    for (i, b) in vals.into_iter().enumerate() {
                        if !b.is(Tag::Block) {
                            return Err(shape(
                                &format!("{blocks_path}[{i}]"),
                                "expected a block dict with 'size' and a known 'state'",
                            ));
                        }
                        ids.push(b.id());
                    }
                    ids
                }
            };
            self.spend(ids.len() * size_of::<Block>() + size_of::<Segment>())
                .map_err(|_| over_budget_assembling())?;
            for id in ids {
                let raw = &self.blocks[id as usize];
                let block = Block {
                    address: raw.address.unwrap_or(next_address),
                    size: raw.size,
                    requested_size: raw.requested_size.unwrap_or(raw.size),
                    state: raw.state,
                    stack: raw.stack,
                };
                next_address = block.address.wrapping_add(block.size);
                segment.blocks.push(block);
            }
        }
        Ok(segment)
    }

    /// [`SnapshotBuilder::repr_into`] within what the meter has left, and charged: memo
    /// references can make a short pickle's setting repeat one long string millions of times.
    fn setting(&mut self, v: Val) -> Result<String, SnapshotError> {
        let room = self.meter.limit().saturating_sub(self.meter.used());
        let mut out = String::new();
        if !self.repr_into(v, &mut out, usize::try_from(room).unwrap_or(usize::MAX))
            || self.spend(out.len()).is_err()
        {
            self.over_budget = true;
            return Err(over_budget_assembling());
        }
        Ok(out)
    }

    /// Writes a short Python-like rendering of a setting's key or value to `out`; `false`,
    /// stopping early, once `out` is longer than `room`.
    fn repr_into(&self, v: Val, out: &mut String, room: usize) -> bool {
        match v.tag() {
            Tag::None => out.push_str("None"),
            Tag::False => out.push_str("False"),
            Tag::True => out.push_str("True"),
            Tag::Int => out.push_str(&v.small_int().unwrap_or(0).to_string()),
            Tag::Wide => match &self.wide[v.id() as usize] {
                Wide::Int(i) => out.push_str(&i.to_string()),
                Wide::Big(_) => out.push_str(
                    &self
                        .u64_of(v)
                        .map_or("<int wider than 64 bits>".into(), |u| u.to_string()),
                ),
            },
            Tag::Float => out.push_str(&self.floats[v.id() as usize].to_string()),
            Tag::Str => out.push_str(&self.strings[v.id() as usize]),
            Tag::Bytes => out.push_str("<bytes>"),
            Tag::EmptyList => out.push_str("[]"),
            Tag::List => match &self.lists[v.id() as usize] {
                Some(ListBody::Vals(items)) => {
                    out.push('[');
                    for (i, &item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        if !self.repr_into(item, out, room) {
                            return false;
                        }
                    }
                    out.push(']');
                }
                _ => out.push_str("<list>"),
            },
            Tag::Dict => match &self.dicts[v.id() as usize] {
                Some(items) => {
                    out.push('{');
                    for (i, &(k, v)) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(", ");
                        }
                        if !self.repr_into(k, out, room) {
                            return false;
                        }
                        out.push_str(": ");
                        if !self.repr_into(v, out, room) {
                            return false;
                        }
                    }
                    out.push('}');
                }
                None => out.push_str("<dict>"),
            },
            Tag::Frame | Tag::Stack | Tag::Trace | Tag::Block => out.push_str("<frames>"),
        }
        out.len() <= room
    }
}

/// The meter ran out after the pickle was read.
fn over_budget_assembling() -> SnapshotError {
    SnapshotError::OverBudget {
        at: "while assembling the snapshot from the pickle's values".into(),
    }
}

fn shape(path: &str, reason: &str) -> SnapshotError {
    SnapshotError::Shape {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

/// Why record `v` cannot be placed again.
#[cold]
#[inline(never)]
fn placed_twice(v: Val) -> String {
    format!(
        "{} {} is referenced a second time: PyTorch writes each once, and a shared one would be expanded in full, so it is refused",
        if v.is(Tag::Trace) {
            "trace entry"
        } else {
            "block"
        },
        v.id()
    )
}

#[cold]
fn too_many_records() -> String {
    format!(
        "more than {MAX_RECORDS} trace entries and blocks (1 GiB of records); stopped to keep memory bounded"
    )
}

fn shared(path: &str) -> SnapshotError {
    shape(
        path,
        "refers to a list or dict already used elsewhere; PyTorch never shares them, and a shared one would be expanded in full, so it is refused",
    )
}

impl Build for SnapshotBuilder {
    type Value = Val;
    type List = ListAcc;
    fn charge(&mut self, bytes: usize) -> Result<(), String> {
        self.spend(bytes)
    }
    #[inline(always)]
    fn over_budget(&self) -> bool {
        self.over_budget
    }
    fn run_value(&self, first: &Val, offset: u32) -> Option<Val> {
        first
            .is(Tag::Trace)
            .then(|| Val::of(Tag::Trace, first.id().wrapping_add(offset)))
    }
    fn none(&mut self) -> Val {
        Val::NONE
    }
    fn bool(&mut self, value: bool) -> Val {
        Val(if value { Tag::True } else { Tag::False } as u64)
    }
    #[inline]
    fn int(&mut self, value: i64) -> Val {
        if (-(1 << 59)..1 << 59).contains(&value) {
            return Val((value << 4) as u64 | Tag::Int as u64);
        }
        let _ = self.spend(size_of::<Wide>());
        self.wide.push(Wide::Int(value));
        Val::of(Tag::Wide, (self.wide.len() - 1) as u32)
    }
    fn big_int(&mut self, le_bytes: &[u8]) -> Val {
        let _ = self.spend(size_of::<Wide>() + le_bytes.len() + 16);
        self.wide.push(Wide::Big(le_bytes.to_vec()));
        Val::of(Tag::Wide, (self.wide.len() - 1) as u32)
    }
    fn float(&mut self, value: f64) -> Val {
        let _ = self.spend(size_of::<f64>());
        self.floats.push(value);
        Val::of(Tag::Float, (self.floats.len() - 1) as u32)
    }
    fn str(&mut self, value: &str) -> Val {
        Val::of(Tag::Str, self.intern(value))
    }
    fn bytes(&mut self, _value: &[u8]) -> Val {
        Val(Tag::Bytes as u64)
    }
    fn new_list(&mut self) -> ListAcc {
        ListAcc::Empty
    }
    #[inline(always)]
    fn push(&mut self, list: &mut ListAcc, item: Val) -> Result<(), String> {
        // A trace's next entry extends its run: inlined where the reader appends entries.
        if let ListAcc::Run { kind, first, len } = list
            && item.is(*kind)
            && item.id() == *first + *len
        {
            self.place(item)?;
            *len += 1;
            return Ok(());
        }
        self.push_other(list, item)
    }
    fn list(&mut self, list: ListAcc, tuple: bool) -> Result<Val, String> {
        self.finish_list(list, tuple)
    }
    #[inline]
    fn dict(&mut self, items: &mut Vec<(Val, Val)>) -> Result<Val, String> {
        self.finish_dict(items)
    }
}

/// The bodies of [`Build`] methods kept out of line, so the reader's hot paths stay small.
impl SnapshotBuilder {
    /// [`Build::push`] of anything but the next record of a run.
    #[inline(never)]
    fn push_other(&mut self, list: &mut ListAcc, item: Val) -> Result<(), String> {
        let tag = item.tag();
        match list {
            ListAcc::Empty if matches!(tag, Tag::Trace | Tag::Block) => {
                self.place(item)?;
                *list = ListAcc::Run {
                    kind: tag,
                    first: item.id(),
                    len: 1,
                };
                return Ok(());
            }
            ListAcc::Empty if tag == Tag::Frame => {
                self.spend(size_of::<FrameId>())?;
                *list = ListAcc::Frames(vec![item.id()]);
                return Ok(());
            }
            ListAcc::Frames(ids) if tag == Tag::Frame => {
                self.spend(size_of::<FrameId>())?;
                ids.push(item.id());
                return Ok(());
            }
            ListAcc::Vals(vals) => {
                self.count_generic(1)?;
                self.place(item)?;
                vals.push(item);
                return Ok(());
            }
            _ => {}
        }
        // A mixed list: spell out what was compact so far.
        let vals: Vec<Val> = match std::mem::replace(list, ListAcc::Empty) {
            ListAcc::Run { kind, first, len } => {
                (first..first + len).map(|id| Val::of(kind, id)).collect()
            }
            ListAcc::Frames(ids) => ids.into_iter().map(|id| Val::of(Tag::Frame, id)).collect(),
            ListAcc::Empty | ListAcc::Vals(_) => Vec::new(),
        };
        self.count_generic(vals.len())?;
        *list = ListAcc::Vals(vals);
        self.push_other(list, item)
    }
    fn finish_list(&mut self, list: ListAcc, _tuple: bool) -> Result<Val, String> {
        let body = match list {
            ListAcc::Empty => return Ok(Val(Tag::EmptyList as u64)),
            ListAcc::Frames(ids) => {
                if let Some(&id) = self.stack_ids.get(ids.as_slice()) {
                    return Ok(Val::of(Tag::Stack, id));
                }
                // Kept twice (the table and its index), each with its box and hash entry.
                self.spend(2 * (ids.len() * size_of::<FrameId>() + 32))?;
                let id = self.frames.stacks.len() as StackId;
                let ids: Box<[FrameId]> = ids.into();
                self.frames.stacks.push(ids.clone());
                self.stack_ids.insert(ids, id);
                return Ok(Val::of(Tag::Stack, id));
            }
            ListAcc::Run { kind, first, len } => ListBody::Run { kind, first, len },
            ListAcc::Vals(vals) => ListBody::Vals(vals),
        };
        self.spend(size_of::<Option<ListBody>>() + 16)?;
        self.lists.push(Some(body));
        Ok(Val::of(Tag::List, (self.lists.len() - 1) as u32))
    }
    /// [`Build::dict`]: a trace entry, a block or a frame becomes a record, anything else is
    /// kept as a generic dict.
    #[inline]
    fn finish_dict(&mut self, items: &mut Vec<(Val, Val)>) -> Result<Val, String> {
        // Scalars read into the dict may have run the meter out (they cannot fail).
        if self.over_budget {
            return Err(OVER_BUDGET.into());
        }
        let fields = Fields::of(items);
        if fields.get(key::ACTION).is_some()
            && let Ok(entry) = self.trace_entry(&fields)
        {
            self.record_room()?;
            self.traces.push(entry);
            return Ok(Val::of(Tag::Trace, (self.traces.len() - 1) as u32));
        }
        if fields.get(key::STATE).is_some()
            && let Some(block) = self.try_block(&fields)
        {
            self.record_room()?;
            self.blocks.push(block);
            return Ok(Val::of(Tag::Block, (self.blocks.len() - 1) as u32));
        }
        if let Some(id) = self.try_frame(&fields) {
            return Ok(Val::of(Tag::Frame, id));
        }
        self.count_generic(items.len() * 2)?;
        self.spend(size_of::<Option<Vec<(Val, Val)>>>() + 16)?;
        for &(_, v) in items.iter() {
            self.place(v)?;
        }
        self.dicts.push(Some(std::mem::take(items)));
        Ok(Val::of(Tag::Dict, (self.dicts.len() - 1) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_8_bytes_and_records_32() {
        assert_eq!(std::mem::size_of::<Val>(), 8);
        assert_eq!(std::mem::size_of::<TraceEntry>(), 32);
    }

    #[test]
    fn ints_convert_when_they_fit() {
        let mut b = SnapshotBuilder::new(Meter::unlimited());
        let v = b.big_int(&[1, 0, 0, 0, 0, 0, 0, 0x80, 0]);
        assert_eq!(b.u64_of(v), Some(0x8000_0000_0000_0001));
        let v = b.big_int(&[0, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(b.u64_of(v), None);
        let v = b.int(-1);
        assert_eq!((b.u64_of(v), b.i64_of(v)), (None, Some(-1)));
        for i in [
            0,
            1 << 59,
            -(1 << 59),
            i64::MAX,
            i64::MIN,
            1_796_094_657_943_293,
        ] {
            let v = b.int(i);
            assert_eq!(b.i64_of(v), Some(i), "{i}");
        }
    }

    #[test]
    fn a_top_level_int_is_not_a_snapshot() {
        let e = Snapshot::read(&b"\x80\x02K\x01."[..]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "not a PyTorch memory snapshot: top level: expected a dict with 'segments'"
        );
    }

    #[test]
    fn a_bare_list_reads_as_old_style_segments() {
        // pickle.dumps([], 2)
        let s = Snapshot::read(&b"\x80\x02]q\x00."[..]).unwrap();
        assert!(s.segments.is_empty() && s.device_traces.is_empty());
    }

    /// 1,500 flat trace entries memoized one after another (the memo keeps them as runs), a
    /// string memoized among them (its chunk is listed again), then a reference to entry 1,200:
    /// the reference finds the right entry, and it is refused as a second use.
    #[test]
    fn memo_runs_resolve_references_in_and_after_them() {
        let mut b =
            b"\x80\x04}\x94(\x8c\x08segments\x94]\x94\x8c\x0ddevice_traces\x94](]\x94".to_vec();
        // Memo so far: 0 top dict, 1 "segments", 2 [], 3 "device_traces", 4 trace list.
        let entry = |b: &mut Vec<u8>, t: u8| {
            b.extend_from_slice(b"}\x94(\x8c\x06action\x8c\x05alloc\x8c\x04size");
            b.extend_from_slice(&[b'K', t, b'u']);
        };
        for chunk in 0..2 {
            b.push(b'(');
            for k in 0..750 {
                entry(&mut b, ((chunk * 750 + k) % 251) as u8);
                if chunk == 1 && k == 100 {
                    b.extend_from_slice(b"\x8c\x01x\x940");
                }
            }
            b.push(b'e');
        }
        // A second device's trace refers to entry 1,200: memoized at 5 + 1,200, plus the
        // string before it.
        let whole = b.len();
        b.extend_from_slice(b"](j");
        b.extend_from_slice(&(5u32 + 1200 + 1).to_le_bytes());
        b.extend_from_slice(b"eeu.");
        let e = Snapshot::read(&b[..]).unwrap_err().to_string();
        assert!(
            e.contains("trace entry 1200 is referenced a second time"),
            "{e}"
        );
        // Without it, the 1,500 entries read in order.
        let mut ok = b[..whole].to_vec();
        ok.extend_from_slice(b"eu.");
        let s = Snapshot::read(&ok[..]).unwrap();
        let sizes: Vec<u64> = s.device_traces[0].iter().map(|e| e.size).collect();
        assert_eq!(sizes.len(), 1500);
        assert!(
            sizes
                .iter()
                .enumerate()
                .all(|(i, &v)| v == (i % 251) as u64)
        );
    }

    /// `{"segments": [], "device_traces": [[e, e]]}` with `e` one trace-entry dict memoized
    /// once and referenced again: refused instead of analysed twice.
    #[test]
    fn a_trace_entry_referenced_twice_is_refused() {
        let bytes = b"\x80\x04}(\x8c\x08segments]\x8c\x0ddevice_traces](](}\x94(\x8c\x06action\x8c\x05alloc\x8c\x04size\x4b\x01uh\x00eeu.";
        let e = Snapshot::read(&bytes[..]).unwrap_err().to_string();
        assert!(
            e.contains("trace entry 0 is referenced a second time"),
            "{e}"
        );
        assert!(
            e.starts_with("pickle exceeds a limit: APPENDS at byte"),
            "{e}"
        );
    }

    /// A trace entry's fields come from the first occurrence of each key, whether the entry
    /// is read by the flat-dict path (`}`, MARK, items, SETITEMS) or the general one (MARK,
    /// items, DICT); widths of `LONG1` from 0 to 8 bytes, negative ones refused alike.
    #[test]
    fn trace_entry_fields_read_alike_on_both_paths() {
        let head = b"\x80\x04}(\x8c\x08segments]\x8c\x0ddevice_traces](](";
        let key = |out: &mut Vec<u8>, name: &str| {
            out.extend_from_slice(&[0x8c, name.len() as u8]);
            out.extend_from_slice(name.as_bytes());
        };
        let long = |out: &mut Vec<u8>, bytes: &[u8]| {
            out.extend_from_slice(&[0x8a, bytes.len() as u8]);
            out.extend_from_slice(bytes);
        };
        let widths: [&[u8]; 6] = [
            &[],
            &[0x05],
            &[0xff, 0x00],
            &[0x01, 0x02, 0x03, 0x04, 0x05],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80],
        ];
        let mut items = Vec::new();
        for (k, addr) in widths.iter().enumerate() {
            let mut entry = Vec::new();
            key(&mut entry, "action");
            key(&mut entry, "alloc");
            key(&mut entry, "addr");
            long(&mut entry, addr);
            key(&mut entry, "size");
            entry.extend_from_slice(&[b'K', k as u8]);
            key(&mut entry, "time_us");
            long(&mut entry, widths[5 - k]);
            // Later duplicates are ignored.
            key(&mut entry, "size");
            entry.extend_from_slice(b"K\xff");
            key(&mut entry, "addr");
            entry.extend_from_slice(b"K\x07");
            items.push(entry);
        }
        let read = |items: &[Vec<u8>], flat: bool| {
            let mut b = head.to_vec();
            for entry in items {
                b.extend_from_slice(if flat { b"}(" } else { b"(" });
                b.extend_from_slice(entry);
                b.push(if flat { b'u' } else { b'd' });
            }
            b.extend_from_slice(b"eeu.");
            Snapshot::read(&b[..]).map_err(|e| e.to_string())
        };
        let (flat, general) = (read(&items, true), read(&items, false));
        // The last address is negative: refused, and alike.
        assert_eq!(
            flat.as_ref().map(|s| s.device_traces.clone()).unwrap_err(),
            general
                .as_ref()
                .map(|s| s.device_traces.clone())
                .unwrap_err()
        );
        items.pop();
        let (flat, general) = (read(&items, true).unwrap(), read(&items, false).unwrap());
        assert_eq!(flat.device_traces, general.device_traces);
        let seen: Vec<(u64, u64, i64)> = flat.device_traces[0]
            .iter()
            .map(|e| (e.addr, e.size, e.time_us))
            .collect();
        assert_eq!(
            seen,
            [
                (0, 0, i64::MIN),
                (5, 1, i64::MAX),
                (255, 2, 0x0504030201),
                (0x0504030201, 3, 255),
                (i64::MAX as u64, 4, 5),
            ]
        );
    }
}
