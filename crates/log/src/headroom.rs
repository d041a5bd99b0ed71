//! Each rank's GPU capacity, the headroom its peak left and whether it fits.
//!
//! Contract: [`attach`] gives every rank of every run a [`Capacity`] when one is known, from the
//! first of:
//!
//! 1. `--gpu-memory GIB` ([`CapacityFrom::Flag`]): what the user says wins;
//! 2. the GPU's total memory the prints record ([`CapacityFrom::Prints`]: the
//!    `init_process_group` print's `gpu_total=T (B bytes)`, `torch.cuda.mem_get_info()`'s total,
//!    exact): the rank's own ([`RankReport::gpu_total`]), else the smallest any rank of the run
//!    printed (one job's GPUs are of one kind; the smallest never overstates the headroom);
//! 3. the run's OOM message ([`CapacityFrom::OomMessage`], `GPU N has a total capacity of C`,
//!    taken for every rank of the run): the same figure as 2, rounded to 0.01 GiB and known
//!    for one GPU only, so the prints' go first.
//!
//! Logs of earlier prints (no `gpu_total=`) keep 1 and 3. The peak it is set against is the
//! device total at the rank's highest pipeline print (allocated + cached + outside the
//! allocator, [`super::schema::Breakdown::total`]). The status is [`FitStatus::OutOfMemory`]
//! when the run logged an OOM on that rank (on every rank when the OOM names none) or the peak
//! exceeds the capacity, [`FitStatus::Tight`] when the headroom is under [`TIGHT_PERCENT`] % of
//! the capacity, else [`FitStatus::Fits`]; `None` when neither an OOM nor a capacity and a peak
//! say anything. Nothing is ever guessed as 0: a printed total of 0 bytes is no capacity.

use super::schema::{Capacity, CapacityFrom, FitStatus, RankReport, Report};

/// Headroom below this share of the capacity (in percent) is tight.
pub const TIGHT_PERCENT: i64 = 5;

/// Fills each rank's capacity, headroom and status; `gpu_memory` is `--gpu-memory` in bytes.
pub fn attach(report: &mut Report, gpu_memory: Option<i64>) {
    for run in &mut report.runs {
        let from_oom = run.oom.as_ref().and_then(|o| o.capacity);
        let oom_ranks = run.oom.as_ref().map(|o| o.ranks.clone());
        let printed_by_run = run.ranks.iter().filter_map(printed).min();
        for rank in &mut run.ranks {
            let capacity = choose(gpu_memory, printed(rank).or(printed_by_run), from_oom);
            let ran_out = oom_ranks
                .as_ref()
                .is_some_and(|named| named.is_empty() || named.contains(&rank.rank));
            fill(rank, capacity, ran_out);
        }
    }
}

/// The capacity by the order of the module doc: the flag, the prints, the OOM message.
fn choose(flag: Option<i64>, prints: Option<i64>, oom: Option<i64>) -> Option<Capacity> {
    let (bytes, from) = flag
        .map(|bytes| (bytes, CapacityFrom::Flag))
        .or(prints.map(|bytes| (bytes, CapacityFrom::Prints)))
        .or(oom.map(|bytes| (bytes, CapacityFrom::OomMessage)))?;
    Some(Capacity { bytes, from })
}

/// The GPU's total memory `rank`'s prints record, when it is one.
fn printed(rank: &RankReport) -> Option<i64> {
    rank.gpu_total.filter(|&bytes| bytes > 0)
}

fn fill(rank: &mut RankReport, capacity: Option<Capacity>, ran_out: bool) {
    let peak = rank.breakdown.as_ref().map(|b| b.total);
    rank.headroom_bytes = capacity.zip(peak).map(|(c, p)| c.bytes - p);
    rank.status = if ran_out {
        Some(FitStatus::OutOfMemory)
    } else {
        capacity.zip(peak).and_then(|(c, p)| status_of(c.bytes, p))
    };
    rank.capacity = capacity;
}

/// Whether a device total of `total` bytes fits a GPU of `capacity` bytes: out of memory above
/// it, tight under [`TIGHT_PERCENT`] % headroom; `None` for a capacity that is no figure (0).
pub fn status_of(capacity: i64, total: i64) -> Option<FitStatus> {
    let headroom = capacity - total;
    if capacity <= 0 {
        None
    } else if headroom < 0 {
        Some(FitStatus::OutOfMemory)
    } else if headroom * 100 < capacity * TIGHT_PERCENT {
        Some(FitStatus::Tight)
    } else {
        Some(FitStatus::Fits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Breakdown;

    fn rank_at(total: i64) -> RankReport {
        RankReport {
            breakdown: Some(Breakdown {
                weights: None,
                optimizer_state: None,
                other_static: total,
                activations: 0,
                cached: 0,
                non_pytorch: 0,
                total,
            }),
            ..RankReport::default()
        }
    }

    fn status(total: i64, capacity: Option<i64>, ran_out: bool) -> Option<FitStatus> {
        let mut r = rank_at(total);
        let capacity = capacity.map(|bytes| Capacity {
            bytes,
            from: CapacityFrom::Flag,
        });
        fill(&mut r, capacity, ran_out);
        r.status
    }

    #[test]
    fn status_is_fits_tight_or_out_of_memory_by_the_headroom() {
        assert_eq!(status(90, Some(100), false), Some(FitStatus::Fits));
        assert_eq!(status(95, Some(100), false), Some(FitStatus::Fits));
        assert_eq!(status(96, Some(100), false), Some(FitStatus::Tight));
        assert_eq!(status(101, Some(100), false), Some(FitStatus::OutOfMemory));
        assert_eq!(status(10, Some(100), true), Some(FitStatus::OutOfMemory));
    }

    #[test]
    fn the_flag_wins_then_the_prints_then_the_oom_message() {
        let c = |bytes, from| Some(Capacity { bytes, from });
        use CapacityFrom::*;
        assert_eq!(choose(Some(1), Some(2), Some(3)), c(1, Flag));
        assert_eq!(choose(None, Some(2), Some(3)), c(2, Prints));
        assert_eq!(choose(None, None, Some(3)), c(3, OomMessage));
        assert_eq!(choose(None, None, None), None);
    }

    #[test]
    fn a_printed_total_of_zero_is_no_capacity() {
        let mut r = rank_at(90);
        assert_eq!(printed(&r), None);
        r.gpu_total = Some(0);
        assert_eq!(printed(&r), None);
        r.gpu_total = Some(150_110_011_392);
        assert_eq!(printed(&r), Some(150_110_011_392));
    }

    #[test]
    fn without_a_capacity_there_is_no_headroom_and_no_status() {
        let mut r = rank_at(90);
        fill(&mut r, None, false);
        assert_eq!((r.capacity, r.headroom_bytes, r.status), (None, None, None));
        assert_eq!(status(90, None, true), Some(FitStatus::OutOfMemory));
    }
}
