//! What the report concludes from each rank's prints: its peak, where the memory went at the
//! peak, and, across ranks, the peaks per pipeline stage and the imbalance between stages.
//!
//! Contract:
//! - The peak of a rank is its highest pipeline print by allocated memory; of equal maxima the
//!   first, the moment the peak was reached. Ranks without pipeline prints have none.
//! - The breakdown at the peak splits the device total into parts that add up to it: what was
//!   allocated at `Before pipeline` (of the peak's pass, when several were profiled; the first
//!   pipeline print when there is none) is static, split into the weights (allocated at the last setup print that printed it, capped
//!   at the static total), the optimizer state of a checkpoint load (capped at what is left) and
//!   the rest; a part no print measured is `None`, and its bytes stay in the rest. The
//!   activations in flight are the peak minus the static part; cached and non-PyTorch memory
//!   are the peak print's. Negative figures count as 0.
//! - The growth of non-PyTorch memory runs from the first pipeline print to the first print
//!   with the highest `non-pt=`.
//! - Across ranks: the highest peak names its rank (the lowest rank on a tie); ranks are grouped
//!   by pipeline stage, and with two stages or more the imbalance compares the highest stage
//!   peak with the lowest (`ratio` is the spread over the highest; 0 when that is not positive).

use std::collections::BTreeMap;

use crate::parse::PipelineKind;
use crate::schema::{
    Breakdown, Imbalance, NonPytorchGrowth, Peak, PipelineEntry, RankPeak, RankReport, StagePeak,
    Summary,
};

/// The highest entry of a rank's pipeline, the first of equal maxima; `None` when it is empty.
pub fn peak(pipeline: &[PipelineEntry]) -> Option<Peak> {
    // The first of equal maxima: the moment the peak was reached.
    let (index, e) = pipeline
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, e)| e.allocated)?;
    Some(Peak {
        index,
        label: e.label(),
        allocated: e.allocated,
        cached: e.cached,
        non_pytorch: e.non_pytorch,
    })
}

/// Where the device memory went at the rank's [`RankReport::peak`] (see the module doc);
/// `None` without a peak.
pub fn breakdown(rank: &RankReport) -> Option<Breakdown> {
    let peak = rank.peak.as_ref()?;
    // The peak's own pass: with several passes the static part is the one that pass began
    // with (an optimizer's state appears after the first step).
    let before = rank
        .pipeline
        .get(..=peak.index)
        .and_then(|upto| {
            upto.iter()
                .rev()
                .find(|e| e.kind == PipelineKind::BeforePipeline)
        })
        .or_else(|| rank.pipeline.first())?;
    let static_alloc = before.allocated.max(0);
    let weights = rank
        .setup
        .iter()
        .rev()
        .find_map(|e| e.allocated)
        .map(|w| w.clamp(0, static_alloc));
    let optimizer_state = rank.checkpoint.as_ref().map(|c| {
        c.optimizer_state
            .clamp(0, static_alloc - weights.unwrap_or(0))
    });
    let other_static = static_alloc - weights.unwrap_or(0) - optimizer_state.unwrap_or(0);
    let activations = (peak.allocated - static_alloc).max(0);
    let cached = peak.cached.max(0);
    let non_pytorch = peak.non_pytorch.max(0);
    Some(Breakdown {
        weights,
        optimizer_state,
        other_static,
        activations,
        cached,
        non_pytorch,
        total: static_alloc + activations + cached + non_pytorch,
    })
}

/// How `non-pt=` went from the first pipeline print to its highest; `None` without prints.
pub fn non_pytorch_growth(pipeline: &[PipelineEntry]) -> Option<NonPytorchGrowth> {
    let first = pipeline.first()?;
    let (_, top) = pipeline
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, e)| e.non_pytorch)?;
    Some(NonPytorchGrowth {
        from_label: first.label(),
        from: first.non_pytorch,
        to_label: top.label(),
        to: top.non_pytorch,
        growth: top.non_pytorch - first.non_pytorch,
    })
}

/// The cross-rank summary of ranks whose peaks are set.
pub fn across_ranks(ranks: &[RankReport]) -> Summary {
    let peaks: Vec<RankPeak> = ranks
        .iter()
        .filter_map(|r| {
            let p = r.peak.as_ref()?;
            Some(RankPeak {
                rank: r.rank,
                pp: r.pp,
                label: p.label.clone(),
                allocated: p.allocated,
                cached: p.cached,
                non_pytorch: p.non_pytorch,
            })
        })
        .collect();
    let peak_rank = peaks
        .iter()
        .rev()
        .max_by_key(|p| p.allocated)
        .map(|p| p.rank);
    let mut by_stage: BTreeMap<u32, StagePeak> = BTreeMap::new();
    for p in &peaks {
        let Some(pp) = p.pp else { continue };
        let s = by_stage.entry(pp).or_insert(StagePeak {
            pp,
            ranks: Vec::new(),
            max_allocated: p.allocated,
            min_allocated: p.allocated,
        });
        s.ranks.push(p.rank);
        s.max_allocated = s.max_allocated.max(p.allocated);
        s.min_allocated = s.min_allocated.min(p.allocated);
    }
    let stages: Vec<StagePeak> = by_stage.into_values().collect();
    let highest = stages.iter().rev().max_by_key(|s| s.max_allocated);
    // Another stage than the highest, also when all peak alike (`pp=0` against itself says
    // nothing).
    let lowest = highest.and_then(|hi| {
        stages
            .iter()
            .filter(|s| s.pp != hi.pp)
            .min_by_key(|s| s.max_allocated)
    });
    let imbalance = match (highest, lowest) {
        (Some(hi), Some(lo)) => {
            let spread = hi.max_allocated - lo.max_allocated;
            Some(Imbalance {
                highest_pp: hi.pp,
                highest: hi.max_allocated,
                lowest_pp: lo.pp,
                lowest: lo.max_allocated,
                spread,
                ratio: if hi.max_allocated > 0 {
                    spread as f64 / hi.max_allocated as f64
                } else {
                    0.0
                },
            })
        }
        _ => None,
    };
    Summary {
        peak_rank,
        peaks,
        stages,
        imbalance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Run;
    use crate::{Report, ReportBuilder};

    const G: i64 = 1 << 30;

    fn build(lines: &[String]) -> Run {
        let mut b = ReportBuilder::new(None);
        for line in lines {
            b.line(line.as_bytes());
        }
        let mut report: Report = b.finish(vec!["test.log".to_owned()]);
        report.runs.remove(0)
    }

    fn pipe(rank: u32, pp: u32, label: &str, gib: &str) -> String {
        format!("[rank={rank} pp={pp}] {label}: {gib} GiB | alloc={gib} cached=1.00 non-pt=2.00")
    }

    #[test]
    fn the_peak_is_the_first_of_equal_maxima_and_splits_into_static_and_activations() {
        let r = build(&[
            pipe(0, 0, "Before pipeline", "10.00"),
            pipe(0, 0, "Step1 F0 i=0", "12.00"),
            pipe(0, 0, "Step1 F0 i=1", "12.00"),
            pipe(0, 0, "After Step8 (end of pipeline)", "11.00"),
        ]);
        let peak = r.ranks[0].peak.as_ref().unwrap();
        assert_eq!(
            (peak.index, peak.label.as_str(), peak.allocated),
            (1, "Step1 F0 i=0", 12 * G)
        );
        let b = r.ranks[0].breakdown.as_ref().unwrap();
        assert_eq!(
            (b.other_static, b.activations, b.cached, b.non_pytorch),
            (10 * G, 2 * G, G, 2 * G)
        );
        assert_eq!(b.total, 15 * G);
    }

    #[test]
    fn the_breakdown_splits_static_memory_into_weights_and_optimizer_state() {
        let r = build(&[
            "[rank=0] setup_model | after apply_fsdp: alloc=4.00 cached=0.00 non-pt=1.00".to_owned(),
            "[rank=0] load_ckpt | optimizer state: 3.00 GiB (10 param entries) | alloc=8.00 cached=0.00 non-pt=1.00".to_owned(),
            pipe(0, 0, "Before pipeline", "9.00"),
            pipe(0, 0, "Step1 F0 i=0", "10.00"),
        ]);
        let b = r.ranks[0].breakdown.clone().unwrap();
        assert_eq!(
            (b.weights, b.optimizer_state, b.other_static, b.activations),
            (Some(4 * G), Some(3 * G), 2 * G, G)
        );
        let parts = 4 * G + 3 * G + b.other_static + b.activations;
        assert_eq!(b.total, parts + b.cached + b.non_pytorch);
    }

    #[test]
    fn a_part_no_print_measured_is_none_and_stays_in_the_rest() {
        let r = build(&[
            pipe(0, 0, "Before pipeline", "9.00"),
            pipe(0, 0, "Step1 F0 i=0", "10.00"),
        ]);
        let b = r.ranks[0].breakdown.clone().unwrap();
        assert_eq!(
            (b.weights, b.optimizer_state, b.other_static),
            (None, None, 9 * G)
        );
    }

    #[test]
    fn non_pytorch_growth_runs_to_the_first_highest_print() {
        let r = build(&[
            "[rank=0 pp=0] Before pipeline: 1.00 GiB | alloc=1.00 cached=0.00 non-pt=1.22"
                .to_owned(),
            "[rank=0 pp=0] Step4 i=0: 2.00 GiB | alloc=2.00 cached=0.00 non-pt=7.39".to_owned(),
            "[rank=0 pp=0] Step4 i=1: 2.00 GiB | alloc=2.00 cached=0.00 non-pt=7.39".to_owned(),
        ]);
        let g = r.ranks[0].non_pytorch_growth.clone().unwrap();
        assert_eq!(
            (g.from_label.as_str(), g.to_label.as_str()),
            ("Before pipeline", "Step4 i=0")
        );
        assert_eq!(g.growth, g.to - g.from);
        assert!(g.growth > 6 * G);
    }

    #[test]
    fn a_rank_without_pipeline_prints_has_no_peak_and_no_breakdown() {
        let r = build(&[
            "[rank=0] setup_model | after apply_fsdp: alloc=4.00 cached=0.00 non-pt=1.00"
                .to_owned(),
        ]);
        assert!(r.ranks[0].peak.is_none() && r.ranks[0].breakdown.is_none());
        assert!(r.summary.peaks.is_empty() && r.summary.peak_rank.is_none());
        let mut rank = r.ranks[0].clone();
        rank.peak = Some(Peak {
            index: 0,
            label: String::new(),
            allocated: G,
            cached: 0,
            non_pytorch: 0,
        });
        assert!(
            breakdown(&rank).is_none(),
            "a peak without a pipeline breaks nothing"
        );
    }

    #[test]
    fn stages_are_compared_by_their_highest_peak() {
        let r = build(&[
            pipe(0, 0, "Step1 F0 i=0", "10.00"),
            pipe(1, 1, "Step1 F0 i=0", "20.00"),
            pipe(2, 0, "Step1 F0 i=0", "12.00"),
            pipe(3, 1, "Step1 F0 i=0", "20.00"),
        ]);
        let s = &r.summary;
        assert_eq!(s.peak_rank, Some(1), "the lowest rank of a tie");
        let stages: Vec<_> = s
            .stages
            .iter()
            .map(|st| (st.pp, st.ranks.clone(), st.max_allocated, st.min_allocated))
            .collect();
        assert_eq!(
            stages,
            [
                (0, vec![0, 2], 12 * G, 10 * G),
                (1, vec![1, 3], 20 * G, 20 * G)
            ]
        );
        let imb = s.imbalance.as_ref().unwrap();
        assert_eq!((imb.highest_pp, imb.lowest_pp, imb.spread), (1, 0, 8 * G));
        assert!((imb.ratio - 0.4).abs() < 1e-12);
    }

    /// Stages that peak alike compare two different stages (it said `pp=0 … pp=0`).
    #[test]
    fn stages_that_peak_alike_compare_two_stages() {
        let r = build(&[
            pipe(0, 0, "Step1 F0 i=0", "10.00"),
            pipe(1, 1, "Step1 F0 i=0", "10.00"),
            pipe(2, 2, "Step1 F0 i=0", "10.00"),
        ]);
        let imb = r.summary.imbalance.as_ref().unwrap();
        assert_eq!((imb.highest_pp, imb.lowest_pp, imb.spread), (0, 1, 0));
    }

    #[test]
    fn one_stage_has_no_imbalance() {
        let r = build(&[
            pipe(0, 0, "Step1 F0 i=0", "10.00"),
            pipe(1, 0, "Step1 F0 i=0", "11.00"),
        ]);
        assert!(r.summary.imbalance.is_none());
        assert_eq!(r.summary.stages.len(), 1);
    }
}
