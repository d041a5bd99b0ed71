//! Which stacks grew or shrank between two snapshots.
//!
//! Two comparisons, each over the primary device of each snapshot (see
//! [`super::analyze::analyze`]): the blocks live at the peak of allocated memory, and the
//! blocks still allocated at the end (`segments`). Rows are keyed by the key frame (the groups of
//! several owners under one frame add up), hold both
//! sides' bytes and counts, and sort by the absolute change, biggest first (then by frame);
//! stacks whose bytes did not change are left out.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Serialize;

use super::analyze::{DeviceReport, StackGroup};

/// One key frame's bytes on both sides.
#[derive(Debug, Clone, Serialize, JsonSchema, PartialEq)]
pub struct DiffRow {
    /// The key frame (see [`super::analyze`]).
    pub frame: String,
    /// Its bytes in A.
    pub a_bytes: u64,
    /// Its bytes in B.
    pub b_bytes: u64,
    /// `b_bytes - a_bytes`, clamped to `i64`.
    pub delta_bytes: i64,
    /// Its blocks in A.
    pub a_count: u64,
    /// Its blocks in B.
    pub b_count: u64,
}

/// What changed from snapshot A to snapshot B.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotDiff {
    /// A's path.
    pub a: String,
    /// B's path.
    pub b: String,
    /// A's peak allocated.
    pub a_peak_allocated_bytes: u64,
    /// B's peak allocated.
    pub b_peak_allocated_bytes: u64,
    /// B's peak minus A's, clamped to `i64`.
    pub peak_delta_bytes: i64,
    /// Rows of the blocks live at each peak.
    pub at_peak: Vec<DiffRow>,
    /// Rows of the blocks allocated at the end.
    pub at_end: Vec<DiffRow>,
    /// A's bytes at its peak per owner ([`super::analyze::owners_at_peak`]); not in the JSON.
    #[serde(skip)]
    pub a_owners_at_peak: Vec<(String, u64)>,
    /// B's bytes at its peak per owner; not in the JSON.
    #[serde(skip)]
    pub b_owners_at_peak: Vec<(String, u64)>,
}

/// Compares the primary devices `a` and `b` of two snapshots at `a_path` and `b_path`.
pub fn diff(a_path: &str, a: &DeviceReport, b_path: &str, b: &DeviceReport) -> SnapshotDiff {
    SnapshotDiff {
        a: a_path.to_string(),
        b: b_path.to_string(),
        a_peak_allocated_bytes: a.peak_allocated_bytes,
        b_peak_allocated_bytes: b.peak_allocated_bytes,
        peak_delta_bytes: delta(a.peak_allocated_bytes, b.peak_allocated_bytes),
        at_peak: rows(&a.peak_stacks, &b.peak_stacks),
        at_end: rows(&a.end_stacks, &b.end_stacks),
        a_owners_at_peak: super::analyze::owners_at_peak(a),
        b_owners_at_peak: super::analyze::owners_at_peak(b),
    }
}

fn delta(a: u64, b: u64) -> i64 {
    (i128::from(b) - i128::from(a)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
}

fn rows(a: &[StackGroup], b: &[StackGroup]) -> Vec<DiffRow> {
    let mut by_frame: BTreeMap<&str, DiffRow> = BTreeMap::new();
    let empty = |frame: &str| DiffRow {
        frame: frame.to_string(),
        a_bytes: 0,
        b_bytes: 0,
        delta_bytes: 0,
        a_count: 0,
        b_count: 0,
    };
    for g in a {
        let row = by_frame.entry(&g.frame).or_insert_with(|| empty(&g.frame));
        row.a_bytes += g.bytes;
        row.a_count += g.count;
    }
    for g in b {
        let row = by_frame.entry(&g.frame).or_insert_with(|| empty(&g.frame));
        row.b_bytes += g.bytes;
        row.b_count += g.count;
    }
    let mut out: Vec<DiffRow> = by_frame
        .into_values()
        .map(|mut r| {
            r.delta_bytes = delta(r.a_bytes, r.b_bytes);
            r
        })
        .filter(|r| r.delta_bytes != 0)
        .collect();
    out.sort_by(|x, y| {
        y.delta_bytes
            .unsigned_abs()
            .cmp(&x.delta_bytes.unsigned_abs())
            .then_with(|| x.frame.cmp(&y.frame))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(frame: &str, bytes: u64, count: u64) -> StackGroup {
        StackGroup {
            owner: frame.into(),
            kind: crate::owner::Kind::Model,
            frame: frame.into(),
            bytes,
            count,
            stack: vec![],
            key_frame: None,
        }
    }

    #[test]
    fn rows_sort_by_absolute_change_and_drop_unchanged() {
        let a = [g("x", 100, 1), g("y", 50, 1), g("same", 7, 1)];
        let b = [g("x", 10, 1), g("z", 120, 2), g("same", 7, 1)];
        let r = rows(&a, &b);
        let got: Vec<_> = r
            .iter()
            .map(|r| (r.frame.as_str(), r.delta_bytes))
            .collect();
        assert_eq!(got, vec![("z", 120), ("x", -90), ("y", -50)]);
        assert_eq!((r[0].a_count, r[0].b_count), (0, 2));
    }
}
