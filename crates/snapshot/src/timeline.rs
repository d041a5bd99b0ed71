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

use std::io::Write;

use foldhash::HashMap;

use super::analyze::{self, DeviceReport};
use super::decode::{Action, Snapshot, StackId};

/// Columns of the overview.
pub const OVERVIEW_COLUMNS: usize = 1200;

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
}

impl DeviceTimeline {
    /// Packs the trace of `report`'s device.
    pub fn build(snapshot: &Snapshot, report: &DeviceReport) -> DeviceTimeline {
        let events = analyze::device_trace(snapshot, report.device);
        let mut live: HashMap<u64, u64> = HashMap::default();
        let mut size_counts: HashMap<u64, u32> = HashMap::default();
        let mut stack_ids: HashMap<StackId, u32> = HashMap::default();
        stack_ids.insert(0, 0);
        let mut stacks_used: Vec<StackId> = vec![0];
        // (kind, stack, size, replaced size, time)
        let mut kept: Vec<(Kind, u32, u64, u64, i64)> = Vec::new();
        let mut peak_event = None;
        for (i, e) in events.iter().enumerate() {
            let (kind, size, replaced) = match e.action {
                Action::Alloc => match live.insert(e.addr, e.size) {
                    Some(old) => (Kind::Replace, e.size, old),
                    None => (Kind::Alloc, e.size, 0),
                },
                Action::FreeRequested => (Kind::Free, live.remove(&e.addr).unwrap_or(e.size), 0),
                Action::SegmentAlloc | Action::SegmentMap => (Kind::Reserve, e.size, 0),
                Action::SegmentFree | Action::SegmentUnmap => (Kind::Release, e.size, 0),
                Action::Oom => (Kind::Oom, e.size, 0),
                _ => {
                    continue;
                }
            };
            let stack = *stack_ids.entry(e.stack).or_insert_with(|| {
                stacks_used.push(e.stack);
                (stacks_used.len() - 1) as u32
            });
            *size_counts.entry(size).or_default() += 1;
            if kind == Kind::Replace {
                *size_counts.entry(replaced).or_default() += 1;
            }
            kept.push((kind, stack, size, replaced, e.time_us));
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
        for (i, &(kind, stack, size, replaced, time)) in kept.iter().enumerate() {
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
                    allocated += i128::from(size) - i128::from(replaced);
                }
                Kind::Free => allocated -= i128::from(size),
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
        };
        for &stack in &stacks_used {
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
        }
    }
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
                1 => allocated -= size,
                5 => allocated += size - sizes[next() as usize] as i128,
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
