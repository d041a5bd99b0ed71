//! Who owns every byte of a rank's device memory at its peak: the prints' parts (weights,
//! optimizer state, what else was there before the pipeline, the allocator's unused reserve,
//! memory outside the allocator), the activations in flight split by the rank's memory
//! snapshot into the buffers that are no activations (cuBLAS's workspace, autotuning, FSDP's
//! collectives, its unsharded gradients, NCCL; named by `memprints_snapshot::owner`), and the
//! saved-tensor prints of the peak's pass by layer and stage.
//!
//! Contract:
//! - [`attach`] sets `owners` on every rank with a breakdown; it reads only the report.
//! - The rows without `within` add up to the breakdown's total: weights, optimizer state and
//!   other static are the breakdown's; gradients and buffers are the snapshot's owners of that
//!   kind at the snapshot's peak; activations are the breakdown's in-flight bytes minus those
//!   (arithmetic), and when the snapshot's buffers are more than the in-flight bytes (they were
//!   live at the snapshot's peak, not all at the prints'), each is cut in proportion so that
//!   the rows still add up, and `how` says so.
//! - Without a snapshot, gradients are not measured (they are in the activations in flight) and
//!   no buffer is named. So too when the peak is not in the first pass (the snapshot is of the
//!   first step; a later pass holds the workspace before its pipeline, in other static) or
//!   nothing is in flight to split.
//! - Saved tensors (within activations): one row per layer and stage of the peak's pass, its
//!   largest print (one forward of one micro-batch); from the prints.

use std::borrow::Cow;

use memprints_snapshot::owner::Kind;

use super::schema::{
    FigureFrom, OwnerKind, PeakOwner, PeakOwners, RankReport, Report, SnapshotView,
};

/// Sets each rank's `owners` (see the module doc).
pub fn attach(report: &mut Report) {
    for run in &mut report.runs {
        // Each rank's first snapshot that names owners, looked up by rank: a run of 10,000
        // ranks and as many snapshots is not searched 10,000 times over.
        let mut by_rank: std::collections::HashMap<u32, &SnapshotView> = Default::default();
        for s in run.memory.snapshots.iter().rev() {
            if let Some(rank) = s.rank
                && s.error.is_none()
                && !s.owners.is_empty()
            {
                by_rank.insert(rank, s);
            }
        }
        // Ranks are independent: split over the cores (a few microseconds each, milliseconds
        // for a run of thousands, while nothing else runs).
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let piece = run.ranks.len().div_ceil(workers).max(PER_THREAD);
        let by_rank = &by_rank;
        let own = move |ranks: &mut [RankReport]| {
            for rank in ranks {
                rank.owners = owners(rank, by_rank.get(&rank.rank).copied());
            }
        };
        if run.ranks.len() <= piece {
            own(&mut run.ranks);
            continue;
        }
        std::thread::scope(|scope| {
            for part in run.ranks.chunks_mut(piece) {
                scope.spawn(move || own(part));
            }
        });
    }
}

/// Below this many ranks a thread costs more than it takes over.
const PER_THREAD: usize = 256;

/// A row; its names and sentences are mostly fixed ones, held without an allocation (a run of
/// 10,000 ranks has a dozen rows each).
fn row(
    owner: impl Into<Cow<'static, str>>,
    kind: OwnerKind,
    bytes: Option<i64>,
    from: FigureFrom,
    how: impl Into<Cow<'static, str>>,
) -> PeakOwner {
    PeakOwner {
        owner: owner.into(),
        kind,
        bytes,
        from,
        how: how.into(),
        within: None,
        layer: None,
        stage: None,
        asked_by: None,
    }
}

/// The owners at `rank`'s peak, with `snapshot` naming the buffers when there is one.
pub fn owners(rank: &RankReport, snapshot: Option<&SnapshotView>) -> Option<PeakOwners> {
    let (peak, b) = (rank.peak.as_ref()?, rank.breakdown.as_ref()?);
    use FigureFrom::{Arithmetic, Prints, Snapshot};
    let mut out = Vec::new();
    out.push(row(
        "weights after setup",
        OwnerKind::Weights,
        b.weights,
        Prints,
        if b.weights.is_some() {
            "allocated at the last setup_model print"
        } else {
            "not measured: no setup_model print gave allocated memory; in other static"
        },
    ));
    // The snapshot is of the first step: it names the buffers of a peak in that step's pass
    // only (a later pass holds the workspace and the optimizer state before its pipeline, in
    // other static), and splits in-flight bytes only when there are some.
    let pass = rank.pipeline.get(peak.index).map(|e| e.pass);
    let first_pass = rank.pipeline.first().map(|e| e.pass);
    let snapshot_elsewhere = snapshot.is_some() && pass != first_pass;
    let nothing_in_flight = snapshot.is_some() && !snapshot_elsewhere && b.activations <= 0;
    let snapshot = snapshot.filter(|_| !snapshot_elsewhere && !nothing_in_flight);
    // The snapshot's buffers and gradients at its peak, largest first.
    let named: Vec<_> = snapshot
        .map(|s| {
            s.owners
                .iter()
                .filter(|o| matches!(o.kind, Kind::Buffer | Kind::Gradients))
                .filter(|o| o.bytes > 0)
                .collect()
        })
        .unwrap_or_default();
    // Saturating: a forged snapshot may name owners near i64::MAX each.
    let named_total: i64 = named
        .iter()
        .fold(0i64, |sum, o| sum.saturating_add(o.bytes));
    let in_flight = b.activations;
    // When the buffers live at the snapshot's peak are more than the prints' in-flight bytes,
    // each is cut in proportion so that the rows add up.
    let cut = named_total > in_flight && named_total > 0;
    let scale = |bytes: i64| -> i64 {
        if cut {
            (i128::from(bytes) * i128::from(in_flight) / i128::from(named_total)) as i64
        } else {
            bytes
        }
    };
    // One row per owner the snapshot names at its peak, of `kind`, its bytes described by `what`.
    let snapshot_row = |bytes: i64, owner: &str, asked_by: &str, kind, what: &str| {
        let (from, how) = if cut {
            (
                Arithmetic,
                format!(
                    "{what} at the snapshot's peak, cut in proportion to the in-flight bytes at \
                     the prints' peak"
                ),
            )
        } else {
            (Snapshot, format!("{what} at the snapshot's peak"))
        };
        let mut r = row(owner.to_owned(), kind, Some(scale(bytes)), from, how);
        r.asked_by = Some(asked_by.to_owned());
        r
    };
    let gradients: Vec<_> = named.iter().filter(|o| o.kind == Kind::Gradients).collect();
    if snapshot.is_none() {
        out.push(row(
            "gradients",
            OwnerKind::Gradients,
            None,
            Prints,
            if snapshot_elsewhere {
                "not measured: the snapshot is of the first step and the peak of a later one; \
                 in the activations in flight"
            } else if nothing_in_flight {
                "not measured: nothing is in flight at the prints' peak for the snapshot to split"
            } else {
                "not measured: no print measures them (no snapshot); in the activations in flight"
            },
        ));
    } else if gradients.is_empty() {
        out.push(row(
            "gradients",
            OwnerKind::Gradients,
            Some(0),
            Snapshot,
            "none held apart at the snapshot's peak",
        ));
    }
    for o in &gradients {
        out.push(snapshot_row(
            o.bytes,
            &o.owner,
            &o.asked_by,
            OwnerKind::Gradients,
            "allocated by FSDP's gradient hooks",
        ));
    }
    out.push(row(
        "optimizer state",
        OwnerKind::OptimizerState,
        b.optimizer_state,
        Prints,
        if b.optimizer_state.is_some() {
            "loaded from the checkpoint (load_ckpt print)"
        } else {
            "not measured: printed only after a checkpoint load; in other static"
        },
    ));
    out.push(row(
        "other static",
        OwnerKind::OtherStatic,
        Some(b.other_static),
        Arithmetic,
        "allocated at Before pipeline minus weights and optimizer state",
    ));
    let activations = in_flight.saturating_sub(
        named
            .iter()
            .fold(0i64, |sum, o| sum.saturating_add(scale(o.bytes))),
    );
    out.push(row(
        "activations in flight",
        OwnerKind::Activations,
        Some(activations.max(0)),
        Arithmetic,
        if named.is_empty() {
            "peak allocated minus Before pipeline: activations, their gradients and temporaries"
        } else {
            "peak allocated minus Before pipeline, minus the snapshot's buffers and gradients"
        },
    ));
    let mut saved: Vec<PeakOwner> = Vec::new();
    for g in rank.saved_tensors.iter().filter(|g| Some(g.pass) == pass) {
        if let Some(r) = saved
            .iter_mut()
            .find(|r| r.layer == g.layer && r.stage.as_deref() == Some(g.stage.as_str()))
        {
            r.bytes = r.bytes.max(Some(g.activations));
            continue;
        }
        let name = match g.layer {
            Some(l) => format!("saved by layer {l} {}", g.stage),
            None => format!("saved by {}", g.stage),
        };
        let mut r = row(
            name,
            OwnerKind::Activations,
            Some(g.activations),
            Prints,
            "saved-tensor print: one forward of one micro-batch",
        );
        r.within = Some(OwnerKind::Activations);
        r.layer = g.layer;
        r.stage = Some(g.stage.clone());
        saved.push(r);
    }
    out.extend(saved);
    for o in named.iter().filter(|o| o.kind != Kind::Gradients) {
        out.push(snapshot_row(
            o.bytes,
            &o.owner,
            &o.asked_by,
            OwnerKind::Buffer,
            "its blocks",
        ));
    }
    out.push(row(
        memprints_snapshot::owner::UNUSED_RESERVE,
        OwnerKind::UnusedReserve,
        Some(b.cached),
        Prints,
        "the peak print's cached= (reserved minus allocated)",
    ));
    out.push(row(
        "outside PyTorch's allocator (CUDA context, NCCL, kernels' own allocations)",
        OwnerKind::OutsideAllocator,
        Some(b.non_pytorch),
        Prints,
        "the peak print's non-pt=",
    ));
    Some(PeakOwners {
        label: peak.label.clone(),
        total: b.total,
        snapshot: snapshot.and_then(|s| s.path.clone()),
        owners: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::PipelineKind;
    use crate::schema::{Breakdown, Peak, PipelineEntry, SnapshotOwner};

    const MIB: i64 = 1 << 20;

    fn entry(pass: u32, kind: PipelineKind, allocated: i64) -> PipelineEntry {
        PipelineEntry {
            pass,
            kind,
            i: None,
            count: None,
            allocated,
            cached: 0,
            non_pytorch: 0,
            delta: None,
            change: None,
        }
    }

    /// A rank whose peak (index `peak`) has 300 MiB in flight, and a step-0 snapshot naming a
    /// 64 MiB cuBLAS workspace.
    fn rank_and_snapshot(peak: usize) -> (RankReport, SnapshotView) {
        let rank = RankReport {
            pipeline: vec![
                entry(0, PipelineKind::BeforePipeline, 100 * MIB),
                entry(0, PipelineKind::Step4, 400 * MIB),
                entry(1, PipelineKind::BeforePipeline, 200 * MIB),
                entry(1, PipelineKind::Step4, 500 * MIB),
            ],
            peak: Some(Peak {
                index: peak,
                label: "Step4 i=0".to_owned(),
                allocated: 500 * MIB,
                cached: 0,
                non_pytorch: 0,
            }),
            breakdown: Some(Breakdown {
                weights: Some(100 * MIB),
                optimizer_state: None,
                other_static: 0,
                activations: 300 * MIB,
                cached: 0,
                non_pytorch: 0,
                total: 400 * MIB,
            }),
            ..RankReport::default()
        };
        let snapshot = SnapshotView {
            owners: vec![SnapshotOwner {
                owner: memprints_snapshot::owner::CUBLAS_WORKSPACE.to_owned(),
                kind: Kind::Buffer,
                bytes: 64 * MIB,
                count: 2,
                asked_by: "pithtrain/models/qwen3_moe.py:163 forward".to_owned(),
            }],
            ..SnapshotView::default()
        };
        (rank, snapshot)
    }

    fn bytes_of(o: &PeakOwners, owner: &str) -> Option<i64> {
        o.owners.iter().find(|r| r.owner == owner)?.bytes
    }

    /// A run of many ranks, owned on several threads, gets each rank's own owners: those of
    /// its own snapshot, or none named.
    #[test]
    fn the_ranks_of_a_big_run_are_owned_one_by_one() {
        let mut b = crate::fold::ReportBuilder::new(None);
        b.line(b"[rank=0] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=1.40");
        let mut report = b.finish(vec!["a.log".to_owned()]);
        let mut run = report.runs.remove(0);
        run.ranks.clear();
        for r in 0..1000u32 {
            let (mut rank, mut snapshot) = rank_and_snapshot(if r % 2 == 0 { 1 } else { 3 });
            rank.rank = r;
            snapshot.rank = Some(r);
            snapshot.owners[0].bytes = i64::from(r % 7 + 1) * MIB;
            run.ranks.push(rank);
            if r % 3 != 0 {
                run.memory.snapshots.push(snapshot);
            }
        }
        report.runs.push(run);
        let want: Vec<Option<PeakOwners>> = {
            let run = &report.runs[0];
            run.ranks
                .iter()
                .map(|rank| {
                    let snapshot = run
                        .memory
                        .snapshots
                        .iter()
                        .find(|s| s.rank == Some(rank.rank));
                    owners(rank, snapshot)
                })
                .collect()
        };
        attach(&mut report);
        let got: Vec<Option<PeakOwners>> = report.runs[0]
            .ranks
            .iter()
            .map(|r| r.owners.clone())
            .collect();
        assert_eq!(
            serde_json::to_string(&got).unwrap(),
            serde_json::to_string(&want).unwrap()
        );
    }

    /// The step-0 snapshot splits the in-flight bytes of a peak in the first pass only: a peak
    /// in a later pass holds the workspace before its pipeline already (it was counted twice).
    #[test]
    fn the_first_steps_snapshot_names_buffers_of_a_first_step_peak_only() {
        let workspace = memprints_snapshot::owner::CUBLAS_WORKSPACE;
        let (rank, snapshot) = rank_and_snapshot(1);
        let first = owners(&rank, Some(&snapshot)).unwrap();
        assert_eq!(bytes_of(&first, workspace), Some(64 * MIB));
        assert_eq!(bytes_of(&first, "activations in flight"), Some(236 * MIB));
        let (rank, snapshot) = rank_and_snapshot(3);
        let later = owners(&rank, Some(&snapshot)).unwrap();
        assert_eq!(bytes_of(&later, workspace), None, "{:?}", later.owners);
        assert_eq!(bytes_of(&later, "activations in flight"), Some(300 * MIB));
        let gradients = later
            .owners
            .iter()
            .find(|r| r.owner == "gradients")
            .unwrap();
        assert!(gradients.how.contains("the snapshot is of the first step"));
    }

    /// With nothing in flight at the prints' peak the snapshot splits nothing, and the
    /// gradients' row says so rather than that there is no snapshot.
    #[test]
    fn a_snapshot_with_nothing_in_flight_to_split_is_not_called_missing() {
        let (mut rank, snapshot) = rank_and_snapshot(1);
        rank.breakdown.as_mut().unwrap().activations = 0;
        let owned = owners(&rank, Some(&snapshot)).unwrap();
        let gradients = owned
            .owners
            .iter()
            .find(|r| r.owner == "gradients")
            .unwrap();
        assert_eq!(gradients.bytes, None);
        assert!(
            gradients.how.contains("nothing is in flight"),
            "{}",
            gradients.how
        );
        assert!(!gradients.how.contains("no snapshot"), "{}", gradients.how);
    }
}
