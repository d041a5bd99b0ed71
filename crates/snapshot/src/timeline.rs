//! A device's trace packed for the interactive timeline of `snapshot --format html`.
//!
//! Only the events that move allocated or reserved memory are kept (`alloc`, `free_requested`,
//! `segment_*`, plus `oom` to mark). Each is a few varints ([`Kind`] and stack, the size's
//! index in a table ordered by frequency, the time step), the whole deflated: about 2 bytes per
//! event, where PyTorch's page spends about 80. Beside it, an overview (the minimum and maximum
//! of allocated and the maximum of reserved memory per column, over event order and over time)
//! lets the page draw at once, before it unpacks anything.
//!
//! The allocated bytes replay exactly as [`super::analyze`] counts them: a free takes back what
//! its alloc added, and an alloc on a live address first ends the block there ([`Kind::Replace`]
//! carries the size it ends), so the page's peak is the report's peak.
//!
//! Memory is also told apart by owner ([`super::owner`]), in at most [`MAX_BANDS`] bands: the
//! owners with the most bytes at the peak, the rest as `other`. An alloc adds to its stack's
//! band ([`Symbols::stack_bands`]); a free and a replace carry the band of the block they end
//! (the alloc's, found by address; [`owner::BEFORE_TRACE`] for blocks older than the trace),
//! so the bands sum to allocated at every event. Beside the trace: the reserved segments at the
//! peak, with the traced blocks live in each.

use std::io::Write;

use foldhash::HashMap;

use super::analyze::{self, DeviceReport};
use super::decode::{Action, Snapshot, StackId};
use super::owner;

/// Columns of the overview.
pub const OVERVIEW_COLUMNS: usize = 1200;

/// Most owner bands of a timeline, `other` included.
pub const MAX_BANDS: usize = 12;

/// The name of the band of the owners left out of the first [`MAX_BANDS`] − 1.
pub const OTHER: &str = "other";

/// What a packed event does, in its low 3 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Allocated grows by the size.
    Alloc = 0,
    /// Allocated shrinks by the size.
    Free = 1,
    /// Reserved grows by the size.
    Reserve = 2,
    /// Reserved shrinks by the size.
    Release = 3,
    /// An allocation of the size failed.
    Oom = 4,
    /// An alloc on an address still live: the block there ends first (its size follows).
    Replace = 5,
}

/// Per column: lowest and highest allocated, highest reserved.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Overview {
    /// Lowest allocated bytes in each column.
    pub allocated_min: Vec<u64>,
    /// Highest allocated bytes in each column.
    pub allocated_max: Vec<u64>,
    /// Highest reserved bytes in each column.
    pub reserved_max: Vec<u64>,
}

/// The frames, stacks and sizes the packed events point into.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Symbols {
    /// `path:line function` of every frame used, shown frames only.
    pub frames: Vec<String>,
    /// Per stack id, its frames innermost first (indices into `frames`); stack 0 is empty.
    pub stacks: Vec<Vec<u32>>,
    /// Where each stack's key frame is in its list, or -1.
    pub key_frames: Vec<i64>,
    /// The distinct sizes, most frequent first.
    pub sizes: Vec<u64>,
    /// Per stack id, the band its allocations count in (an index into the timeline's bands).
    pub stack_bands: Vec<u32>,
}

/// One band of the timeline: an owner, or `other`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Band {
    /// The owner ([`owner::owner`]) or [`OTHER`].
    pub name: String,
    /// Its bytes at the peak.
    pub peak_bytes: u64,
}

/// A segment reserved at the peak.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PeakSegment {
    /// Its device address.
    pub address: u64,
    /// Its size.
    pub size: u64,
    /// Bytes of the blocks allocated in the trace and live at the peak inside it (blocks older
    /// than the trace have no known address and are not counted).
    pub traced_bytes: u64,
    /// The band with the most of those bytes, when any.
    pub band: Option<u32>,
}

/// One device's packed trace.
#[derive(Debug, Clone)]
pub struct DeviceTimeline {
    /// The CUDA device index.
    pub device: i64,
    /// Events kept.
    pub events: usize,
    /// Whether the trace has times (else the time steps are all 0).
    pub has_times: bool,
    /// Allocated bytes before the first event.
    pub start_allocated: u64,
    /// Reserved bytes before the first event.
    pub start_reserved: u64,
    /// Index among the kept events after which the peak is reached (`None`: before the first).
    pub peak_event: Option<usize>,
    /// Microseconds from the first event to the last.
    pub span_us: u64,
    /// Microseconds from the first event to the peak.
    pub peak_x_us: u64,
    /// Over kept-event order.
    pub by_event: Overview,
    /// Over time (empty without times).
    pub by_time: Overview,
    /// The packed events, deflated (zlib).
    pub packed: Vec<u8>,
    /// [`Symbols`] as JSON, deflated (zlib).
    pub symbols: Vec<u8>,
    /// The owner bands, most bytes at the peak first, `other` (when there is one) last.
    pub bands: Vec<Band>,
    /// The segments reserved at the peak, by address.
    pub peak_segments: Vec<PeakSegment>,
    /// The band of the blocks older than the trace (`start_allocated`).
    pub before_band: u32,
}

impl DeviceTimeline {
    /// Packs the trace of `report`'s device.
    pub fn build(snapshot: &Snapshot, report: &DeviceReport) -> DeviceTimeline {
        let events = analyze::device_trace(snapshot, report.device);
        let mut live: HashMap<u64, (u64, u32)> = HashMap::default();
        let mut live_at_peak: HashMap<u64, (u64, u32)> = HashMap::default();
        // Raw owners: 0 is the owner of blocks older than the trace.
        let mut owners: Vec<String> = vec![owner::BEFORE_TRACE.to_owned()];
        let mut owner_ids: HashMap<String, u32> = HashMap::default();
        owner_ids.insert(owner::BEFORE_TRACE.to_owned(), 0);
        let mut stack_owner: HashMap<StackId, u32> = HashMap::default();
        let mut owner_of = |stack: StackId| {
            *stack_owner.entry(stack).or_insert_with(|| {
                let frames = snapshot.frames.stack(stack);
                let name = owner::owner(frames.map(|f| (&*f.filename, &*f.name))).into_owned();
                let next = owners.len() as u32;
                *owner_ids.entry(name.clone()).or_insert_with(|| {
                    owners.push(name);
                    next
                })
            })
        };
        let mut size_counts: HashMap<u64, u32> = HashMap::default();
        let mut stack_ids: HashMap<StackId, u32> = HashMap::default();
        stack_ids.insert(0, 0);
        let mut stacks_used: Vec<StackId> = vec![0];
        // (kind, stack, size, replaced size, time, raw owner added, raw owner of the block ended)
        let mut kept: Vec<(Kind, u32, u64, u64, i64, u32, u32)> = Vec::new();
        let mut peak_event = None;
        for (i, e) in events.iter().enumerate() {
            let (kind, size, replaced, added, ended) = match e.action {
                Action::Alloc => {
                    let added = owner_of(e.stack);
                    match live.insert(e.addr, (e.size, added)) {
                        Some((old, ended)) => (Kind::Replace, e.size, old, added, ended),
                        None => (Kind::Alloc, e.size, 0, added, 0),
                    }
                }
                Action::FreeRequested => {
                    let (size, ended) = live.remove(&e.addr).unwrap_or((e.size, 0));
                    (Kind::Free, size, 0, 0, ended)
                }
                Action::SegmentAlloc | Action::SegmentMap => (Kind::Reserve, e.size, 0, 0, 0),
                Action::SegmentFree | Action::SegmentUnmap => (Kind::Release, e.size, 0, 0, 0),
                Action::Oom => (Kind::Oom, e.size, 0, 0, 0),
                _ => {
                    if report.peak_event_index == Some(i) {
                        live_at_peak = live.clone();
                    }
                    continue;
                }
            };
            if report.peak_event_index == Some(i) {
                live_at_peak = live.clone();
            }
            let stack = *stack_ids.entry(e.stack).or_insert_with(|| {
                stacks_used.push(e.stack);
                (stacks_used.len() - 1) as u32
            });
            *size_counts.entry(size).or_default() += 1;
            if kind == Kind::Replace {
                *size_counts.entry(replaced).or_default() += 1;
            }
            kept.push((kind, stack, size, replaced, e.time_us, added, ended));
            if report.peak_event_index.is_some_and(|p| p >= i) {
                peak_event = Some(kept.len() - 1);
            }
        }
        let mut sizes: Vec<(u64, u32)> = size_counts.into_iter().collect();
        sizes.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let size_index: HashMap<u64, u32> = sizes
            .iter()
            .enumerate()
            .map(|(i, &(s, _))| (s, i as u32))
            .collect();

        let start_allocated = report.live_before_trace_bytes;
        let (bands, band_of) = bands(&owners, start_allocated, &kept, peak_event);
        let peak_segments = peak_segments(snapshot, report, &live_at_peak, &band_of);
        let reserve_delta: i128 = kept
            .iter()
            .map(|k| match k.0 {
                Kind::Reserve => i128::from(k.2),
                Kind::Release => -i128::from(k.2),
                _ => 0,
            })
            .sum();
        let start_reserved = (i128::from(report.reserved_bytes) - reserve_delta).max(0) as u64;
        let has_times = report.trace_start_us.is_some();
        let t0 = kept.first().map_or(0, |k| k.4);
        let mut raw = Vec::with_capacity(kept.len() * 5);
        let mut by_event = Columns::new(kept.len() as f64);
        let span_us = if has_times {
            kept.iter()
                .map(|k| k.4.saturating_sub(t0).max(0) as u64)
                .max()
                .unwrap_or(0)
        } else {
            0
        };
        let mut by_time = Columns::new(span_us as f64);
        let (mut allocated, mut reserved) =
            (i128::from(start_allocated), i128::from(start_reserved));
        let mut x = 0u64;
        let mut peak_x_us = 0;
        for (i, &(kind, stack, size, replaced, time, _, ended)) in kept.iter().enumerate() {
            let t = if has_times {
                (time.saturating_sub(t0).max(0) as u64).max(x)
            } else {
                0
            };
            let dt = t - x;
            x = t;
            if peak_event == Some(i) {
                peak_x_us = t;
            }
            varint(&mut raw, u64::from(stack) << 3 | kind as u64);
            varint(&mut raw, size_index[&size].into());
            varint(&mut raw, dt);
            match kind {
                Kind::Alloc => allocated += i128::from(size),
                Kind::Replace => {
                    varint(&mut raw, size_index[&replaced].into());
                    varint(&mut raw, band_of[ended as usize].into());
                    allocated += i128::from(size) - i128::from(replaced);
                }
                Kind::Free => {
                    varint(&mut raw, band_of[ended as usize].into());
                    allocated -= i128::from(size);
                }
                Kind::Reserve => reserved += i128::from(size),
                Kind::Release => reserved -= i128::from(size),
                Kind::Oom => {}
            }
            let (a, r) = (allocated.max(0) as u64, reserved.max(0) as u64);
            by_event.add(i as f64, a, r);
            if has_times {
                by_time.add(t as f64, a, r);
            }
        }
        let names = analyze::FrameNames::new(&snapshot.frames);
        let mut frame_ids: HashMap<String, u32> = HashMap::default();
        let mut symbols = Symbols {
            frames: Vec::new(),
            stacks: Vec::with_capacity(stacks_used.len()),
            key_frames: Vec::with_capacity(stacks_used.len()),
            sizes: sizes.iter().map(|s| s.0).collect(),
            stack_bands: Vec::with_capacity(stacks_used.len()),
        };
        for &stack in &stacks_used {
            symbols
                .stack_bands
                .push(stack_owner.get(&stack).map_or(0, |&o| band_of[o as usize]));
            let (frames, key) = names.whole((stack != 0).then_some(stack));
            let ids = frames
                .into_iter()
                .map(|f| {
                    let next = symbols.frames.len() as u32;
                    *frame_ids.entry(f.clone()).or_insert_with(|| {
                        symbols.frames.push(f);
                        next
                    })
                })
                .collect();
            symbols.stacks.push(ids);
            symbols.key_frames.push(key.map_or(-1, |k| k as i64));
        }
        let json = serde_json::to_vec(&symbols).expect("symbols serialize");
        DeviceTimeline {
            device: report.device,
            events: kept.len(),
            has_times,
            start_allocated,
            start_reserved,
            peak_event,
            span_us,
            peak_x_us,
            by_event: by_event.finish(),
            by_time: if has_times {
                by_time.finish()
            } else {
                Overview::default()
            },
            packed: deflate(&raw),
            symbols: deflate(&json),
            before_band: band_of[0],
            bands,
            peak_segments,
        }
    }
}

/// The bands of `owners` (raw ids as in `kept`): the [`MAX_BANDS`] − 1 with the most bytes at
/// the peak, then [`OTHER`]; and the band of each raw owner.
#[allow(clippy::type_complexity)]
fn bands(
    owners: &[String],
    start_allocated: u64,
    kept: &[(Kind, u32, u64, u64, i64, u32, u32)],
    peak_event: Option<usize>,
) -> (Vec<Band>, Vec<u32>) {
    let mut at_peak = vec![0i128; owners.len()];
    at_peak[0] = i128::from(start_allocated);
    for &(kind, _, size, replaced, _, added, ended) in &kept[..peak_event.map_or(0, |p| p + 1)] {
        let (size, replaced) = (i128::from(size), i128::from(replaced));
        match kind {
            Kind::Alloc => at_peak[added as usize] += size,
            Kind::Replace => {
                at_peak[added as usize] += size;
                at_peak[ended as usize] -= replaced;
            }
            Kind::Free => at_peak[ended as usize] -= size,
            _ => {}
        }
    }
    let mut order: Vec<usize> = (0..owners.len()).collect();
    order.sort_by(|&a, &b| {
        at_peak[b]
            .cmp(&at_peak[a])
            .then_with(|| owners[a].cmp(&owners[b]))
    });
    let mut band_of = vec![0u32; owners.len()];
    let mut bands: Vec<Band> = Vec::new();
    let spill = order.len() > MAX_BANDS;
    for (rank, &o) in order.iter().enumerate() {
        let bytes = at_peak[o].max(0) as u64;
        if spill && rank >= MAX_BANDS - 1 {
            if rank == MAX_BANDS - 1 {
                bands.push(Band {
                    name: OTHER.to_owned(),
                    peak_bytes: 0,
                });
            }
            band_of[o] = (MAX_BANDS - 1) as u32;
            bands[MAX_BANDS - 1].peak_bytes += bytes;
        } else {
            band_of[o] = bands.len() as u32;
            bands.push(Band {
                name: owners[o].clone(),
                peak_bytes: bytes,
            });
        }
    }
    (bands, band_of)
}

/// The device's segments reserved at the peak (those at the end, with the trace after the
/// peak undone), and the traced blocks live in each there.
fn peak_segments(
    snapshot: &Snapshot,
    report: &DeviceReport,
    live_at_peak: &HashMap<u64, (u64, u32)>,
    band_of: &[u32],
) -> Vec<PeakSegment> {
    let mut segments: std::collections::BTreeMap<u64, u64> = snapshot
        .segments
        .iter()
        .filter(|s| s.device == report.device)
        .map(|s| (s.address, s.total_size))
        .collect();
    let events = analyze::device_trace(snapshot, report.device);
    let after = report
        .peak_event_index
        .map_or(0, |p| p + 1)
        .min(events.len());
    for e in events[after..].iter().rev() {
        match e.action {
            Action::SegmentAlloc | Action::SegmentMap => {
                segments.remove(&e.addr);
            }
            Action::SegmentFree | Action::SegmentUnmap => {
                segments.insert(e.addr, e.size);
            }
            _ => {}
        }
    }
    let mut used: HashMap<u64, (u64, HashMap<u32, u64>)> = HashMap::default();
    for (&addr, &(size, owner)) in live_at_peak {
        if let Some((&base, &len)) = segments.range(..=addr).next_back()
            && addr < base + len
        {
            let u = used.entry(base).or_default();
            u.0 += size;
            *u.1.entry(band_of[owner as usize]).or_default() += size;
        }
    }
    segments
        .into_iter()
        .map(|(address, size)| {
            let (traced_bytes, band) = used.get(&address).map_or((0, None), |(bytes, by)| {
                let top = by.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)));
                (*bytes, top.map(|(&b, _)| b))
            });
            PeakSegment {
                address,
                size,
                traced_bytes,
                band,
            }
        })
        .collect()
}

/// Builds an [`Overview`] of points added in x order over `0..=x_max`.
struct Columns {
    x_max: f64,
    overview: Overview,
}

impl Columns {
    fn new(x_max: f64) -> Self {
        Columns {
            x_max,
            overview: Overview::default(),
        }
    }

    fn add(&mut self, x: f64, allocated: u64, reserved: u64) {
        let column = if self.x_max > 0.0 {
            ((x / self.x_max * OVERVIEW_COLUMNS as f64) as usize).min(OVERVIEW_COLUMNS - 1)
        } else {
            0
        };
        let o = &mut self.overview;
        while o.allocated_max.len() <= column {
            // A column without events carries the level of the one before it.
            let (lo, hi, r) = match (o.allocated_max.last(), o.reserved_max.last()) {
                (Some(&hi), Some(&r)) if o.allocated_max.len() < column => (hi, hi, r),
                _ => (allocated, allocated, reserved),
            };
            o.allocated_min.push(lo);
            o.allocated_max.push(hi);
            o.reserved_max.push(r);
        }
        o.allocated_min[column] = o.allocated_min[column].min(allocated);
        o.allocated_max[column] = o.allocated_max[column].max(allocated);
        o.reserved_max[column] = o.reserved_max[column].max(reserved);
    }

    fn finish(self) -> Overview {
        self.overview
    }
}

/// LEB128: 7 bits per byte, low first, the high bit set on all but the last.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn deflate(bytes: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
    z.write_all(bytes).expect("writing to memory");
    z.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unpacks what the page unpacks and replays allocated bytes: the highest value must be
    /// the report's peak, reached at `peak_event`.
    fn replay(t: &DeviceTimeline) -> (u64, Option<usize>) {
        use std::io::Read;
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(&t.packed[..])
            .read_to_end(&mut raw)
            .unwrap();
        let mut json = Vec::new();
        flate2::read::ZlibDecoder::new(&t.symbols[..])
            .read_to_end(&mut json)
            .unwrap();
        let symbols: serde_json::Value = serde_json::from_slice(&json).unwrap();
        let sizes: Vec<u64> = symbols["sizes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let mut at = 0;
        let mut next = || {
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let b = raw[at];
                at += 1;
                v |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    return v;
                }
            }
        };
        let mut allocated = t.start_allocated as i128;
        let mut best = (allocated, None);
        for i in 0..t.events {
            let head = next();
            let size = sizes[next() as usize] as i128;
            next();
            match head & 7 {
                0 => allocated += size,
                1 => {
                    next();
                    allocated -= size;
                }
                5 => {
                    allocated += size - sizes[next() as usize] as i128;
                    next();
                }
                _ => {}
            }
            if allocated > best.0 {
                best = (allocated, Some(i));
            }
        }
        (best.0 as u64, best.1)
    }

    /// On the kept real snapshots and the synthetic one with an alloc on a live address.
    #[test]
    fn the_page_replays_the_reports_peak() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        for file in [
            "tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz",
            "tests/data/e2e/dsv2-tiny-pp1-instr-rank0-step0.pickle.gz",
            "tests/data/snapshot/basic_p4.pickle",
        ] {
            let options = crate::LoadOptions {
                progress: false,
                timeline: true,
                ..Default::default()
            };
            let r =
                crate::load_with(std::path::Path::new(&format!("{root}/{file}")), options).unwrap();
            let t = &r.timelines[0];
            assert_eq!(
                replay(t),
                (r.primary().peak_allocated_bytes, t.peak_event),
                "{file}"
            );
            // The bands share out the peak, and the segments at the peak hold it.
            let peak = r.primary().peak_allocated_bytes;
            assert_eq!(
                t.bands.iter().map(|b| b.peak_bytes).sum::<u64>(),
                peak,
                "{file}"
            );
            assert!(t.bands.len() <= MAX_BANDS, "{file}");
            let reserved: u64 = t.peak_segments.iter().map(|s| s.size).sum();
            assert_eq!(reserved, r.primary().peak_reserved_bytes, "{file}");
            // About 2 bytes an event once there are enough to compress.
            assert!(
                t.events < 1000 || t.packed.len() < t.events * 3,
                "{file}: {} bytes",
                t.packed.len()
            );
        }
    }

    #[test]
    fn varints_are_leb128() {
        let mut out = Vec::new();
        varint(&mut out, 0);
        varint(&mut out, 127);
        varint(&mut out, 300);
        assert_eq!(out, [0, 127, 0xac, 0x02]);
    }
}
