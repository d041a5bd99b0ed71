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
//! [`FrameTable`]. Trace-entry dicts become 40-byte [`TraceEntry`] records as soon as the reader
//! finishes each one, so the generic value tree of a 1,048,576-entry trace never exists.

use foldhash::HashMap;
use std::io::Read;
use std::rc::Rc;

use super::pickle::{self, Build, PickleError};

/// Index of an interned frame in [`FrameTable::frames`].
pub type FrameId = u32;
/// Index of an interned stack in [`FrameTable::stacks`]; [`EMPTY_STACK`] has no frames.
pub type StackId = u32;
/// The stack of no frames, always present in a [`FrameTable`].
pub const EMPTY_STACK: StackId = 0;

/// One Python or C++ frame.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The source file as recorded (absolute, or `??` when unknown).
    pub filename: Rc<str>,
    /// The line number.
    pub line: i64,
    /// The function.
    pub name: Rc<str>,
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

impl Action {
    fn parse(name: &str) -> Action {
        match name {
            "alloc" => Action::Alloc,
            "free_requested" => Action::FreeRequested,
            "free_completed" => Action::FreeCompleted,
            "segment_alloc" => Action::SegmentAlloc,
            "segment_free" => Action::SegmentFree,
            "segment_map" => Action::SegmentMap,
            "segment_unmap" => Action::SegmentUnmap,
            "oom" => Action::Oom,
            "snapshot" => Action::Snapshot,
            _ => Action::Other,
        }
    }
}

/// One entry of a device trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEntry {
    /// What happened.
    pub action: Action,
    /// `addr`, or `device_free` (bytes free on the device) for [`Action::Oom`].
    pub addr: u64,
    /// Bytes of the block or segment (of the failed request for [`Action::Oom`]).
    pub size: u64,
    /// The CUDA stream.
    pub stream: i64,
    /// 0 when the snapshot predates `time_us`.
    pub time_us: i64,
    /// Where it happened ([`EMPTY_STACK`] when no frames were recorded).
    pub stack: StackId,
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
#[derive(Debug, Default)]
pub struct Snapshot {
    /// The allocator's segments at snapshot time.
    pub segments: Vec<Segment>,
    /// Indexed by device.
    pub device_traces: Vec<Vec<TraceEntry>>,
    /// The allocator's settings as `(key, repr of the value)`.
    pub allocator_settings: Vec<(String, String)>,
    /// The frames and stacks the other fields point into.
    pub frames: FrameTable,
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
}

impl Snapshot {
    /// Reads a snapshot pickle from `input`.
    pub fn read<R: Read>(input: R) -> Result<Snapshot, SnapshotError> {
        let mut builder = SnapshotBuilder::new();
        let root = pickle::read(input, &mut builder)?;
        builder.into_snapshot(root)
    }
}

/// A compact pickle value: 16 bytes, cheap to clone, strings interned.
///
/// `repr(C, u64)` and payloads of 4 or 8 bytes make a `Val` move as two words. With the
/// default layout (payloads at offsets 1, 4 and 8) the compiler copied it in odd-sized,
/// overlapping pieces, which stalls store forwarding on every push and pop of the pickle stack.
#[derive(Debug, Clone)]
#[repr(C, u64)]
enum Val {
    None,
    /// `True` and `False` have no payload: a one-byte payload would make the compiler copy a
    /// `Val` in odd-sized pieces (see above).
    False,
    True,
    Int(i64),
    BigInt(Rc<Vec<u8>>),
    Float(f64),
    Str(u32),
    Bytes,
    List(Rc<Vec<Val>>),
    Dict(Rc<Vec<(Val, Val)>>),
    Frame(FrameId),
    Stack(StackId),
    Trace(u32),
}

impl Val {
    fn as_u64(&self) -> Option<u64> {
        match self {
            Val::Int(i) => u64::try_from(*i).ok(),
            Val::False => Some(0),
            Val::True => Some(1),
            Val::BigInt(bytes) => {
                let (low, high) = bytes.split_at(8.min(bytes.len()));
                if high.iter().all(|&b| b == 0) {
                    let mut buf = [0; 8];
                    buf[..low.len()].copy_from_slice(low);
                    Some(u64::from_le_bytes(buf))
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    fn as_i64(&self) -> Option<i64> {
        match self {
            Val::Int(i) => Some(*i),
            Val::False => Some(0),
            Val::True => Some(1),
            // A stream handle above i64::MAX still identifies the stream.
            Val::BigInt(_) => self.as_u64().map(|u| u as i64),
            _ => None,
        }
    }
}

/// Interned key ids the builder and converters compare against: the first [`KEY_COUNT`]
/// strings interned, so that [`Fields`] can find them all in one pass over a dict.
struct Keys {
    action: u32,
    addr: u32,
    device_free: u32,
    size: u32,
    stream: u32,
    time_us: u32,
    frames: u32,
    filename: u32,
    line: u32,
    name: u32,
}

const KEY_COUNT: usize = 10;

/// The value of the first occurrence of each key of [`Keys`] in a dict, indexed by key id.
struct Fields<'a>([Option<&'a Val>; KEY_COUNT]);

impl<'a> Fields<'a> {
    fn of(items: &'a [(Val, Val)]) -> Self {
        let mut found = [None; KEY_COUNT];
        for (k, v) in items {
            if let Val::Str(id) = k
                && let Some(slot @ None) = found.get_mut(*id as usize)
            {
                *slot = Some(v);
            }
        }
        Fields(found)
    }

    fn get(&self, key: u32) -> Option<&'a Val> {
        self.0[key as usize]
    }
}

struct SnapshotBuilder {
    strings: Vec<Rc<str>>,
    string_ids: HashMap<Rc<str>, u32>,
    frames: FrameTable,
    frame_ids: HashMap<Frame, FrameId>,
    stack_ids: HashMap<Box<[FrameId]>, StackId>,
    traces: Vec<TraceEntry>,
    keys: Keys,
}

impl SnapshotBuilder {
    fn new() -> Self {
        let mut b = SnapshotBuilder {
            strings: Vec::new(),
            string_ids: HashMap::default(),
            frames: FrameTable::default(),
            frame_ids: HashMap::default(),
            stack_ids: HashMap::default(),
            traces: Vec::new(),
            keys: Keys {
                action: 0,
                addr: 0,
                device_free: 0,
                size: 0,
                stream: 0,
                time_us: 0,
                frames: 0,
                filename: 0,
                line: 0,
                name: 0,
            },
        };
        b.keys = Keys {
            action: b.intern("action"),
            addr: b.intern("addr"),
            device_free: b.intern("device_free"),
            size: b.intern("size"),
            stream: b.intern("stream"),
            time_us: b.intern("time_us"),
            frames: b.intern("frames"),
            filename: b.intern("filename"),
            line: b.intern("line"),
            name: b.intern("name"),
        };
        assert_eq!(
            b.keys.name as usize,
            KEY_COUNT - 1,
            "keys are interned first"
        );
        b.stack_ids.insert(Box::new([]), EMPTY_STACK);
        b
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.string_ids.get(s) {
            return id;
        }
        let id = self.strings.len() as u32;
        let rc: Rc<str> = s.into();
        self.strings.push(rc.clone());
        self.string_ids.insert(rc, id);
        id
    }

    fn str_of(&self, v: &Val) -> Option<&Rc<str>> {
        match v {
            Val::Str(id) => Some(&self.strings[*id as usize]),
            _ => None,
        }
    }

    fn field(items: &[(Val, Val)], key: u32) -> Option<&Val> {
        items
            .iter()
            .find(|(k, _)| matches!(k, Val::Str(id) if *id == key))
            .map(|(_, v)| v)
    }

    fn try_frame(&mut self, fields: &Fields) -> Option<FrameId> {
        let filename = self.str_of(fields.get(self.keys.filename)?)?.clone();
        let name = self.str_of(fields.get(self.keys.name)?)?.clone();
        let line = fields.get(self.keys.line)?.as_i64()?;
        let frame = Frame {
            filename,
            line,
            name,
        };
        if let Some(&id) = self.frame_ids.get(&frame) {
            return Some(id);
        }
        let id = self.frames.frames.len() as FrameId;
        self.frames.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        Some(id)
    }

    fn stack_of(&self, v: &Val) -> Result<StackId, String> {
        match v {
            Val::Stack(id) => Ok(*id),
            Val::List(items) if items.is_empty() => Ok(EMPTY_STACK),
            _ => Err("'frames' is not a list of {filename, line, name} dicts".into()),
        }
    }

    /// Converts the fields of a trace-entry dict; `Err` names what is wrong.
    fn trace_entry(&self, fields: &Fields) -> Result<TraceEntry, String> {
        let k = &self.keys;
        let action = fields
            .get(k.action)
            .and_then(|v| self.str_of(v))
            .ok_or("missing string 'action'")?;
        let action = Action::parse(action);
        let addr_key = if action == Action::Oom {
            k.device_free
        } else {
            k.addr
        };
        let addr = match fields.get(addr_key) {
            Some(v) => v.as_u64().ok_or("'addr' is not a non-negative int")?,
            None => 0,
        };
        let size = fields
            .get(k.size)
            .ok_or("missing 'size'")?
            .as_u64()
            .ok_or("'size' is not a non-negative int")?;
        let stream = fields.get(k.stream).and_then(Val::as_i64).unwrap_or(0);
        let time_us = fields.get(k.time_us).and_then(Val::as_i64).unwrap_or(0);
        let stack = match fields.get(k.frames) {
            Some(v) => self.stack_of(v)?,
            None => EMPTY_STACK,
        };
        Ok(TraceEntry {
            action,
            addr,
            size,
            stream,
            time_us,
            stack,
        })
    }

    fn into_snapshot(mut self, root: Val) -> Result<Snapshot, SnapshotError> {
        let mut snapshot = Snapshot::default();
        let top = match &root {
            Val::Dict(items) => items.clone(),
            Val::List(_) => Rc::new(vec![(Val::Str(self.intern("segments")), root.clone())]),
            _ => return Err(shape("top level", "expected a dict with 'segments'")),
        };
        let segments_key = self.intern("segments");
        let traces_key = self.intern("device_traces");
        let settings_key = self.intern("allocator_settings");
        let Some(segments) = Self::field(&top, segments_key) else {
            return Err(shape("top level", "no 'segments' key"));
        };
        for (i, seg) in self.list(segments, "segments")?.iter().enumerate() {
            let path = format!("segments[{i}]");
            snapshot.segments.push(self.segment(seg, &path)?);
        }
        if let Some(traces) = Self::field(&top, traces_key) {
            for (d, device) in self.list(traces, "device_traces")?.iter().enumerate() {
                let path = format!("device_traces[{d}]");
                let entries = self.list(device, &path)?;
                // The usual single-device trace owns every record in order: move, don't copy.
                let whole = entries.len() == self.traces.len()
                    && entries
                        .iter()
                        .enumerate()
                        .all(|(i, e)| matches!(e, Val::Trace(t) if *t as usize == i));
                if whole && !entries.is_empty() {
                    snapshot
                        .device_traces
                        .push(std::mem::take(&mut self.traces));
                    continue;
                }
                let mut out = Vec::with_capacity(entries.len());
                for (i, entry) in entries.iter().enumerate() {
                    out.push(match entry {
                        Val::Trace(t) => self.traces[*t as usize],
                        Val::Dict(items) => self
                            .trace_entry(&Fields::of(items))
                            .map_err(|reason| shape(&format!("{path}[{i}]"), &reason))?,
                        _ => return Err(shape(&format!("{path}[{i}]"), "expected a dict")),
                    });
                }
                snapshot.device_traces.push(out);
            }
        }
        if let Some(Val::Dict(settings)) = Self::field(&top, settings_key) {
            for (k, v) in settings.iter() {
                snapshot
                    .allocator_settings
                    .push((self.repr(k), self.repr(v)));
            }
        }
        self.traces = Vec::new();
        snapshot.frames = self.frames;
        Ok(snapshot)
    }

    fn list<'a>(&self, v: &'a Val, path: &str) -> Result<&'a [Val], SnapshotError> {
        match v {
            Val::List(items) => Ok(items),
            _ => Err(shape(path, "expected a list")),
        }
    }

    fn segment(&self, v: &Val, path: &str) -> Result<Segment, SnapshotError> {
        let Val::Dict(items) = v else {
            return Err(shape(path, "expected a dict"));
        };
        let get = |key: &str| {
            self.string_ids
                .get(key)
                .and_then(|&id| Self::field(items, id))
        };
        let uint = |key: &str| -> Result<u64, SnapshotError> {
            match get(key) {
                None => Ok(0),
                Some(v) => v
                    .as_u64()
                    .ok_or_else(|| shape(path, &format!("'{key}' is not a non-negative int"))),
            }
        };
        let address = uint("address")?;
        let stack = match get("frames") {
            Some(f) => self.stack_of(f).map_err(|r| shape(path, &r))?,
            None => EMPTY_STACK,
        };
        let mut segment = Segment {
            device: get("device").and_then(Val::as_i64).unwrap_or(0),
            address,
            total_size: uint("total_size")?,
            allocated_size: uint("allocated_size")?,
            active_size: uint("active_size")?,
            requested_size: uint("requested_size")?,
            stream: get("stream").and_then(Val::as_i64).unwrap_or(0),
            segment_type: get("segment_type")
                .and_then(|v| self.str_of(v))
                .map_or_else(String::new, |s| s.to_string()),
            is_expandable: matches!(get("is_expandable"), Some(Val::True)),
            stack,
            blocks: Vec::new(),
        };
        let mut next_address = address;
        if let Some(blocks) = get("blocks") {
            for (i, b) in self
                .list(blocks, &format!("{path}.blocks"))?
                .iter()
                .enumerate()
            {
                let block = self.block(b, next_address, &format!("{path}.blocks[{i}]"))?;
                next_address = block.address.wrapping_add(block.size);
                segment.blocks.push(block);
            }
        }
        Ok(segment)
    }

    fn block(&self, v: &Val, default_address: u64, path: &str) -> Result<Block, SnapshotError> {
        let Val::Dict(items) = v else {
            return Err(shape(path, "expected a dict"));
        };
        let get = |key: &str| {
            self.string_ids
                .get(key)
                .and_then(|&id| Self::field(items, id))
        };
        let size = get("size")
            .ok_or_else(|| shape(path, "missing 'size'"))?
            .as_u64()
            .ok_or_else(|| shape(path, "'size' is not a non-negative int"))?;
        let state = match get("state").and_then(|v| self.str_of(v)).map(|s| &**s) {
            Some("active_allocated") => BlockState::ActiveAllocated,
            Some("active_pending_free") | Some("active_awaiting_free") => {
                BlockState::ActivePendingFree
            }
            Some("inactive") => BlockState::Inactive,
            Some(other) => return Err(shape(path, &format!("unknown block state {other:?}"))),
            None => return Err(shape(path, "missing 'state'")),
        };
        let mut stack = match get("frames") {
            Some(f) => self.stack_of(f).map_err(|r| shape(path, &r))?,
            None => EMPTY_STACK,
        };
        // Older snapshots: the allocation stack is on the last history entry.
        if let (EMPTY_STACK, Some(Val::List(history))) = (stack, get("history"))
            && let Some(Val::Dict(last)) = history.last()
            && let Some(f) = Self::field(last, self.keys.frames)
        {
            stack = self.stack_of(f).map_err(|r| shape(path, &r))?;
        }
        Ok(Block {
            address: get("address")
                .and_then(Val::as_u64)
                .unwrap_or(default_address),
            size,
            requested_size: get("requested_size").and_then(Val::as_u64).unwrap_or(size),
            state,
            stack,
        })
    }

    /// A short Python-like rendering of a setting's key or value.
    fn repr(&self, v: &Val) -> String {
        match v {
            Val::None => "None".into(),
            Val::False => "False".into(),
            Val::True => "True".into(),
            Val::Int(i) => i.to_string(),
            Val::BigInt(_) => v
                .as_u64()
                .map_or("<int wider than 64 bits>".into(), |u| u.to_string()),
            Val::Float(f) => f.to_string(),
            Val::Str(id) => self.strings[*id as usize].to_string(),
            Val::Bytes => "<bytes>".into(),
            Val::List(items) => {
                let parts: Vec<_> = items.iter().map(|i| self.repr(i)).collect();
                format!("[{}]", parts.join(", "))
            }
            Val::Dict(items) => {
                let parts: Vec<_> = items
                    .iter()
                    .map(|(k, v)| format!("{}: {}", self.repr(k), self.repr(v)))
                    .collect();
                format!("{{{}}}", parts.join(", "))
            }
            Val::Frame(_) | Val::Stack(_) | Val::Trace(_) => "<frames>".into(),
        }
    }
}

fn shape(path: &str, reason: &str) -> SnapshotError {
    SnapshotError::Shape {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

impl Build for SnapshotBuilder {
    type Value = Val;
    fn none(&mut self) -> Val {
        Val::None
    }
    fn bool(&mut self, value: bool) -> Val {
        if value { Val::True } else { Val::False }
    }
    fn int(&mut self, value: i64) -> Val {
        Val::Int(value)
    }
    fn big_int(&mut self, le_bytes: &[u8]) -> Val {
        Val::BigInt(Rc::new(le_bytes.to_vec()))
    }
    fn float(&mut self, value: f64) -> Val {
        Val::Float(value)
    }
    fn str(&mut self, value: &str) -> Val {
        Val::Str(self.intern(value))
    }
    fn bytes(&mut self, _value: &[u8]) -> Val {
        Val::Bytes
    }
    fn tuple(&mut self, items: Vec<Val>) -> Val {
        self.list(items)
    }
    fn list(&mut self, items: Vec<Val>) -> Val {
        if !items.is_empty() && items.iter().all(|v| matches!(v, Val::Frame(_))) {
            let ids: Vec<FrameId> = items
                .iter()
                .map(|v| match v {
                    Val::Frame(id) => *id,
                    _ => unreachable!("checked above"),
                })
                .collect();
            if let Some(&id) = self.stack_ids.get(ids.as_slice()) {
                return Val::Stack(id);
            }
            let id = self.frames.stacks.len() as StackId;
            let ids: Box<[FrameId]> = ids.into();
            self.frames.stacks.push(ids.clone());
            self.stack_ids.insert(ids, id);
            return Val::Stack(id);
        }
        Val::List(Rc::new(items))
    }
    fn dict(&mut self, items: Vec<(Val, Val)>) -> Val {
        let fields = Fields::of(&items);
        if fields.get(self.keys.action).is_some()
            && let Ok(entry) = self.trace_entry(&fields)
        {
            let id = self.traces.len() as u32;
            self.traces.push(entry);
            return Val::Trace(id);
        }
        if let Some(id) = self.try_frame(&fields) {
            return Val::Frame(id);
        }
        Val::Dict(Rc::new(items))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn val_stays_16_bytes() {
        assert_eq!(std::mem::size_of::<Val>(), 16);
        assert_eq!(std::mem::size_of::<TraceEntry>(), 40);
    }

    #[test]
    fn wide_ints_convert_when_they_fit_u64() {
        let v = Val::BigInt(Rc::new(vec![1, 0, 0, 0, 0, 0, 0, 0x80, 0]));
        assert_eq!(v.as_u64(), Some(0x8000_0000_0000_0001));
        let v = Val::BigInt(Rc::new(vec![0, 0, 0, 0, 0, 0, 0, 0, 1]));
        assert_eq!(v.as_u64(), None);
        assert_eq!(Val::Int(-1).as_u64(), None);
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
}
