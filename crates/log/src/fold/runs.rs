//! What makes a run: where one launch of the training ends and the next begins, and what each
//! run is called.
//!
//! The rule, read off the kept real logs (`tests/data/e2e/`): every launch of an instrumented
//! PithTrain prints, per printing rank, `init_process_group` first, then `init_device_mesh` and
//! the `setup_model` prints, and only then a checkpoint load and the pipeline. So a rank
//! *relaunches* when it prints
//!
//! - `init_process_group` after it has printed anything in the current run, or
//! - `setup_model | before model creation` after it has printed anything past setup (a
//!   checkpoint load, a pipeline print, a probe, …), for trees whose distributed prints are
//!   missing,
//!
//! and the first relaunching print starts a new run. Within one file, PithTrain's step lines
//! end a launch's setup for good: a setup print ([`starts_setup`]) after a step line of the
//! same file, or a step line whose number does not go up, starts a new run (a plain,
//! uninstrumented launch followed by an instrumented one in the same log). Of several files, one whose start (its
//! first 64 KiB) holds PithTrain's `| launch(cfg=…)` line, which rank 0 logs once per launch,
//! starts a new run when the current run already has such a file: a plain run's log (no
//! prints at all) after an instrumented one's, or two runs whose printing ranks differ. Inputs are read in order as one stream, so
//! a file that launches the same ranks again (another run in the same folder, a restart appended
//! to the same log) starts a new run, while files whose ranks do not overlap (one log per node)
//! or that go on where the previous one stopped (a rotated log) stay in the run. Repeated
//! `Before pipeline` prints without setup in between are more profiled steps of the same run,
//! not a new one. Within one file, lines the report does not read (torchrun's
//! banner, the launch line) play no part, so two launches in one file that print disjoint ranks
//! read as one run.
//!
//! A file whose step lines are the same steps as those read before from another file — the same
//! step numbers and figures, told by each line's fingerprint
//! ([`crate::step_and_oom::StepLine::digest`]) — is a copy (a launcher's or driver's stdout, a
//! copy of rank 0's log): its step lines are not counted again in any run, the report names the
//! file and the run it repeats ([`crate::schema::RepeatedInput`]), and a run left with nothing
//! of its own (its prints, if any, those of the run it repeats) is no run. A file that holds only
//! such step lines is none of its run's sources.

use std::collections::BTreeSet;

use crate::parse::Event;

/// What one rank has printed in the current run, as far as telling launches apart goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RankProgress {
    printed: bool,
    past_setup: bool,
}

impl RankProgress {
    /// Whether `event`, printed next by this rank, begins a new launch (see the module doc).
    pub fn relaunches(&self, event: &Event<'_>) -> bool {
        match event {
            Event::ProcessGroup { .. } => self.printed,
            Event::Setup { label, .. } => self.past_setup && *label == "before model creation",
            _ => false,
        }
    }

    /// [`Self::record`] for a detail print, which is not read as it comes (and is never a setup
    /// print).
    pub fn record_detail(&mut self) {
        self.printed = true;
        self.past_setup = true;
    }

    /// Notes that this rank printed `event`.
    pub fn record(&mut self, event: &Event<'_>) {
        self.printed = true;
        let setup = matches!(
            event,
            Event::ProcessGroup { .. } | Event::DeviceMesh { .. } | Event::Setup { .. }
        );
        self.past_setup |= !setup;
    }
}

/// Whether `event` is one a launch's setup begins with: `init_process_group`, or
/// `setup_model | before model creation` for trees without the distributed prints.
pub fn starts_setup(event: &Event<'_>) -> bool {
    match event {
        Event::ProcessGroup { .. } => true,
        Event::Setup { label, .. } => *label == "before model creation",
        _ => false,
    }
}

/// Most sources named one by one in a run's name; more are summarised.
const NAMED_SOURCES: usize = 3;

/// The name of each run, given the sources (indices into `inputs`) of every run in order: the
/// sources joined with ` + `, and `, launch K` when several runs share their first source.
pub fn names(runs: &[BTreeSet<usize>], inputs: &[String]) -> Vec<String> {
    runs.iter()
        .enumerate()
        .map(|(n, sources)| {
            let listed: Vec<&str> = sources.iter().map(|&s| inputs[s].as_str()).collect();
            let mut name = match (listed.first(), listed.last()) {
                (Some(first), Some(last)) if listed.len() > NAMED_SOURCES => {
                    format!("{first} … {last} ({} files)", listed.len())
                }
                _ => listed.join(" + "),
            };
            if let Some(&first) = sources.first() {
                let sharing: Vec<usize> = (0..runs.len())
                    .filter(|&m| runs[m].first() == Some(&first))
                    .collect();
                if sharing.len() > 1 {
                    let k = sharing.iter().position(|&m| m == n).unwrap_or(0) + 1;
                    name += &format!(", launch {k}");
                }
            }
            name
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Detail, Event};

    const DETAIL: Detail = Detail {
        allocated: 0,
        cached: 0,
        non_pytorch: 0,
    };

    fn group() -> Event<'static> {
        Event::ProcessGroup {
            cuda_context: 0,
            after_nccl_world: 0,
            nccl_world_cost: 0,
            gpu_total: None,
        }
    }

    fn setup(label: &'static str) -> Event<'static> {
        Event::Setup {
            label,
            detail: DETAIL,
        }
    }

    #[test]
    fn a_rank_relaunches_when_it_prints_its_setup_again() {
        let mut p = RankProgress::default();
        assert!(!p.relaunches(&group()), "the first print of a run");
        p.record(&group());
        p.record(&setup("before model creation"));
        assert!(
            !p.relaunches(&setup("before model creation")),
            "still in setup"
        );
        assert!(p.relaunches(&group()));
        p.record(&Event::Snapshot { path: "x" });
        assert!(p.relaunches(&setup("before model creation")));
        assert!(!p.relaunches(&setup("after apply_fsdp")));
    }

    #[test]
    fn runs_are_named_after_their_sources_and_launch() {
        let inputs: Vec<String> = ["a.log", "b.log", "c.log", "d.log"]
            .map(String::from)
            .into();
        let runs = [
            BTreeSet::from([0]),
            BTreeSet::from([0, 1]),
            BTreeSet::from([2]),
            BTreeSet::from([0, 1, 2, 3]),
        ];
        assert_eq!(
            names(&runs[..3], &inputs),
            ["a.log, launch 1", "a.log + b.log, launch 2", "c.log"]
        );
        assert_eq!(names(&runs[3..], &inputs), ["a.log … d.log (4 files)"]);
    }
}
