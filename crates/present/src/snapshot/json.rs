//! The JSON of `memprints snapshot` and `memprints snapshot diff`; [`schema`] is its JSON Schema,
//! generated from the types below (`schema/snapshot.schema.json`).
//!
//! Contract: pretty-printed with a trailing newline; sizes are exact integers in bytes; the
//! snapshot-level fields are the primary device's, `devices` lists every device (primary
//! first), stack and diff rows are cut to `top`; inputs that failed are listed in `errors`.
//! Field order is the key order of the report's JSON (the diff's keys are sorted): a change
//! here is a change of the schema.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use memprints_snapshot::analyze::{DeviceReport, OomEvent, StackGroup};
use memprints_snapshot::diff::SnapshotDiff;
use memprints_snapshot::owner::OwnerBytes;
use memprints_snapshot::{FailedInput, SnapshotReport};

use crate::json_schema;

/// Bumped whenever the JSON changes incompatibly.
pub const SCHEMA_VERSION: u32 = 2;

/// What the snapshot JSON is, for the schema's readers; the types' doc comments say the rest.
const DESCRIPTION: &str = "Output of `memprints snapshot --format json` (a report) and \
    `memprints snapshot diff --format json` (a diff). Byte counts are exact integers.";

/// `memprints snapshot --format json`.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "SnapshotReport")]
struct JsonReport<'a> {
    /// The version of this schema ([`SCHEMA_VERSION`]).
    #[schemars(extend("const" = SCHEMA_VERSION))]
    schema_version: u32,
    /// One entry per snapshot read, in input order.
    snapshots: Vec<JsonSnapshot<'a>>,
    /// Inputs that could not be read (the command then exits 1).
    errors: &'a [FailedInput],
}

/// One snapshot file: its primary device's figures, and every device.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Snapshot")]
struct JsonSnapshot<'a> {
    /// The file, as given.
    path: &'a str,
    /// From `rank(\d+)` in the file name.
    rank: Option<u32>,
    /// The file's size (compressed, when it is).
    file_bytes: u64,
    /// Trace entries over all devices.
    events: usize,
    /// The primary device: the first of `devices`.
    #[serde(flatten)]
    primary: JsonDevice<'a>,
    /// Every device with segments or trace events; the first is the one whose figures the
    /// snapshot-level fields repeat (highest peak, then most events, then lowest index).
    devices: Vec<JsonDeviceEntry<'a>>,
    /// The snapshot's `allocator_settings`, values rendered as text.
    allocator_settings: BTreeMap<&'a str, &'a str>,
}

/// One device of a snapshot.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "Device")]
struct JsonDeviceEntry<'a> {
    /// Entries in this device's trace.
    events: usize,
    /// The device's figures.
    #[serde(flatten)]
    device: JsonDevice<'a>,
}

/// One device's figures, at snapshot time (the end of the trace) and at its peak.
#[derive(Serialize, JsonSchema)]
struct JsonDevice<'a> {
    /// CUDA device index.
    device: i64,
    /// Segments on the device at snapshot time.
    segments: usize,
    /// Blocks in those segments.
    blocks: usize,
    /// Sum of the segments' `total_size` at snapshot time: what the caching allocator holds.
    reserved_bytes: u64,
    /// Sum of the segments' `allocated_size` at snapshot time.
    allocated_bytes: u64,
    /// Sum of the segments' `active_size` (allocated plus pending free) at snapshot time.
    active_bytes: u64,
    /// Sum of the segments' `requested_size` at snapshot time.
    requested_bytes: u64,
    /// Sum of inactive block sizes at snapshot time: reserved but free (cached).
    free_bytes: u64,
    /// The largest inactive block at snapshot time.
    largest_free_block_bytes: u64,
    /// Free (inactive) bytes in segments that still hold an active block: the allocator cannot
    /// release them.
    stranded_free_bytes: u64,
    /// Segments with no active block (the allocator releases them before raising an OOM).
    empty_segments: usize,
    /// Total size of the empty segments.
    empty_segment_bytes: u64,
    /// `stranded_free_bytes / (reserved_bytes - empty_segment_bytes)`: the share of the partly
    /// used segments that is free; 0 without partly used segments.
    fragmentation: f64,
    /// Maximum over the trace of the bytes live at that moment. A block is live from its
    /// `alloc` to its `free_requested`; blocks freed in the trace without an `alloc` in it, and
    /// blocks still active in `segments` without an `alloc` (or free) in the trace, are live
    /// from the start. With no trace: the active blocks in `segments`.
    peak_allocated_bytes: u64,
    /// Allocated plus freed-but-not-yet-reusable bytes at the peak.
    peak_active_bytes: u64,
    /// Bytes reserved by the caching allocator at the peak (segments at the end with later
    /// segment events undone).
    peak_reserved_bytes: u64,
    /// `time_us` of the event after which the peak was reached (of the first event if the
    /// peak is at the start); null without a trace.
    peak_time_us: Option<i64>,
    /// Microseconds from the first trace event to the peak; null without trace times.
    peak_since_start_us: Option<i64>,
    /// Index of that event; null if the peak is before the first event or there is no trace.
    peak_event_index: Option<usize>,
    /// `time_us` of the first trace event; null without a trace or times.
    trace_start_us: Option<i64>,
    /// `time_us` of the last trace event; null without a trace or times.
    trace_end_us: Option<i64>,
    /// Bytes counted as live from the start of the trace.
    live_before_trace_bytes: u64,
    /// The `--top` largest groups of blocks live at the peak, largest first (ties by frame):
    /// each with its owner, read off its whole stack, and the frame that asked for it.
    top_stacks: &'a [StackGroup],
    /// Bytes live at the peak per owner, over every group (not only the `--top` ones),
    /// largest first.
    owners_at_peak: &'a [OwnerBytes],
    /// The `--top` largest groups of blocks allocated (`active_allocated`) in `segments`.
    end_stacks: &'a [StackGroup],
    /// The trace's `oom` entries, in trace order.
    ooms: &'a [OomEvent],
}

/// `memprints snapshot diff --format json`.
#[derive(Serialize, JsonSchema)]
#[schemars(rename = "DiffReport")]
struct JsonDiff<'a> {
    /// What changed from snapshot A to snapshot B, rows cut to `--top`.
    diff: &'a SnapshotDiff,
    /// The version of this schema ([`SCHEMA_VERSION`]).
    #[schemars(extend("const" = SCHEMA_VERSION))]
    schema_version: u32,
}

/// The JSON Schema of what [`report`] and [`diff`] write (`schema/snapshot.schema.json`): one
/// of the two documents.
pub fn schema() -> schemars::Schema {
    let mut generator = json_schema::generator();
    let report = generator.subschema_for::<JsonReport>();
    let diff = generator.subschema_for::<JsonDiff>();
    let mut root = schemars::json_schema!({ "oneOf": [report, diff] });
    if let Some(meta) = &generator.settings().meta_schema {
        root.insert("$schema".into(), meta.to_string().into());
    }
    root.insert("$defs".into(), generator.take_definitions(true).into());
    json_schema::document(
        root,
        "snapshot.schema.json",
        "memprints snapshot report",
        DESCRIPTION,
    )
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
        owners_at_peak: &d.peak_owners,
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

/// The JSON diff: `{"diff": {...}, "schema_version": 2}` with rows cut to `top`.
pub fn diff(d: &SnapshotDiff, top: usize) -> String {
    let mut d = d.clone();
    d.at_peak.truncate(top);
    d.at_end.truncate(top);
    let document = JsonDiff {
        diff: &d,
        schema_version: SCHEMA_VERSION,
    };
    // Through a `Value`, whose keys are sorted: the diff's JSON has always had them in that
    // order.
    let value = serde_json::to_value(&document).expect("diff serializes");
    let mut out = serde_json::to_string_pretty(&value).expect("diff serializes");
    out.push('\n');
    out
}
