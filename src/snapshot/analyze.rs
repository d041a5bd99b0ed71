//! What held memory: current state, the peak of allocated memory over the trace, the stacks
//! live at that peak, and OOM events, per device.
//!
//! # Liveness
//! A block is live from its `alloc` event to its `free_requested` event (what PyTorch's viewer
//! plots as allocated). Blocks already live when the trace began count from the start: those
//! freed in the trace without an `alloc` before it (their allocation stack is unknown and they
//! group under [`BEFORE_TRACE`]), and those still active in `segments` at the end whose address
//! has no `alloc` and no unmatched `free_requested` in the trace. An `alloc` on an address that
//! is already live ends the earlier block there (its free fell out of the trace).
//!
//! The peak is the maximum over the trace of the live bytes after each event, counting the
//! moment before the first event; ties keep the earliest. With no trace, the peak is what is
//! live in `segments`.
//!
//! # Grouping
//! Blocks group by one frame of their stack ([`key_frame`]): the innermost frame whose filename
//! contains `pithtrain/`, else the innermost frame that is not PyTorch, C/C++ or the Python
//! standard library, else the innermost Python frame (e.g. FSDP's `alloc_storage` for buffers
//! allocated on the autograd thread, whose innermost frames are native), else the innermost frame.

use foldhash::{HashMap, HashSet};

use serde::Serialize;

use super::decode::{Action, BlockState, FrameTable, Snapshot, StackId};

/// Group name of blocks freed in the trace whose allocation happened before it began.
pub const BEFORE_TRACE: &str = "<allocated before the trace began>";
/// Group name of blocks recorded without any stack.
pub const NO_STACK: &str = "<no stack recorded>";
/// Prefix of a group whose stack has no Python frame at all (e.g. buffers that FSDP allocates on
/// the autograd engine's thread): its key frame is native code, which says little by itself.
pub const NATIVE_ONLY: &str = "<native only, no Python frame>";
/// Points kept for the timeline of allocated bytes.
const TIMELINE_POINTS: usize = 800;
/// Frames kept in a group's example stack.
const EXAMPLE_FRAMES: usize = 8;

/// Bytes live under one key frame.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StackGroup {
    /// `path:line function` of the key frame.
    pub frame: String,
    /// Sum of the group's block sizes.
    pub bytes: u64,
    /// Blocks in the group.
    pub count: u64,
    /// The stack of the group's largest block, from the key frame outwards.
    pub stack: Vec<String>,
}

/// An `oom` entry of a device trace, with the device's state at that moment.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OomEvent {
    /// Index of the entry in the device trace.
    pub event_index: usize,
    /// Its `time_us`.
    pub time_us: i64,
    /// Its `size`: the allocation that failed.
    pub requested_bytes: u64,
    /// Free bytes on the device that PyTorch recorded with the OOM.
    pub device_free_bytes: u64,
    /// Live bytes (see the module doc) at the OOM.
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
    /// Sum of the segments' `total_size`: what the caching allocator holds.
    pub reserved_bytes: u64,
    /// Sum of the segments' `allocated_size`.
    pub allocated_bytes: u64,
    /// Sum of the segments' `active_size` (allocated plus pending free).
    pub active_bytes: u64,
    /// Sum of the segments' `requested_size`.
    pub requested_bytes: u64,
    /// Reserved bytes in inactive blocks: cached by the allocator, usable by new allocations.
    pub free_bytes: u64,
    /// The largest inactive block.
    pub largest_free_block_bytes: u64,
    /// `1 - largest_free_block / free`: 0 when the free bytes are one block (or none).
    pub fragmentation: f64,
    /// The peak of live bytes over the trace (see the module doc).
    pub peak_allocated_bytes: u64,
    /// `None` when there is no trace.
    pub peak_time_us: Option<i64>,
    /// Index of the event after which the peak was reached; `None` if before the first.
    pub peak_event_index: Option<usize>,
    /// Bytes counted as live from the start of the trace.
    pub live_before_trace_bytes: u64,
    /// Groups of the blocks live at the peak.
    pub peak_stacks: Vec<StackGroup>,
    /// Groups of the blocks allocated in `segments` (at snapshot time).
    pub end_stacks: Vec<StackGroup>,
    /// The trace's `oom` entries, in trace order.
    pub ooms: Vec<OomEvent>,
    /// `(x, bytes)` with x in `time_us` when `time_axis`, else the event index; at most
    /// `TIMELINE_POINTS` points, each the highest value of its stretch of events.
    #[serde(skip)]
    pub timeline: Vec<(i64, u64)>,
    /// Whether the trace has times to plot against (else the timeline's x is the event index).
    #[serde(skip)]
    pub time_axis: bool,
}

/// Analyses every device that has segments or trace events; the device with the highest peak
/// comes first (then the most events, then the lowest id).
pub fn analyze(snapshot: &Snapshot) -> Vec<DeviceReport> {
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
    let mut names = FrameNames::new(&snapshot.frames);
    let mut reports: Vec<_> = devices
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

/// A block's life in the trace; `None` ends mean before the first / after the last event.
struct Interval {
    size: u64,
    /// `None`: allocated before the trace, stack unknown.
    stack: Option<StackId>,
    start: Option<usize>,
    end: Option<usize>,
}

fn analyze_device(snapshot: &Snapshot, device: i64, names: &mut FrameNames) -> DeviceReport {
    let empty = Vec::new();
    let events = usize::try_from(device)
        .ok()
        .and_then(|d| snapshot.device_traces.get(d))
        .unwrap_or(&empty);
    let segments: Vec<_> = snapshot
        .segments
        .iter()
        .filter(|s| s.device == device)
        .collect();

    let mut intervals: Vec<Interval> = Vec::new();
    let mut live: HashMap<u64, usize> = HashMap::default();
    let mut allocated_addrs: HashSet<u64> = HashSet::default();
    let mut freed_before: HashSet<u64> = HashSet::default();
    // Live bytes after each event, less what was live before the trace.
    let mut running: i128 = 0;
    let mut best = (0i128, None::<usize>);
    let mut ooms = Vec::new();
    let mut timeline = Timeline::new(events.len());
    for (i, e) in events.iter().enumerate() {
        match e.action {
            Action::Alloc => {
                if let Some(old) = live.insert(e.addr, intervals.len()) {
                    intervals[old].end = Some(i);
                    running -= i128::from(intervals[old].size);
                }
                allocated_addrs.insert(e.addr);
                intervals.push(Interval {
                    size: e.size,
                    stack: Some(e.stack),
                    start: Some(i),
                    end: None,
                });
                running += i128::from(e.size);
            }
            Action::FreeRequested => {
                if let Some(idx) = live.remove(&e.addr) {
                    intervals[idx].end = Some(i);
                    running -= i128::from(intervals[idx].size);
                } else {
                    freed_before.insert(e.addr);
                    intervals.push(Interval {
                        size: e.size,
                        stack: None,
                        start: None,
                        end: Some(i),
                    });
                    running -= i128::from(e.size);
                }
            }
            Action::Oom => ooms.push(OomEvent {
                event_index: i,
                time_us: e.time_us,
                requested_bytes: e.size,
                device_free_bytes: e.addr,
                allocated_bytes: 0,
                reserved_bytes: 0,
                stream: e.stream,
            }),
            _ => {}
        }
        if running > best.0 {
            best = (running, Some(i));
        }
        timeline.push(i, running);
    }
    for block in segments.iter().flat_map(|s| &s.blocks) {
        let active = block.state != BlockState::Inactive;
        if active
            && !allocated_addrs.contains(&block.address)
            && !freed_before.contains(&block.address)
        {
            intervals.push(Interval {
                size: block.size,
                stack: Some(block.stack),
                start: None,
                end: None,
            });
        }
    }
    let base: u64 = intervals
        .iter()
        .filter(|iv| iv.start.is_none())
        .map(|iv| iv.size)
        .sum();
    let at = |running: i128| (i128::from(base) + running).max(0) as u64;
    let peak_allocated_bytes = at(best.0);
    let peak_event_index = best.1;
    let live_at_peak = intervals.iter().filter(|iv| {
        let started = match (iv.start, peak_event_index) {
            (None, _) => true,
            (Some(s), Some(p)) => s <= p,
            (Some(_), None) => false,
        };
        let ended = match (iv.end, peak_event_index) {
            (None, _) => false,
            (Some(e), Some(p)) => e <= p,
            (Some(_), None) => false,
        };
        started && !ended
    });
    let peak_stacks = group(live_at_peak.map(|iv| (iv.stack, iv.size)), names);

    let reserved_bytes: u64 = segments.iter().map(|s| s.total_size).sum();
    replay_ooms(&mut ooms, events, reserved_bytes, base, &timeline);

    let blocks = || segments.iter().flat_map(|s| &s.blocks);
    let free: Vec<u64> = blocks()
        .filter(|b| b.state == BlockState::Inactive)
        .map(|b| b.size)
        .collect();
    let free_bytes: u64 = free.iter().sum();
    let largest_free_block_bytes = free.iter().copied().max().unwrap_or(0);
    let fragmentation = if free_bytes == 0 {
        0.0
    } else {
        1.0 - largest_free_block_bytes as f64 / free_bytes as f64
    };
    let end_stacks = group(
        blocks()
            .filter(|b| b.state == BlockState::ActiveAllocated)
            .map(|b| (Some(b.stack), b.size)),
        names,
    );
    let time_axis = match (events.first(), events.last()) {
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
        fragmentation,
        peak_allocated_bytes,
        peak_time_us: if events.is_empty() {
            None
        } else {
            Some(events[peak_event_index.unwrap_or(0)].time_us)
        },
        peak_event_index,
        live_before_trace_bytes: base,
        peak_stacks,
        end_stacks,
        ooms,
        timeline: timeline.finish(base, events, time_axis),
        time_axis,
    }
}

/// Fills the allocated and reserved bytes of each OOM: allocated from the running live bytes,
/// reserved by undoing, from the end backwards, the segment events after it.
fn replay_ooms(
    ooms: &mut [OomEvent],
    events: &[super::decode::TraceEntry],
    reserved_end: u64,
    base: u64,
    timeline: &Timeline,
) {
    if ooms.is_empty() {
        return;
    }
    let mut reserved = i128::from(reserved_end);
    let mut next = ooms.len();
    for (i, e) in events.iter().enumerate().rev() {
        while next > 0 && ooms[next - 1].event_index == i {
            next -= 1;
            ooms[next].reserved_bytes = reserved.max(0) as u64;
            ooms[next].allocated_bytes = (i128::from(base) + timeline.running_at(i)).max(0) as u64;
        }
        match e.action {
            Action::SegmentAlloc | Action::SegmentMap => reserved -= i128::from(e.size),
            Action::SegmentFree | Action::SegmentUnmap => reserved += i128::from(e.size),
            _ => {}
        }
    }
}

/// Keeps the running live bytes per event compactly: every value for short traces (needed for
/// OOM replay), and the maximum per stretch of events for the plot.
struct Timeline {
    values: Vec<i128>,
    stretch: usize,
    maxima: Vec<(usize, i128)>,
}

impl Timeline {
    fn new(len: usize) -> Self {
        Timeline {
            values: Vec::with_capacity(len.min(1 << 24)),
            stretch: len.div_ceil(TIMELINE_POINTS).max(1),
            maxima: Vec::new(),
        }
    }

    fn push(&mut self, i: usize, running: i128) {
        self.values.push(running);
        let bucket = i / self.stretch;
        match self.maxima.get_mut(bucket) {
            Some(m) if running > m.1 => *m = (i, running),
            Some(_) => {}
            None => self.maxima.push((i, running)),
        }
    }

    fn running_at(&self, i: usize) -> i128 {
        self.values[i]
    }

    fn finish(
        &self,
        base: u64,
        events: &[super::decode::TraceEntry],
        time_axis: bool,
    ) -> Vec<(i64, u64)> {
        let x = |i: usize| {
            if time_axis {
                events[i].time_us
            } else {
                i as i64
            }
        };
        let mut points = Vec::with_capacity(self.maxima.len() + 1);
        if let Some(first) = events.first() {
            points.push((if time_axis { first.time_us } else { 0 }, base));
        }
        points.extend(
            self.maxima
                .iter()
                .map(|&(i, r)| (x(i), (i128::from(base) + r).max(0) as u64)),
        );
        points
    }
}

fn group(
    blocks: impl Iterator<Item = (Option<StackId>, u64)>,
    names: &mut FrameNames,
) -> Vec<StackGroup> {
    // key -> (bytes, count, largest block size, its stack)
    let mut groups: HashMap<std::rc::Rc<str>, (u64, u64, u64, Option<StackId>)> =
        HashMap::default();
    for (stack, size) in blocks {
        let key = names.key(stack);
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
        .map(|(frame, (bytes, count, _, stack))| StackGroup {
            frame: frame.to_string(),
            bytes,
            count,
            stack: names.example(stack),
        })
        .collect();
    out.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.frame.cmp(&b.frame)));
    out
}

/// Whether a frame belongs to PyTorch, C/C++ or the Python standard library.
pub fn is_internal(filename: &str) -> bool {
    const NATIVE: [&str; 7] = [".cpp", ".cc", ".c", ".h", ".hpp", ".cu", ".cuh"];
    filename.is_empty()
        || filename == "??"
        || filename.starts_with('<')
        || filename.starts_with("torch/")
        || filename.contains("/torch/")
        || NATIVE.iter().any(|ext| filename.ends_with(ext))
        || (filename.contains("/lib/python3") && !filename.contains("-packages/"))
}

/// True when no frame of the stack is Python source.
fn is_native_only(frames: &FrameTable, stack: StackId) -> bool {
    !frames.stack(stack).any(|f| f.filename.ends_with(".py"))
}

/// The frame a stack is grouped by (see the module doc), as an index into the stack.
pub fn key_frame(frames: &FrameTable, stack: StackId) -> Option<usize> {
    let list: Vec<_> = frames.stack(stack).collect();
    list.iter()
        .position(|f| f.filename.contains("pithtrain/"))
        .or_else(|| list.iter().position(|f| !is_internal(&f.filename)))
        .or_else(|| list.iter().position(|f| f.filename.ends_with(".py")))
        .or(if list.is_empty() { None } else { Some(0) })
}

/// `filename` shortened to start at `pithtrain/` or after `site-packages/`.
pub fn short_path(filename: &str) -> &str {
    if let Some(i) = filename.rfind("pithtrain/") {
        return &filename[i..];
    }
    for marker in ["site-packages/", "dist-packages/"] {
        if let Some(i) = filename.rfind(marker) {
            return &filename[i + marker.len()..];
        }
    }
    filename
}

/// Caches each stack's key frame name.
pub struct FrameNames<'a> {
    frames: &'a FrameTable,
    keys: HashMap<StackId, std::rc::Rc<str>>,
}

impl<'a> FrameNames<'a> {
    /// An empty cache over `frames`.
    pub fn new(frames: &'a FrameTable) -> Self {
        FrameNames {
            frames,
            keys: HashMap::default(),
        }
    }

    fn key(&mut self, stack: Option<StackId>) -> std::rc::Rc<str> {
        let Some(stack) = stack else {
            return BEFORE_TRACE.into();
        };
        let frames = self.frames;
        self.keys
            .entry(stack)
            .or_insert_with(|| match key_frame(frames, stack) {
                Some(i) if is_native_only(frames, stack) => {
                    format!("{NATIVE_ONLY} {}", format_frame(frames, stack, i)).into()
                }
                Some(i) => format_frame(frames, stack, i).into(),
                None => NO_STACK.into(),
            })
            .clone()
    }

    fn example(&self, stack: Option<StackId>) -> Vec<String> {
        let Some(stack) = stack else {
            return Vec::new();
        };
        let start = key_frame(self.frames, stack).unwrap_or(0);
        let len = self.frames.stacks[stack as usize].len();
        (start..len.min(start + EXAMPLE_FRAMES))
            .map(|i| format_frame(self.frames, stack, i))
            .collect()
    }
}

fn format_frame(frames: &FrameTable, stack: StackId, index: usize) -> String {
    let f = &frames.frames[frames.stacks[stack as usize][index] as usize];
    format!("{}:{} {}", short_path(&f.filename), f.line, f.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::decode::{Block, Frame, Segment, TraceEntry};

    fn table() -> FrameTable {
        let frame = |file: &str, line, name: &str| Frame {
            filename: file.into(),
            line,
            name: name.into(),
        };
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
            ],
            stacks: vec![
                Box::new([]),
                Box::new([0, 1, 2, 3]),
                Box::new([0, 1, 3]),
                Box::new([0, 1]),
            ],
        }
    }

    #[test]
    fn key_frame_prefers_pithtrain_then_user_code_then_python_then_innermost() {
        let t = table();
        assert_eq!(key_frame(&t, 1), Some(2));
        assert_eq!(key_frame(&t, 2), Some(2));
        // Only PyTorch and C++ frames: the innermost Python one, not the allocator's C++.
        assert_eq!(key_frame(&t, 3), Some(1));
        assert_eq!(key_frame(&t, 0), None);
        assert_eq!(
            format_frame(&t, 1, 2),
            "pithtrain/dualpipe/execution.py:604 layer_forward"
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

    #[test]
    fn peak_counts_blocks_live_before_the_trace() {
        use Action::{Alloc, FreeRequested, Oom};
        let snapshot = Snapshot {
            segments: vec![Segment {
                device: 0,
                address: 0,
                total_size: 1000,
                allocated_size: 300,
                active_size: 300,
                requested_size: 300,
                stream: 0,
                segment_type: "large".into(),
                is_expandable: false,
                stack: 0,
                blocks: vec![
                    // Live through the whole trace: never allocated nor freed in it.
                    block(0, 100, BlockState::ActiveAllocated, 2),
                    // Allocated in the trace.
                    block(100, 200, BlockState::ActiveAllocated, 1),
                    block(300, 700, BlockState::Inactive, 0),
                ],
            }],
            device_traces: vec![vec![
                // Freed without an alloc in the trace: live from the start.
                entry(FreeRequested, 500, 50, 10, 0),
                entry(Alloc, 100, 200, 20, 1),
                entry(Alloc, 600, 400, 30, 1),
                entry(FreeRequested, 600, 400, 40, 1),
                entry(Oom, 123, 5000, 50, 0),
            ]],
            allocator_settings: vec![],
            frames: table(),
        };
        let reports = analyze(&snapshot);
        let r = &reports[0];
        assert_eq!(r.live_before_trace_bytes, 150);
        assert_eq!(r.peak_allocated_bytes, 100 + 200 + 400);
        assert_eq!(r.peak_time_us, Some(30));
        assert_eq!(r.peak_event_index, Some(2));
        assert_eq!(
            r.peak_stacks[0].frame,
            "pithtrain/dualpipe/execution.py:604 layer_forward"
        );
        assert_eq!(r.peak_stacks[0].bytes, 600);
        assert_eq!(r.peak_stacks[0].count, 2);
        assert_eq!(r.peak_stacks[1].frame, "/home/u/train.py:9 main");
        assert_eq!(r.free_bytes, 700);
        assert_eq!(r.fragmentation, 0.0);
        assert_eq!(
            r.ooms,
            vec![OomEvent {
                event_index: 4,
                time_us: 50,
                requested_bytes: 5000,
                device_free_bytes: 123,
                allocated_bytes: 300,
                reserved_bytes: 1000,
                stream: 0,
            }]
        );
    }

    #[test]
    fn no_trace_means_the_peak_is_what_segments_hold() {
        let snapshot = Snapshot {
            segments: vec![Segment {
                device: 1,
                address: 0,
                total_size: 10,
                allocated_size: 4,
                active_size: 4,
                requested_size: 4,
                stream: 0,
                segment_type: "small".into(),
                is_expandable: false,
                stack: 0,
                blocks: vec![
                    block(0, 4, BlockState::ActiveAllocated, 0),
                    block(4, 3, BlockState::Inactive, 0),
                    block(7, 3, BlockState::Inactive, 0),
                ],
            }],
            ..Snapshot::default()
        };
        let r = &analyze(&snapshot)[0];
        assert_eq!(
            (r.device, r.peak_allocated_bytes, r.peak_time_us),
            (1, 4, None)
        );
        assert_eq!(r.peak_stacks[0].frame, NO_STACK);
        assert!((r.fragmentation - 0.5).abs() < 1e-9);
    }
}
