//! What held memory: current state, the peak of allocated memory over the trace (with what was
//! active and reserved at that moment), the stacks live at that peak, and OOM events, per device.
//!
//! # Liveness
//! A block is allocated from its `alloc` event to its `free_requested` event (what PyTorch's
//! viewer plots), and active until its `free_completed` (the allocator can reuse it only then).
//! Blocks already allocated when the trace began count from the start: those freed in the trace
//! without an `alloc` before it (their allocation stack is unknown and they group under
//! [`BEFORE_TRACE`]), and those still allocated in `segments` at the end whose address has no
//! event in the trace. An `alloc` on an address that is already live ends the earlier block
//! there (its free fell out of the trace).
//!
//! The peak is the maximum over the trace of the allocated bytes after each event, counting the
//! moment before the first event; ties keep the earliest. With no trace, the peak is what is
//! allocated in `segments`. Reserved bytes at any moment are the segments' total at the end
//! with the later `segment_*` events undone, so they hold even when the trace lost its start.
//!
//! # Fragmentation
//! Free bytes in segments that still hold an active block are *stranded*: the allocator cannot
//! give them back to CUDA. Wholly free segments are listed apart: the allocator releases them
//! (`empty_cache`, and by itself before raising an OOM), so they are cached, not lost.
//!
//! # Grouping
//! Blocks group by their owner ([`owner::classify`], read off the whole stack: cuBLAS's
//! workspace, Triton's autotuning, FSDP's buffers, or the model file) and one frame of their
//! stack ([`key_frame`], the line that asked for them), chosen among the frames PyTorch's own
//! viewer shows ([`is_shown`]: the unwinder, the capture machinery and the interpreter's eval
//! loop are hidden): the innermost frame whose filename contains `pithtrain/`, else the
//! innermost Python frame outside PyTorch and the standard library, else the innermost Python
//! frame (e.g. FSDP's `alloc_storage` for buffers allocated on the autograd thread). A stack
//! with no Python frame ([`NATIVE_ONLY`]) is named by its innermost symbolized frame outside
//! the caching allocator (e.g. `at::cuda::getCurrentCUDABlasHandle()`, seven frames below the
//! unwinder's `torch::unwind::unwind()`, for a cuBLAS workspace allocated on the autograd
//! engine's thread). So a workspace whose first matmul ran in model code is owned by cuBLAS and
//! asked for by that model line, never filed under the line alone.

use foldhash::{HashMap, HashSet};

use schemars::JsonSchema;
use serde::Serialize;

use super::decode::{Action, BlockState, Frame, FrameTable, Snapshot, StackId, TraceEntry};
use super::frames::{is_internal, is_python, short_path};
use super::owner::{self, Kind, OwnerBytes};

/// Group name of blocks freed in the trace whose allocation happened before it began.
pub const BEFORE_TRACE: &str = "<allocated before the trace began>";
/// Group name of blocks recorded without any stack.
pub const NO_STACK: &str = "<no stack recorded>";
/// Prefix of a group whose stack has no Python frame at all (e.g. buffers that FSDP allocates on
/// the autograd engine's thread, or cuBLAS's workspace): its key frame is native code.
pub const NATIVE_ONLY: &str = "<native only, no Python frame>";

/// Bytes live under one owner and key frame.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct StackGroup {
    /// Who owns the blocks, read off their whole stack ([`owner::classify`]): a library's
    /// buffer named by what it is (`cuBLAS/cuBLASLt workspace`, `Triton/Inductor autotuning`,
    /// `FSDP all-gather (unsharded weights)`, …), else the model file that allocated them.
    pub owner: String,
    /// What the owner's bytes are.
    pub kind: Kind,
    /// `path:line function` of the key frame: the model line that asked for the blocks (when
    /// one is on their stack).
    pub frame: String,
    /// Sum of the group's block sizes.
    pub bytes: u64,
    /// Blocks in the group.
    pub count: u64,
    /// The whole stack of the group's largest block, innermost first, as PyTorch's viewer
    /// shows it (frames [`is_shown`] hides are left out).
    pub stack: Vec<String>,
    /// Where the key frame is in `stack` (`None` when the stack is empty).
    pub key_frame: Option<usize>,
}

/// An `oom` entry of a device trace, with the device's state at that moment.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct OomEvent {
    /// Index of the entry in the device trace.
    pub event_index: usize,
    /// Its `time_us`.
    pub time_us: i64,
    /// Its `size`: the allocation that failed.
    pub requested_bytes: u64,
    /// Free bytes on the device that PyTorch recorded with the OOM.
    pub device_free_bytes: u64,
    /// Allocated bytes (see the module doc) at the OOM.
    pub allocated_bytes: u64,
    /// Bytes reserved by the caching allocator at the OOM, replayed back from the segments.
    pub reserved_bytes: u64,
    /// The CUDA stream of the failed allocation.
    pub stream: i64,
}

/// One device's report. Stack lists hold every group, largest first.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceReport {
    /// The CUDA device index.
    pub device: i64,
    /// Entries in this device's trace.
    pub events: usize,
    /// Segments on this device at snapshot time.
    pub segments: usize,
    /// Blocks in those segments.
    pub blocks: usize,
    /// Sum of the segments' `total_size` at snapshot time: what the caching allocator holds.
    pub reserved_bytes: u64,
    /// Sum of the segments' `allocated_size` at snapshot time.
    pub allocated_bytes: u64,
    /// Sum of the segments' `active_size` (allocated plus pending free) at snapshot time.
    pub active_bytes: u64,
    /// Sum of the segments' `requested_size` at snapshot time.
    pub requested_bytes: u64,
    /// Bytes in inactive blocks at snapshot time: cached by the allocator.
    pub free_bytes: u64,
    /// The largest inactive block at snapshot time.
    pub largest_free_block_bytes: u64,
    /// Free bytes in segments that hold an active block (see the module doc).
    pub stranded_free_bytes: u64,
    /// Segments with no active block.
    pub empty_segments: usize,
    /// Their total size: released by the allocator before an OOM.
    pub empty_segment_bytes: u64,
    /// `stranded_free / (reserved - empty_segment_bytes)`: the share of the partly used
    /// segments that is free; 0 without partly used segments.
    pub fragmentation: f64,
    /// The peak of allocated bytes over the trace (see the module doc).
    pub peak_allocated_bytes: u64,
    /// Active bytes (allocated plus freed but not yet reusable) at the peak.
    pub peak_active_bytes: u64,
    /// Reserved bytes at the peak.
    pub peak_reserved_bytes: u64,
    /// `None` when there is no trace.
    pub peak_time_us: Option<i64>,
    /// Index of the event after which the peak was reached; `None` if before the first.
    pub peak_event_index: Option<usize>,
    /// The `time_us` of the first trace event; `None` without a trace or times.
    pub trace_start_us: Option<i64>,
    /// The `time_us` of the last trace event; `None` without a trace or times.
    pub trace_end_us: Option<i64>,
    /// Bytes counted as allocated from the start of the trace.
    pub live_before_trace_bytes: u64,
    /// Groups of the blocks live at the peak.
    pub peak_stacks: Vec<StackGroup>,
    /// Bytes live at the peak per owner, over every group of `peak_stacks` (kept whole when
    /// `peak_stacks` is cut to the top groups), largest first.
    pub peak_owners: Vec<OwnerBytes>,
    /// Groups of the blocks allocated in `segments` (at snapshot time).
    pub end_stacks: Vec<StackGroup>,
    /// The trace's `oom` entries, in trace order.
    pub ooms: Vec<OomEvent>,
}

impl DeviceReport {
    /// Microseconds from the first trace event to the peak, when the trace has times.
    pub fn peak_since_start_us(&self) -> Option<i64> {
        Some(self.peak_time_us?.saturating_sub(self.trace_start_us?))
    }
}

/// Analyses every device that has segments or trace events; the device with the highest peak
/// comes first (then the most events, then the lowest id).
pub fn analyze(snapshot: &Snapshot) -> Vec<DeviceReport> {
    let mut names = FrameNames::new(&snapshot.frames);
    let mut reports: Vec<_> = devices(snapshot)
        .into_iter()
        .map(|d| analyze_device(snapshot, d, &mut names))
        .collect();
    reports.sort_by(|a, b| {
        b.peak_allocated_bytes
            .cmp(&a.peak_allocated_bytes)
            .then(b.events.cmp(&a.events))
            .then(a.device.cmp(&b.device))
    });
    reports
}

/// The devices that have segments or trace events, in id order.
pub fn devices(snapshot: &Snapshot) -> Vec<i64> {
    let mut devices: Vec<i64> = snapshot.segments.iter().map(|s| s.device).collect();
    devices.extend(
        snapshot
            .device_traces
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(d, _)| d as i64),
    );
    devices.sort_unstable();
    devices.dedup();
    devices
}

/// The trace of `device` (empty when it has none).
pub fn device_trace(snapshot: &Snapshot, device: i64) -> &[TraceEntry] {
    usize::try_from(device)
        .ok()
        .and_then(|d| snapshot.device_traces.get(d))
        .map_or(&[], Vec::as_slice)
}

/// `u32::MAX` in an [`Interval`]: before the first event, or after the last.
const NONE: u32 = u32::MAX;

/// A block's life in the trace, as the indices of its events: 8 bytes, one per `alloc` (and
/// per free of a block allocated before the trace). Its size and stack are those of its
/// `alloc` event, or, when `start` is [`NONE`], the size of its free and no stack.
struct Interval {
    start: u32,
    end: u32,
}

impl Interval {
    fn size(&self, events: &[TraceEntry]) -> u64 {
        events[if self.start == NONE {
            self.end
        } else {
            self.start
        } as usize]
            .size
    }

    fn stack(&self, events: &[TraceEntry]) -> Option<StackId> {
        (self.start != NONE).then(|| events[self.start as usize].stack)
    }
}

/// Running sums over a trace, relative to its start.
#[derive(Debug, Clone, Copy, Default)]
struct Running {
    allocated: i128,
    active: i128,
    reserved: i128,
}

fn analyze_device(snapshot: &Snapshot, device: i64, names: &mut FrameNames) -> DeviceReport {
    let events = device_trace(snapshot, device);
    let segments: Vec<_> = snapshot
        .segments
        .iter()
        .filter(|s| s.device == device)
        .collect();
    let blocks = || segments.iter().flat_map(|s| &s.blocks);
    // Without any free_completed (an old or synthetic trace) a free completes at once.
    let completions = events.iter().any(|e| e.action == Action::FreeCompleted);
    // Addresses freed without an alloc in the trace.
    let mut freed_before: HashSet<u64> = HashSet::default();

    let mut intervals: Vec<Interval> = Vec::with_capacity(events.len() / 2 + 16);
    let mut live: HashMap<u64, u32> =
        HashMap::with_capacity_and_hasher(1 << 12, Default::default());
    let mut pending: HashMap<u64, u64> = HashMap::default();
    let mut now = Running::default();
    // Bytes pending free when the trace began (their free_completed comes without a request).
    let mut pending_before = 0u64;
    let mut best = (now, None::<usize>);
    let mut ooms = Vec::new();
    let mut oom_running = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let at = i as u32;
        match e.action {
            Action::Alloc => {
                if let Some(old) = live.insert(e.addr, intervals.len() as u32) {
                    let old = &mut intervals[old as usize];
                    old.end = at;
                    let size = events[old.start as usize].size;
                    now.allocated -= i128::from(size);
                    now.active -= i128::from(size);
                }
                intervals.push(Interval {
                    start: at,
                    end: NONE,
                });
                now.allocated += i128::from(e.size);
                now.active += i128::from(e.size);
            }
            Action::FreeRequested => {
                let size = match live.remove(&e.addr) {
                    Some(idx) => {
                        let iv = &mut intervals[idx as usize];
                        iv.end = at;
                        events[iv.start as usize].size
                    }
                    None => {
                        freed_before.insert(e.addr);
                        intervals.push(Interval {
                            start: NONE,
                            end: at,
                        });
                        e.size
                    }
                };
                now.allocated -= i128::from(size);
                if completions {
                    pending.insert(e.addr, size);
                } else {
                    now.active -= i128::from(size);
                }
            }
            Action::FreeCompleted => match pending.remove(&e.addr) {
                Some(size) => now.active -= i128::from(size),
                None => {
                    pending_before += e.size;
                    now.active -= i128::from(e.size);
                }
            },
            Action::SegmentAlloc | Action::SegmentMap => now.reserved += i128::from(e.size),
            Action::SegmentFree | Action::SegmentUnmap => now.reserved -= i128::from(e.size),
            Action::Oom => {
                ooms.push(OomEvent {
                    event_index: i,
                    time_us: e.time_us,
                    requested_bytes: e.size,
                    device_free_bytes: e.addr,
                    allocated_bytes: 0,
                    reserved_bytes: 0,
                    stream: snapshot
                        .streams
                        .get(usize::from(e.stream))
                        .copied()
                        .unwrap_or(0),
                });
                oom_running.push(now);
            }
            Action::Snapshot | Action::Other => {}
        }
        if now.allocated > best.0.allocated {
            best = (now, Some(i));
        }
    }
    // Active at the end with no event in the trace: there all along.
    let mut untouched_blocks: Vec<(Option<StackId>, u64)> = Vec::new();
    let mut pending_untouched = 0u64;
    for block in blocks() {
        let untouched = !live.contains_key(&block.address)
            && !pending.contains_key(&block.address)
            && !freed_before.contains(&block.address);
        match block.state {
            BlockState::ActiveAllocated if untouched => {
                untouched_blocks.push((Some(block.stack), block.size));
            }
            BlockState::ActivePendingFree if untouched && completions => {
                pending_untouched += block.size;
            }
            _ => {}
        }
    }
    let base: u64 = intervals
        .iter()
        .filter(|iv| iv.start == NONE)
        .map(|iv| iv.size(events))
        .sum::<u64>()
        + untouched_blocks.iter().map(|b| b.1).sum::<u64>();
    let reserved_bytes: u64 = segments.iter().map(|s| s.total_size).sum();
    // Everything at moment `r` of the trace, in absolute bytes.
    let allocated_at = |r: &Running| clamp(i128::from(base) + r.allocated);
    let active_at =
        |r: &Running| clamp(i128::from(base + pending_before + pending_untouched) + r.active);
    let reserved_at = |r: &Running| clamp(i128::from(reserved_bytes) - (now.reserved - r.reserved));
    for (oom, r) in ooms.iter_mut().zip(&oom_running) {
        oom.allocated_bytes = allocated_at(r);
        oom.reserved_bytes = reserved_at(r);
    }
    let (peak, peak_event_index) = best;
    let p = peak_event_index.map_or(NONE, |i| i as u32);
    let live_at_peak = intervals.iter().filter(|iv| {
        let started = iv.start == NONE || (p != NONE && iv.start <= p);
        let ended = iv.end != NONE && p != NONE && iv.end <= p;
        started && !ended
    });
    let peak_stacks = group(
        live_at_peak
            .map(|iv| (iv.stack(events), iv.size(events)))
            .chain(untouched_blocks.iter().copied()),
        names,
    );

    let free_bytes: u64 = blocks()
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size)
        .sum();
    let largest_free_block_bytes = blocks()
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size)
        .max()
        .unwrap_or(0);
    let (mut stranded_free_bytes, mut empty_segments, mut empty_segment_bytes) = (0, 0, 0);
    for s in &segments {
        if s.blocks.iter().any(|b| b.state != BlockState::Inactive) {
            stranded_free_bytes += s
                .blocks
                .iter()
                .filter(|b| b.state == BlockState::Inactive)
                .map(|b| b.size)
                .sum::<u64>();
        } else {
            empty_segments += 1;
            empty_segment_bytes += s.total_size;
        }
    }
    let partly_used = reserved_bytes.saturating_sub(empty_segment_bytes);
    let fragmentation = if partly_used == 0 {
        0.0
    } else {
        stranded_free_bytes as f64 / partly_used as f64
    };
    let end_stacks = group(
        blocks()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .map(|b| (Some(b.stack), b.size)),
        names,
    );
    let has_times = match (events.first(), events.last()) {
        (Some(a), Some(b)) => b.time_us > a.time_us,
        _ => false,
    };
    DeviceReport {
        device,
        events: events.len(),
        segments: segments.len(),
        blocks: blocks().count(),
        reserved_bytes,
        allocated_bytes: segments.iter().map(|s| s.allocated_size).sum(),
        active_bytes: segments.iter().map(|s| s.active_size).sum(),
        requested_bytes: segments.iter().map(|s| s.requested_size).sum(),
        free_bytes,
        largest_free_block_bytes,
        stranded_free_bytes,
        empty_segments,
        empty_segment_bytes,
        fragmentation,
        peak_allocated_bytes: allocated_at(&peak),
        peak_active_bytes: active_at(&peak),
        peak_reserved_bytes: reserved_at(&peak),
        peak_time_us: if events.is_empty() {
            None
        } else {
            Some(events[peak_event_index.unwrap_or(0)].time_us)
        },
        peak_event_index,
        trace_start_us: has_times.then(|| events[0].time_us),
        trace_end_us: has_times.then(|| events[events.len() - 1].time_us),
        live_before_trace_bytes: base,
        peak_owners: owners_of(&peak_stacks),
        peak_stacks,
        end_stacks,
        ooms,
    }
}

fn clamp(bytes: i128) -> u64 {
    bytes.clamp(0, u64::MAX.into()) as u64
}

fn group(
    blocks: impl Iterator<Item = (Option<StackId>, u64)>,
    names: &mut FrameNames,
) -> Vec<StackGroup> {
    // (owner, key) -> (bytes, count, largest block size, its stack)
    type Key = (std::rc::Rc<str>, std::rc::Rc<str>);
    let mut groups: HashMap<Key, (u64, u64, u64, Option<StackId>)> = HashMap::default();
    for (stack, size) in blocks {
        let key = (names.owner(stack).0, names.key(stack));
        let g = groups.entry(key).or_insert((0, 0, 0, stack));
        g.0 += size;
        g.1 += 1;
        if size > g.2 {
            g.2 = size;
            g.3 = stack;
        }
    }
    let mut out: Vec<StackGroup> = groups
        .into_iter()
        .map(|((owner, frame), (bytes, count, _, stack))| {
            let kind = names.owner(stack).1;
            let (stack, key_frame) = names.whole(stack);
            StackGroup {
                owner: owner.to_string(),
                kind,
                frame: frame.to_string(),
                bytes,
                count,
                stack,
                key_frame,
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then_with(|| a.frame.cmp(&b.frame))
            .then_with(|| a.owner.cmp(&b.owner))
    });
    out
}

/// Functions and files PyTorch's memory viewer hides from every stack (the rule of
/// `torch/cuda/_memory_viz.py` and `MemoryViz.js`): the unwinder and traceback capture, the
/// process entry, the interpreter's eval loop and call machinery, and dispatcher boxing.
const HIDDEN_FUNCTIONS: [&str; 8] = [
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_start",
    "__libc_start_main",
    "PyEval_",
    "PyObject_",
    "PyFunction_",
];
const HIDDEN_FILES: [&str; 10] = [
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
];

/// Whether PyTorch's viewer shows `frame` (see [`HIDDEN_FUNCTIONS`]).
pub fn is_shown(frame: &Frame) -> bool {
    !HIDDEN_FUNCTIONS.iter().any(|f| frame.name.contains(f))
        && !HIDDEN_FILES.iter().any(|f| frame.filename.contains(f))
}

/// Whether a native frame is the caching allocator's own or not symbolized: it says nothing
/// about who asked for the memory.
fn is_allocator_plumbing(frame: &Frame) -> bool {
    frame.name.as_ref() == "??"
        || frame.filename.contains("libc10_cuda")
        || frame.name.contains("CUDACachingAllocator")
}

/// The frame a stack is grouped by (see the module doc), as an index into the stack.
pub fn key_frame(frames: &FrameTable, stack: StackId) -> Option<usize> {
    let list: Vec<(usize, &Frame)> = frames
        .stack(stack)
        .enumerate()
        .filter(|(_, f)| is_shown(f))
        .collect();
    let first = |pick: &dyn Fn(&Frame) -> bool| list.iter().find(|(_, f)| pick(f)).map(|p| p.0);
    first(&|f| f.filename.contains("pithtrain/"))
        .or_else(|| first(&|f| !is_internal(&f.filename)))
        .or_else(|| first(&|f| is_python(&f.filename)))
        .or_else(|| first(&|f| !is_allocator_plumbing(f)))
        .or_else(|| list.first().map(|p| p.0))
}

/// True when no frame of the stack is Python source.
fn is_native_only(frames: &FrameTable, stack: StackId) -> bool {
    !frames.stack(stack).any(|f| is_python(&f.filename))
}

/// `path:line function` of one frame, the path shortened by [`short_path`].
pub fn format_frame(frame: &Frame) -> String {
    format!(
        "{}:{} {}",
        short_path(&frame.filename),
        frame.line,
        frame.name
    )
}

/// Caches each stack's key frame name and owner.
pub struct FrameNames<'a> {
    frames: &'a FrameTable,
    keys: HashMap<StackId, std::rc::Rc<str>>,
    owners: HashMap<StackId, (std::rc::Rc<str>, Kind)>,
}

impl<'a> FrameNames<'a> {
    /// An empty cache over `frames`.
    pub fn new(frames: &'a FrameTable) -> Self {
        FrameNames {
            frames,
            keys: HashMap::default(),
            owners: HashMap::default(),
        }
    }

    /// The owner of a stack and its kind ([`owner::classify`] of its whole stack;
    /// [`owner::BEFORE_TRACE`] for `None`, allocated before the trace).
    pub fn owner(&mut self, stack: Option<StackId>) -> (std::rc::Rc<str>, Kind) {
        let Some(stack) = stack else {
            return (owner::BEFORE_TRACE.into(), Kind::Unknown);
        };
        let frames = self.frames;
        self.owners
            .entry(stack)
            .or_insert_with(|| {
                let o = owner::classify(frames.stack(stack).map(|f| (&*f.filename, &*f.name)));
                (o.owner.as_ref().into(), o.kind)
            })
            .clone()
    }

    /// The group name of a stack (`None`: allocated before the trace).
    pub fn key(&mut self, stack: Option<StackId>) -> std::rc::Rc<str> {
        let Some(stack) = stack else {
            return BEFORE_TRACE.into();
        };
        let frames = self.frames;
        self.keys
            .entry(stack)
            .or_insert_with(|| match key_frame(frames, stack) {
                Some(i) => {
                    let f = &frames.frames[frames.stacks[stack as usize][i] as usize];
                    if is_native_only(frames, stack) {
                        format!("{NATIVE_ONLY} {}", format_frame(f)).into()
                    } else {
                        format_frame(f).into()
                    }
                }
                None => NO_STACK.into(),
            })
            .clone()
    }

    /// The shown frames of a stack, formatted, and where its key frame is among them.
    pub fn whole(&self, stack: Option<StackId>) -> (Vec<String>, Option<usize>) {
        let Some(stack) = stack else {
            return (Vec::new(), None);
        };
        let key = key_frame(self.frames, stack);
        let mut at = None;
        let mut out = Vec::new();
        for (i, f) in self.frames.stack(stack).enumerate() {
            if is_shown(f) {
                if Some(i) == key {
                    at = Some(out.len());
                }
                out.push(format_frame(f));
            }
        }
        (out, at)
    }
}

/// Bytes live at the device's peak per owner, largest first (then by name), from every group
/// of `groups` (the device's `peak_stacks` before any are left out).
pub fn owners_of(groups: &[StackGroup]) -> Vec<OwnerBytes> {
    let mut by: std::collections::BTreeMap<&str, OwnerBytes> = Default::default();
    for g in groups {
        let o = by.entry(&g.owner).or_insert_with(|| OwnerBytes {
            owner: g.owner.clone(),
            kind: g.kind,
            bytes: 0,
            count: 0,
            asked_by: g.frame.clone(),
        });
        o.bytes = o.bytes.saturating_add(g.bytes);
        o.count = o.count.saturating_add(g.count);
        // A model line over the largest group's native frame.
        if !o.asked_by.contains("pithtrain/") && g.frame.contains("pithtrain/") {
            o.asked_by = g.frame.clone();
        }
    }
    let mut out: Vec<OwnerBytes> = by.into_values().collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.owner.cmp(&b.owner)));
    out
}

/// Bytes live at the device's peak per owner, largest first (then by name).
pub fn owners_at_peak(d: &DeviceReport) -> Vec<(String, u64)> {
    d.peak_owners
        .iter()
        .map(|o| (o.owner.clone(), o.bytes))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{Block, Segment};

    fn frame(file: &str, line: i64, name: &str) -> Frame {
        Frame {
            filename: file.into(),
            line,
            name: name.into(),
        }
    }

    fn table() -> FrameTable {
        FrameTable {
            frames: vec![
                frame("/src/c10/cuda/CUDACachingAllocator.cpp", 1, "malloc"),
                frame(
                    "/venv/lib/python3.11/site-packages/torch/nn/functional.py",
                    2,
                    "linear",
                ),
                frame(
                    "/home/u/PithTrain/pithtrain/dualpipe/execution.py",
                    604,
                    "layer_forward",
                ),
                frame("/home/u/train.py", 9, "main"),
                frame("/usr/bin/python3.12", 5575703, "??"),
            ],
            stacks: vec![
                Box::new([]),
                Box::new([0, 1, 2, 3]),
                Box::new([0, 1, 4, 3]),
                Box::new([0, 1]),
            ],
        }
    }

    #[test]
    fn key_frame_prefers_pithtrain_then_user_code_then_python_then_innermost() {
        let t = table();
        assert_eq!(key_frame(&t, 1), Some(2));
        // The interpreter's own frame is native, not user code.
        assert_eq!(key_frame(&t, 2), Some(3));
        // Only PyTorch and C++ frames: the innermost Python one, not the allocator's C++.
        assert_eq!(key_frame(&t, 3), Some(1));
        assert_eq!(key_frame(&t, 0), None);
        assert_eq!(
            format_frame(&t.frames[2]),
            "pithtrain/dualpipe/execution.py:604 layer_forward"
        );
    }

    #[test]
    fn a_native_only_stack_is_named_past_the_unwinder_and_the_allocator_and_owned_by_its_library() {
        let lib = "/venv/lib/python3.12/site-packages/torch/lib";
        let t = FrameTable {
            frames: vec![
                frame(
                    &format!("{lib}/libtorch_cpu.so"),
                    1,
                    "torch::unwind::unwind()",
                ),
                frame(
                    &format!("{lib}/libtorch_cpu.so"),
                    2,
                    "torch::CapturedTraceback::gather(bool, bool, bool)",
                ),
                frame(&format!("{lib}/libc10_cuda.so"), 3, "??"),
                frame(&format!("{lib}/libtorch_cuda.so"), 4, "??"),
                frame(
                    &format!("{lib}/libtorch_cuda.so"),
                    5,
                    "at::cuda::getCurrentCUDABlasHandle()",
                ),
                frame("/lib/x86_64-linux-gnu/libstdc++.so.6", 6, "??"),
            ],
            stacks: vec![Box::new([]), Box::new([0, 1, 2, 3, 4, 5])],
        };
        assert_eq!(key_frame(&t, 1), Some(4));
        let mut names = FrameNames::new(&t);
        // Owned by cuBLAS, asked for by the innermost symbolized frame past the allocator.
        assert_eq!(
            &*names.key(Some(1)),
            "<native only, no Python frame> torch/lib/libtorch_cuda.so:5 at::cuda::getCurrentCUDABlasHandle()"
        );
        assert_eq!(
            names.owner(Some(1)),
            (owner::CUBLAS_WORKSPACE.into(), Kind::Buffer)
        );
        let (stack, at) = names.whole(Some(1));
        assert_eq!(stack.len(), 4, "{stack:?}");
        assert_eq!(at, Some(2));
        // Without the workspace frame: the innermost symbolized frame past the allocator.
        let mut t = t;
        t.frames.push(frame(
            &format!("{lib}/libtorch_cpu.so"),
            7,
            "at::detail::empty_generic()",
        ));
        t.stacks.push(Box::new([0, 1, 2, 3, 6, 5]));
        assert_eq!(key_frame(&t, 2), Some(4));
        assert_eq!(
            &*FrameNames::new(&t).key(Some(2)),
            "<native only, no Python frame> torch/lib/libtorch_cpu.so:7 at::detail::empty_generic()"
        );
    }

    fn entry(action: Action, addr: u64, size: u64, time_us: i64, stack: StackId) -> TraceEntry {
        TraceEntry {
            action,
            addr,
            size,
            stream: 0,
            time_us,
            stack,
        }
    }

    fn block(address: u64, size: u64, state: BlockState, stack: StackId) -> Block {
        Block {
            address,
            size,
            requested_size: size,
            state,
            stack,
        }
    }

    fn segment(device: i64, address: u64, total: u64, blocks: Vec<Block>) -> Segment {
        let sum =
            |pick: fn(&Block) -> bool| blocks.iter().filter(|b| pick(b)).map(|b| b.size).sum();
        Segment {
            device,
            address,
            total_size: total,
            allocated_size: sum(|b| b.state == BlockState::ActiveAllocated),
            active_size: sum(|b| b.state != BlockState::Inactive),
            requested_size: sum(|b| b.state == BlockState::ActiveAllocated),
            stream: 0,
            segment_type: "large".into(),
            is_expandable: false,
            stack: 0,
            blocks,
        }
    }

    #[test]
    fn peak_counts_blocks_live_before_the_trace() {
        use Action::{Alloc, FreeCompleted, FreeRequested, Oom, SegmentAlloc};
        let snapshot = Snapshot {
            segments: vec![
                segment(
                    0,
                    0,
                    1000,
                    vec![
                        // Live through the whole trace: never allocated nor freed in it.
                        block(0, 100, BlockState::ActiveAllocated, 2),
                        // Allocated in the trace.
                        block(100, 200, BlockState::ActiveAllocated, 1),
                        block(300, 700, BlockState::Inactive, 0),
                    ],
                ),
                segment(0, 5000, 64, vec![block(5000, 64, BlockState::Inactive, 0)]),
            ],
            device_traces: vec![vec![
                // Freed without an alloc in the trace: live from the start.
                entry(FreeRequested, 500, 50, 10, 0),
                entry(Alloc, 100, 200, 20, 1),
                entry(Alloc, 600, 400, 30, 1),
                entry(FreeRequested, 600, 400, 40, 1),
                entry(SegmentAlloc, 5000, 64, 45, 0),
                entry(Oom, 123, 5000, 50, 0),
                entry(FreeCompleted, 500, 50, 60, 0),
            ]],
            frames: table(),
            ..Snapshot::default()
        };
        let reports = analyze(&snapshot);
        let r = &reports[0];
        assert_eq!(r.live_before_trace_bytes, 150);
        assert_eq!(r.peak_allocated_bytes, 100 + 200 + 400);
        // The block freed at event 0 is not reusable until event 6.
        assert_eq!(r.peak_active_bytes, 100 + 50 + 200 + 400);
        // The 64-byte segment came after the peak.
        assert_eq!((r.reserved_bytes, r.peak_reserved_bytes), (1064, 1000));
        assert_eq!(r.peak_time_us, Some(30));
        assert_eq!(r.peak_since_start_us(), Some(20));
        assert_eq!(r.peak_event_index, Some(2));
        assert_eq!(
            r.peak_stacks[0].frame,
            "pithtrain/dualpipe/execution.py:604 layer_forward"
        );
        assert_eq!(r.peak_stacks[0].bytes, 600);
        assert_eq!(r.peak_stacks[0].count, 2);
        assert_eq!(r.peak_stacks[0].key_frame, Some(2));
        assert_eq!(r.peak_stacks[0].stack.len(), 4);
        assert_eq!(r.peak_stacks[1].frame, "/home/u/train.py:9 main");
        assert_eq!(r.free_bytes, 764);
        // 700 free bytes beside live blocks; the 64-byte segment is empty, listed apart.
        assert_eq!(r.stranded_free_bytes, 700);
        assert_eq!((r.empty_segments, r.empty_segment_bytes), (1, 64));
        assert!((r.fragmentation - 0.7).abs() < 1e-9);
        assert_eq!(
            r.ooms,
            vec![OomEvent {
                event_index: 5,
                time_us: 50,
                requested_bytes: 5000,
                device_free_bytes: 123,
                allocated_bytes: 300,
                reserved_bytes: 1064,
                stream: 0,
            }]
        );
    }

    #[test]
    fn no_trace_means_the_peak_is_what_segments_hold() {
        let snapshot = Snapshot {
            segments: vec![segment(
                1,
                0,
                10,
                vec![
                    block(0, 4, BlockState::ActiveAllocated, 0),
                    block(4, 3, BlockState::Inactive, 0),
                    block(7, 3, BlockState::Inactive, 0),
                ],
            )],
            ..Snapshot::default()
        };
        let r = &analyze(&snapshot)[0];
        assert_eq!(
            (r.device, r.peak_allocated_bytes, r.peak_time_us),
            (1, 4, None)
        );
        assert_eq!((r.peak_reserved_bytes, r.peak_active_bytes), (10, 4));
        assert_eq!(r.peak_stacks[0].frame, NO_STACK);
        assert_eq!(r.stranded_free_bytes, 6);
        assert!((r.fragmentation - 0.6).abs() < 1e-9);
    }

    #[test]
    fn owners_add_up_their_groups_and_keep_the_largest_ones_line() {
        let g = |owner: &str, frame: &str, bytes| StackGroup {
            owner: owner.into(),
            kind: owner::kind_of(owner),
            frame: frame.into(),
            bytes,
            count: 1,
            stack: Vec::new(),
            key_frame: None,
        };
        let owners = owners_of(&[
            g(
                owner::CUBLAS_WORKSPACE,
                "pithtrain/models/qwen3_moe.py:163 forward",
                32,
            ),
            g(
                owner::CUBLAS_WORKSPACE,
                "<native only, no Python frame> x",
                30,
            ),
            g(
                "pithtrain/models/qwen3_moe.py",
                "pithtrain/models/qwen3_moe.py:1 f",
                40,
            ),
        ]);
        assert_eq!(owners[0].owner, owner::CUBLAS_WORKSPACE);
        assert_eq!((owners[0].bytes, owners[0].count), (62, 2));
        assert_eq!(
            owners[0].asked_by,
            "pithtrain/models/qwen3_moe.py:163 forward"
        );
        assert_eq!(owners[1].kind, Kind::Model);
    }
}
