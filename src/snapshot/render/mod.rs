//! Writes snapshot reports and diffs as text ([`text`]), JSON ([`json`], following
//! `schema/snapshot.schema.json`) or a self-contained HTML page with an SVG timeline ([`html`]).
//!
//! Contract: each writer is pure (the same reports give the same string) and ends with a
//! newline. The snapshot-level JSON fields are the primary device's (the one with the highest
//! peak), `devices` lists every device, and stack lists are cut to the `--top` largest. Text and
//! HTML show the same numbers and, with more than one snapshot, a per-rank peak table; their
//! byte counts are binary units (`1.50 GiB`, [`crate::present::numbers::bytes`]); JSON keeps
//! exact integers.

pub mod html;
pub mod json;
pub mod text;

use super::SnapshotReport;
use super::diff::DiffRow;
use crate::present::numbers::{bytes, signed_bytes};
use crate::present::table::Table;

/// A time from the trace, or `-` when the snapshot has none.
fn time(t: Option<i64>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("time_us {t}"))
}

/// Per snapshot: its rank, peak, when, reserved bytes, OOMs and file.
fn rank_table(reports: &[SnapshotReport]) -> Table {
    let mut table = Table::new(&[
        ("rank", true),
        ("peak", true),
        ("at", false),
        ("reserved", true),
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
                time(d.peak_time_us),
                bytes(d.reserved_bytes),
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
