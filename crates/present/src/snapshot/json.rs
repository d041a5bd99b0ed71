//! The JSON of `memprints snapshot` and `memprints snapshot diff`, as documented by
//! `schema/snapshot.schema.json`.
//!
//! Contract: pretty-printed with a trailing newline; sizes are exact integers in bytes; the
//! snapshot-level fields are the primary device's, `devices` lists every device (primary
//! first), stack and diff rows are cut to `top`; inputs that failed are listed in `errors`.
//! Field order is the key order of the JSON: a change here is a change of the schema.

use std::collections::BTreeMap;

use serde::Serialize;

use memprints_snapshot::analyze::{DeviceReport, OomEvent, StackGroup};
use memprints_snapshot::diff::SnapshotDiff;
use memprints_snapshot::{FailedInput, SnapshotReport};

/// Bumped whenever the JSON changes incompatibly.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Serialize)]
struct JsonReport<'a> {
    schema_version: u32,
    snapshots: Vec<JsonSnapshot<'a>>,
    errors: &'a [FailedInput],
}

#[derive(Serialize)]
struct JsonSnapshot<'a> {
    path: &'a str,
    rank: Option<u32>,
    file_bytes: u64,
    events: usize,
    #[serde(flatten)]
    primary: JsonDevice<'a>,
    devices: Vec<JsonDeviceEntry<'a>>,
    allocator_settings: BTreeMap<&'a str, &'a str>,
}

#[derive(Serialize)]
struct JsonDeviceEntry<'a> {
    events: usize,
    #[serde(flatten)]
    device: JsonDevice<'a>,
}

#[derive(Serialize)]
struct JsonDevice<'a> {
    device: i64,
    segments: usize,
    blocks: usize,
    reserved_bytes: u64,
    allocated_bytes: u64,
    active_bytes: u64,
    requested_bytes: u64,
    free_bytes: u64,
    largest_free_block_bytes: u64,
    stranded_free_bytes: u64,
    empty_segments: usize,
    empty_segment_bytes: u64,
    fragmentation: f64,
    peak_allocated_bytes: u64,
    peak_active_bytes: u64,
    peak_reserved_bytes: u64,
    peak_time_us: Option<i64>,
    peak_since_start_us: Option<i64>,
    peak_event_index: Option<usize>,
    trace_start_us: Option<i64>,
    trace_end_us: Option<i64>,
    live_before_trace_bytes: u64,
    top_stacks: &'a [StackGroup],
    end_stacks: &'a [StackGroup],
    ooms: &'a [OomEvent],
}

fn json_device(d: &DeviceReport, top: usize) -> JsonDevice<'_> {
    JsonDevice {
        device: d.device,
        segments: d.segments,
        blocks: d.blocks,
        reserved_bytes: d.reserved_bytes,
        allocated_bytes: d.allocated_bytes,
        active_bytes: d.active_bytes,
        requested_bytes: d.requested_bytes,
        free_bytes: d.free_bytes,
        largest_free_block_bytes: d.largest_free_block_bytes,
        stranded_free_bytes: d.stranded_free_bytes,
        empty_segments: d.empty_segments,
        empty_segment_bytes: d.empty_segment_bytes,
        fragmentation: d.fragmentation,
        peak_allocated_bytes: d.peak_allocated_bytes,
        peak_active_bytes: d.peak_active_bytes,
        peak_reserved_bytes: d.peak_reserved_bytes,
        peak_time_us: d.peak_time_us,
        peak_since_start_us: d.peak_since_start_us(),
        peak_event_index: d.peak_event_index,
        trace_start_us: d.trace_start_us,
        trace_end_us: d.trace_end_us,
        live_before_trace_bytes: d.live_before_trace_bytes,
        top_stacks: &d.peak_stacks[..top.min(d.peak_stacks.len())],
        end_stacks: &d.end_stacks[..top.min(d.end_stacks.len())],
        ooms: &d.ooms,
    }
}

/// The JSON report of `reports`, listing `errors` beside them.
pub fn report(reports: &[SnapshotReport], errors: &[FailedInput], top: usize) -> String {
    let snapshots = reports
        .iter()
        .map(|r| JsonSnapshot {
            path: &r.path,
            rank: r.rank,
            file_bytes: r.file_bytes,
            events: r.events,
            primary: json_device(r.primary(), top),
            devices: r
                .devices
                .iter()
                .map(|d| JsonDeviceEntry {
                    events: d.events,
                    device: json_device(d, top),
                })
                .collect(),
            allocator_settings: r
                .allocator_settings
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
        })
        .collect();
    let report = JsonReport {
        schema_version: SCHEMA_VERSION,
        snapshots,
        errors,
    };
    let mut out = serde_json::to_string_pretty(&report).expect("report serializes");
    out.push('\n');
    out
}

/// The JSON diff: `{"schema_version": 2, "diff": {...}}` with rows cut to `top`.
pub fn diff(d: &SnapshotDiff, top: usize) -> String {
    let mut d = d.clone();
    d.at_peak.truncate(top);
    d.at_end.truncate(top);
    let value = serde_json::json!({ "schema_version": SCHEMA_VERSION, "diff": d });
    let mut out = serde_json::to_string_pretty(&value).expect("diff serializes");
    out.push('\n');
    out
}
