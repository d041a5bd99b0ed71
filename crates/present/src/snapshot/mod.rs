//! Writes snapshot reports and diffs as text ([`text`]), JSON ([`json`], following
//! `schema/snapshot.schema.json`) or a self-contained HTML page with an interactive timeline
//! ([`html`]).
//!
//! Contract: each writer is pure (the same reports give the same string) and ends with a
//! newline. The snapshot-level JSON fields are the primary device's (the one with the highest
//! peak), `devices` lists every device, and stack lists are cut to the `--top` largest. Text and
//! HTML show the same numbers and, with more than one snapshot, a per-rank peak table; their
//! byte counts are binary units (`1.50 GiB`, [`crate::numbers::bytes`]); JSON keeps
//! exact integers.

pub mod html;
pub mod json;
pub mod text;

use crate::numbers::{bytes, signed_bytes};
use crate::table::Table;
use memprints_snapshot::SnapshotReport;
use memprints_snapshot::analyze::DeviceReport;
use memprints_snapshot::diff::DiffRow;

/// The moment of a device's peak: time since the trace began, with the raw `time_us`, or `-`
/// when the snapshot has no times.
/// What follows the empty segments' figure: their memory was let go before an OOM, when the
/// snapshot holds one (the same words in every format).
pub(super) fn released_before_oom(d: &DeviceReport) -> &'static str {
    if d.ooms.is_empty() {
        ""
    } else {
        " (released before an OOM)"
    }
}

pub(super) fn peak_time(d: &DeviceReport) -> String {
    match (d.peak_since_start_us(), d.peak_time_us) {
        (Some(since), Some(raw)) => format!("{} into the trace (time_us {raw})", duration(since)),
        (None, Some(raw)) if raw != 0 => format!("time_us {raw}"),
        _ => "-".into(),
    }
}

/// When an OOM happened: since the trace began, else its raw `time_us`.
pub(super) fn oom_time(d: &DeviceReport, time_us: i64) -> String {
    match d.trace_start_us {
        Some(t0) => format!("{} into the trace", duration(time_us.saturating_sub(t0))),
        None => format!("time_us {time_us}"),
    }
}

/// A span of microseconds, readable: `35 µs`, `12.50 ms`, `8.319 s`.
pub fn duration(us: i64) -> String {
    let abs = us.unsigned_abs();
    if abs < 1_000 {
        format!("{us} µs")
    } else if abs < 1_000_000 {
        format!("{:.2} ms", us as f64 / 1e3)
    } else {
        format!("{:.3} s", us as f64 / 1e6)
    }
}

/// Per snapshot: its rank, peak, when (since the trace began), reserved at the peak, OOMs and
/// file.
fn rank_table(reports: &[SnapshotReport]) -> Table {
    let mut table = Table::new(&[
        ("rank", true),
        ("peak", true),
        ("at", false),
        ("reserved at peak", true),
        ("OOMs", true),
        ("file", false),
    ]);
    table.rows = reports
        .iter()
        .map(|r| {
            let d = r.primary();
            vec![
                r.rank.map_or_else(|| "-".into(), |k| k.to_string()),
                bytes(d.peak_allocated_bytes),
                d.peak_since_start_us().map_or_else(|| "-".into(), duration),
                bytes(d.peak_reserved_bytes),
                d.ooms.len().to_string(),
                r.path.clone(),
            ]
        })
        .collect();
    table
}

/// The `top` largest changes of a diff, under a header whose count column says `count_title`.
fn diff_table(rows: &[DiffRow], top: usize, count_title: &str) -> Table {
    let mut table = Table::new(&[
        ("change", true),
        ("A", true),
        ("B", true),
        (count_title, true),
        ("frame", false),
    ]);
    table.rows = rows
        .iter()
        .take(top)
        .map(|r| {
            vec![
                signed_bytes(r.delta_bytes),
                bytes(r.a_bytes),
                bytes(r.b_bytes),
                format!("{}->{}", r.a_count, r.b_count),
                r.frame.clone(),
            ]
        })
        .collect();
    table
}
