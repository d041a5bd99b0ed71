//! Two runs side by side (`memprints report diff A B`): per rank the pipeline peak, per rank and
//! component the breakdown at the peak, per rank and layer what the detail layers saved and
//! grew, PithTrain's step-line peaks, and, where both runs have a memory snapshot of a rank,
//! what held memory at the snapshots' peaks.
//!
//! Contract: [`diff`] is pure. Every figure is a [`Pair`]: A's bytes, B's bytes and `delta`
//! (B − A); a side that did not measure the figure is `None` (JSON `null`), and then so is the
//! delta: a figure is never taken as 0 because one run lacks it. Rows come in rank order, then
//! in the order of [`COMPONENTS`], layers by number, snapshot owners by A's bytes then B's. A
//! run diffed with itself gives every delta 0.
//!
//! The JSON (`report diff --format json`) is [`RunDiff`] as serialised here, its own schema
//! with its own [`DIFF_SCHEMA_VERSION`]:
//!
//! ```text
//! {"schema_version": 1,
//!  "a"|"b": {"name", "sources": [str], "run": int (from 1), "runs": int},
//!  "ranks":      [{"rank", "pp_a", "pp_b", "peak_a", "peak_b", "allocated": PAIR, "device": PAIR}],
//!  "components": [{"rank", "component", ...PAIR}],
//!  "layers":     [{"rank", "layer", "saved": PAIR, "growth": PAIR}],
//!  "steps":      [{"figure", "step_a", "step_b", ...PAIR}],
//!  "snapshots":  [{"rank", "owner", ...PAIR}]}
//! PAIR = "a": bytes|null, "b": bytes|null, "delta": bytes|null
//! ```

use serde::Serialize;

use crate::schema::{Breakdown, RankReport, Run};

/// Bumped whenever the diff's JSON changes incompatibly.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

/// The breakdown's components as the diff names them, in stacking order.
pub const COMPONENTS: [&str; 7] = [
    "weights",
    "optimizer_state",
    "other_static",
    "activations",
    "cached",
    "non_pytorch",
    "total",
];

/// The `owner` of a snapshot row that compares the snapshots' peaks themselves.
pub const SNAPSHOT_PEAK: &str = "peak allocated";

/// Run A beside run B.
#[derive(Debug, Clone, Serialize)]
pub struct RunDiff {
    /// [`DIFF_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run compared from.
    pub a: Side,
    /// The run compared with it.
    pub b: Side,
    /// Per rank in either run: its pipeline peak.
    pub ranks: Vec<RankRow>,
    /// Per rank in both runs: the breakdown at its peak, component by component.
    pub components: Vec<ComponentRow>,
    /// Per rank and detail layer in either run: saved tensors and the probes' growth.
    pub layers: Vec<LayerRow>,
    /// PithTrain's step lines: the first step's peak and the highest.
    pub steps: Vec<StepRow>,
    /// Per rank with a read snapshot in both runs: its peak and what held memory there.
    pub snapshots: Vec<SnapshotRow>,
}

/// Which run of which input a side is.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The run's name.
    pub name: String,
    /// Its files.
    pub sources: Vec<String>,
    /// Its number among the runs read from the input, from 1.
    pub run: usize,
    /// How many runs the input held.
    pub runs: usize,
}

/// A figure in both runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Pair {
    /// Run A's bytes; `None` when it did not measure it.
    pub a: Option<i64>,
    /// Run B's bytes, likewise.
    pub b: Option<i64>,
    /// `b - a`, when both measured it.
    pub delta: Option<i64>,
}

impl Pair {
    /// The pair of `a` and `b`.
    pub fn new(a: Option<i64>, b: Option<i64>) -> Self {
        let delta = a.zip(b).map(|(a, b)| b - a);
        Pair { a, b, delta }
    }
}

/// One rank's pipeline peak in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    /// The global rank.
    pub rank: u32,
    /// Its pipeline stage in A.
    pub pp_a: Option<u32>,
    /// Its pipeline stage in B.
    pub pp_b: Option<u32>,
    /// The print at A's peak.
    pub peak_a: Option<String>,
    /// The print at B's peak.
    pub peak_b: Option<String>,
    /// Allocated at the peak.
    pub allocated: Pair,
    /// What the device held at the peak (the breakdown's total).
    pub device: Pair,
}

/// One component of one rank's breakdown at its peak.
#[derive(Debug, Clone, Serialize)]
pub struct ComponentRow {
    /// The global rank.
    pub rank: u32,
    /// One of [`COMPONENTS`].
    pub component: &'static str,
    /// Its bytes.
    #[serde(flatten)]
    pub bytes: Pair,
}

/// One detail layer of one rank.
#[derive(Debug, Clone, Serialize)]
pub struct LayerRow {
    /// The global rank.
    pub rank: u32,
    /// The layer's number.
    pub layer: u32,
    /// Tensors the layer saved for backward (activations and weights, every stage) in the
    /// rank's first pass.
    pub saved: Pair,
    /// What allocated memory grew by over the layer's probes in that pass (the sum of their
    /// changes).
    pub growth: Pair,
}

/// One figure of PithTrain's step lines.
#[derive(Debug, Clone, Serialize)]
pub struct StepRow {
    /// `first step peak-gpu-memory` or `highest peak-gpu-memory`.
    pub figure: &'static str,
    /// The step A's figure is of.
    pub step_a: Option<u64>,
    /// The step B's figure is of.
    pub step_b: Option<u64>,
    /// The bytes.
    #[serde(flatten)]
    pub bytes: Pair,
}

/// One owner of memory at the snapshots' peaks of a rank (or the peak itself).
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotRow {
    /// The global rank.
    pub rank: u32,
    /// The key frame of a group of blocks, or [`SNAPSHOT_PEAK`].
    pub owner: String,
    /// Its bytes at the peak; `None` where that snapshot's top groups do not name it.
    #[serde(flatten)]
    pub bytes: Pair,
}

/// `a` beside `b`; `a_side` and `b_side` say which runs of their inputs they are.
pub fn diff(a: &Run, a_side: Side, b: &Run, b_side: Side) -> RunDiff {
    let mut ranks: Vec<u32> = a.ranks.iter().chain(&b.ranks).map(|r| r.rank).collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut out = RunDiff {
        schema_version: DIFF_SCHEMA_VERSION,
        a: a_side,
        b: b_side,
        ranks: Vec::new(),
        components: Vec::new(),
        layers: Vec::new(),
        steps: steps(a, b),
        snapshots: Vec::new(),
    };
    for &rank in &ranks {
        let (ra, rb) = (find(a, rank), find(b, rank));
        out.ranks.push(RankRow {
            rank,
            pp_a: ra.and_then(|r| r.pp),
            pp_b: rb.and_then(|r| r.pp),
            peak_a: peak(ra).map(|p| p.label.clone()),
            peak_b: peak(rb).map(|p| p.label.clone()),
            allocated: Pair::new(peak(ra).map(|p| p.allocated), peak(rb).map(|p| p.allocated)),
            device: Pair::new(total(ra), total(rb)),
        });
        if let (Some(ba), Some(bb)) = (
            ra.and_then(|r| r.breakdown.as_ref()),
            rb.and_then(|r| r.breakdown.as_ref()),
        ) {
            let (ca, cb) = (components(ba), components(bb));
            for (k, component) in COMPONENTS.into_iter().enumerate() {
                out.components.push(ComponentRow {
                    rank,
                    component,
                    bytes: Pair::new(ca[k], cb[k]),
                });
            }
        }
        out.layers.extend(layers(rank, ra, rb));
        out.snapshots.extend(snapshots(rank, a, b));
    }
    out
}

fn find(run: &Run, rank: u32) -> Option<&RankReport> {
    run.ranks.iter().find(|r| r.rank == rank)
}

fn peak(r: Option<&RankReport>) -> Option<&crate::schema::Peak> {
    r?.peak.as_ref()
}

fn total(r: Option<&RankReport>) -> Option<i64> {
    Some(r?.breakdown.as_ref()?.total)
}

fn components(b: &Breakdown) -> [Option<i64>; 7] {
    [
        b.weights,
        b.optimizer_state,
        Some(b.other_static),
        Some(b.activations),
        Some(b.cached),
        Some(b.non_pytorch),
        Some(b.total),
    ]
}

/// Per layer of a rank's first pass: (saved bytes, growth); a figure the pass did not print is
/// `None`.
fn layer_figures(r: &RankReport) -> Vec<(u32, Option<i64>, Option<i64>)> {
    let first = r.passes.first().map_or(0, |p| p.pass);
    let mut layers: Vec<u32> = r
        .saved_tensors
        .iter()
        .filter(|g| g.pass == first)
        .filter_map(|g| g.layer)
        .chain(
            r.layers
                .iter()
                .filter(|l| l.pass == first)
                .filter_map(|l| l.layer),
        )
        .collect();
    layers.sort_unstable();
    layers.dedup();
    layers
        .into_iter()
        .map(|n| {
            let groups: Vec<_> = r
                .saved_tensors
                .iter()
                .filter(|g| g.pass == first && g.layer == Some(n))
                .collect();
            let saved = (!groups.is_empty())
                .then(|| groups.iter().map(|g| g.activations + g.weights).sum());
            let probes: Vec<_> = r
                .layers
                .iter()
                .filter(|l| l.pass == first && l.layer == Some(n))
                .collect();
            let growth = (!probes.is_empty()).then(|| probes.iter().filter_map(|l| l.change).sum());
            (n, saved, growth)
        })
        .collect()
}

fn layers(rank: u32, a: Option<&RankReport>, b: Option<&RankReport>) -> Vec<LayerRow> {
    let (la, lb) = (
        a.map(layer_figures).unwrap_or_default(),
        b.map(layer_figures).unwrap_or_default(),
    );
    let mut numbers: Vec<u32> = la.iter().chain(&lb).map(|&(n, _, _)| n).collect();
    numbers.sort_unstable();
    numbers.dedup();
    let get = |side: &[(u32, Option<i64>, Option<i64>)], n: u32| {
        side.iter()
            .find(|&&(m, _, _)| m == n)
            .map_or((None, None), |&(_, s, g)| (s, g))
    };
    numbers
        .into_iter()
        .map(|n| {
            let ((sa, ga), (sb, gb)) = (get(&la, n), get(&lb, n));
            LayerRow {
                rank,
                layer: n,
                saved: Pair::new(sa, sb),
                growth: Pair::new(ga, gb),
            }
        })
        .collect()
}

fn steps(a: &Run, b: &Run) -> Vec<StepRow> {
    let (Some(ta), Some(tb)) = (&a.training, &b.training) else {
        return Vec::new();
    };
    vec![
        StepRow {
            figure: "first step peak-gpu-memory",
            step_a: Some(ta.first_step),
            step_b: Some(tb.first_step),
            bytes: Pair::new(ta.first_step_peak_gpu_memory, tb.first_step_peak_gpu_memory),
        },
        StepRow {
            figure: "highest peak-gpu-memory",
            step_a: ta.peak_step,
            step_b: tb.peak_step,
            bytes: Pair::new(ta.peak_gpu_memory, tb.peak_gpu_memory),
        },
    ]
}

fn snapshots(rank: u32, a: &Run, b: &Run) -> Vec<SnapshotRow> {
    let read = |run: &Run| {
        run.memory
            .snapshots
            .iter()
            .find(|s| s.rank == Some(rank) && s.peak_allocated.is_some())
            .cloned()
    };
    let (Some(sa), Some(sb)) = (read(a), read(b)) else {
        return Vec::new();
    };
    let mut rows = vec![SnapshotRow {
        rank,
        owner: SNAPSHOT_PEAK.to_owned(),
        bytes: Pair::new(sa.peak_allocated, sb.peak_allocated),
    }];
    let mut owners: Vec<&str> = sa
        .top_stacks
        .iter()
        .chain(&sb.top_stacks)
        .map(|g| g.frame.as_str())
        .collect();
    let mut seen = std::collections::HashSet::new();
    owners.retain(|o| seen.insert(*o));
    let bytes = |s: &crate::schema::SnapshotView, frame: &str| {
        s.top_stacks
            .iter()
            .find(|g| g.frame == frame)
            .map(|g| g.bytes)
    };
    rows.extend(owners.into_iter().map(|frame| SnapshotRow {
        rank,
        owner: frame.to_owned(),
        bytes: Pair::new(bytes(&sa, frame), bytes(&sb, frame)),
    }));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_needs_both_sides() {
        assert_eq!(Pair::new(Some(3), Some(5)).delta, Some(2));
        assert_eq!(Pair::new(None, Some(5)).delta, None);
        assert_eq!(Pair::new(Some(3), None).delta, None);
    }
}
