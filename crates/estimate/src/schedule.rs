//! Where in DualPipeV's schedule a figure belongs: the estimator's event labels, the pipeline
//! prints' points, and which estimator state each print sees.
//!
//! The estimator (`tools/memory_estimator/schedule_simulator.py`) replays `DualPipeV.step()` and
//! takes a snapshot after each operation, labelled `static_baseline`, `S<step>.i<i> fwd(p<phase>)
//! c<chunk>`, `S<step>.i<i> bwd(p<phase>,zb=<True|False>) c<chunk>`, `S<step>.i<i>
//! fwd_bwd(p<a>,p<b>) fc<f>/bc<b>`, `S<step>.i<i> weight_chunk` (step 4's first iteration on the
//! last pp rank is `S4.i0.last_rank fwd(p0) …` then `S4.i0.last_rank bwd(p1,…) …`). The
//! instrumentation's pipeline prints (group 4, `templates/pipeline.py`) sit between the same
//! calls of the real `step()`. Each print sees the state some estimator event leaves behind:
//!
//! | print | where it sits in `DualPipeV.step()` | estimator state it sees |
//! |---|---|---|
//! | `Before pipeline` | before `# Step 1` | `static_baseline` |
//! | `Step1 F0 i=I` | after the I-th `_forward_chunk(0)` | `S1.iI fwd(p0) cI` |
//! | `After Step1 (N F0)` | after step 1's loop | the last `S1` event; `static_baseline` when N = 0 |
//! | `Step2 i=I forward_chunk(0)` | after `_forward_chunk(0, recv=False, send=False)` | `S2.iI fwd(p0)` |
//! | `Step2 i=I forward_chunk(1)` | after `_forward_chunk(1, send=…)` | `S2.iI fwd(p1)` |
//! | `After Step2 (N F0F1)` | after step 2's loop | the last `S2` event, a `fwd(p1)` |
//! | `Step3 i=I before B1` | before `_backward_chunk(1, enable_zb=True)` | the event before `S3.iI bwd(p1,zb=True)`: the last `S2` event for I = 0, else `S3.i(I-1) fwd(p1)` |
//! | `Step3 i=I after B1` | after `_backward_chunk(1, enable_zb=True)` | `S3.iI bwd(p1,zb=True)` |
//! | `Step3 i=I after W1` | after `_recv_forward(1)` and `_weight_chunk()` | `S3.iI weight_chunk` |
//! | `Step3 i=I after F1` | after `_forward_chunk(1, recv=False)` | `S3.iI fwd(p1)` |
//! | `After Step3 (N B1W1F1)` | after step 3's loop | the last `S3` event; the last `S2` event when N = 0 |
//! | `Step4 i=I` | after the iteration's `_forward_backward_chunk(1, 0)` | `S4.iI fwd_bwd(p1,p0)`, once its backward chunk is freed (¹) |
//! | `After Step4 (N F0B1F1B0)` | after step 4's loop | the last `S4` event, once its backward chunk is freed (¹) |
//! | `After Step8 (end of pipeline)` | after step 8 and `assert WeightGradStore.funcs_queue.empty()` | the last event, `S8.i(last) weight_chunk` |
//!
//! (¹) For an overlapped forward+backward the simulator snapshots both chunks' activations alive
//! (the overlap's high-water mark, its `fwd_bwd` figure) and frees the backward chunk right after;
//! a print after the call sees memory once that chunk is freed, so the pair uses that state
//! ([`Counterpart::after_overlap`]). The estimator's own `fwd_bwd` figure is the larger one and is
//! what it reports as its peak.
//!
//! Checked against `DualPipeV.step()` and the simulator at PithTrain 889a408, and against the
//! estimator's timelines for pp = 1 (the one rank is first and last), pp = 2 (ranks 0 and 1) and
//! pp = 4 (ranks 0-3) kept under `tests/data/estimate/`. Both sides count the same iterations per
//! step on pp rank r of p with n chunks: step 1 2(p−r−1), step 2 r+1, step 3 p−r−1, step 4
//! n−2p+r+1, step 5 p−r−1, step 6 r+1, step 7 p−r−1, step 8 r+1. On every rank phase 0 runs
//! stage r and phase 1 stage 2p−1−r; `forward_chunk(0|1)` and `p0|p1` are that phase.
//!
//! Estimator events that no print sees: step 4's `fwd_bwd(p0,p1)`, the last pp rank's
//! `S4.i0.last_rank` pair, every step 5-7 event (the instrumentation prints nothing there) and
//! step 8's events but the last. A print whose step or iteration the estimator's schedule lacks
//! (the run's settings differ from the estimator's) gets no counterpart: [`Schedule::counterpart`]
//! returns `None` rather than a neighbour.

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;

/// What the simulator did at one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `static_baseline`: parameters and optimizer state, nothing in flight.
    Baseline,
    /// `fwd(pP) cC`.
    Forward {
        /// P: 0 or 1.
        phase: u8,
        /// C: the phase's chunk (micro-batch) index.
        chunk: u32,
    },
    /// `bwd(pP,zb=…) cC`.
    Backward {
        /// P: 0 or 1.
        phase: u8,
        /// C: the phase's chunk (micro-batch) index.
        chunk: u32,
        /// `zb=True`: the weight gradients are deferred to a later `weight_chunk`.
        zero_bubble: bool,
    },
    /// `fwd_bwd(pA,pB) fcF/bcC`: forward of phase A's chunk F overlapped with backward of phase
    /// B's chunk C.
    ForwardBackward {
        /// A: the phase run forward.
        forward_phase: u8,
        /// F: the chunk run forward.
        forward_chunk: u32,
        /// B: the phase run backward.
        backward_phase: u8,
        /// C: the chunk run backward, freed right after the snapshot.
        backward_chunk: u32,
    },
    /// `weight_chunk`: one deferred weight-gradient batch popped.
    Weight,
}

/// One estimator event, read from its label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleEvent {
    /// 1-8; 0 for `static_baseline`.
    pub step: u8,
    /// The step loop's `i`; `None` for `static_baseline`.
    pub iteration: Option<u32>,
    /// What the simulator did.
    pub action: Action,
}

static EVENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^S([1-8])\.i(\d+)(?:\.last_rank)? (?:fwd\(p([01])\) c(\d+)|bwd\(p([01]),zb=(True|False)\) c(\d+)|fwd_bwd\(p([01]),p([01])\) fc(\d+)/bc(\d+)|(weight_chunk))$",
    )
    .expect("valid regex")
});

impl ScheduleEvent {
    /// Reads an estimator label; `None` for any other text.
    pub fn parse(label: &str) -> Option<Self> {
        if label == "static_baseline" {
            return Some(Self {
                step: 0,
                iteration: None,
                action: Action::Baseline,
            });
        }
        let c = EVENT.captures(label)?;
        let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
        let phase = |i: usize| c.get(i).map(|m| u8::from(m.as_str() == "1"));
        let action = if let (Some(phase), Some(chunk)) = (phase(3), num(4)) {
            Action::Forward { phase, chunk }
        } else if let (Some(phase), Some(chunk)) = (phase(5), num(7)) {
            Action::Backward {
                phase,
                chunk,
                zero_bubble: &c[6] == "True",
            }
        } else if let (Some(a), Some(b), Some(f), Some(bc)) = (phase(8), phase(9), num(10), num(11))
        {
            Action::ForwardBackward {
                forward_phase: a,
                forward_chunk: f,
                backward_phase: b,
                backward_chunk: bc,
            }
        } else {
            Action::Weight
        };
        Some(Self {
            step: c[1].parse().ok()?,
            iteration: num(2),
            action,
        })
    }

    /// The chunk (phase, chunk) whose activations the simulator frees right after this event's
    /// snapshot: a `fwd_bwd`'s backward chunk.
    pub fn released_after(&self) -> Option<(u8, u32)> {
        match self.action {
            Action::ForwardBackward {
                backward_phase,
                backward_chunk,
                ..
            } => Some((backward_phase, backward_chunk)),
            _ => None,
        }
    }
}

/// Which of step 3's four prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step3At {
    /// `before B1`: before `_backward_chunk(1, enable_zb=True)`.
    BeforeB1,
    /// `after B1`: after that backward.
    AfterB1,
    /// `after W1`: after `_recv_forward(1)` and `_weight_chunk()`.
    AfterW1,
    /// `after F1`: after `_forward_chunk(1, recv=False)`.
    AfterF1,
}

/// A pipeline print's place in the schedule (group 4 of the instrumentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintPoint {
    /// `Before pipeline`.
    BeforePipeline,
    /// `Step1 F0 i=I`.
    Step1Forward {
        /// I: step 1's loop index.
        i: u32,
    },
    /// `After Step1 (N F0)`.
    AfterStep1 {
        /// N: the iterations step 1 ran.
        count: u32,
    },
    /// `Step2 i=I forward_chunk(P)`.
    Step2Forward {
        /// I: step 2's loop index.
        i: u32,
        /// P: 0 or 1, the phase just run forward.
        phase: u8,
    },
    /// `After Step2 (N F0F1)`.
    AfterStep2 {
        /// N: the iterations step 2 ran.
        count: u32,
    },
    /// `Step3 i=I before B1|after B1|after W1|after F1`.
    Step3 {
        /// I: step 3's loop index.
        i: u32,
        /// Which of the iteration's four prints.
        at: Step3At,
    },
    /// `After Step3 (N B1W1F1)`.
    AfterStep3 {
        /// N: the iterations step 3 ran.
        count: u32,
    },
    /// `Step4 i=I`.
    Step4 {
        /// I: step 4's loop index.
        i: u32,
    },
    /// `After Step4 (N F0B1F1B0)`.
    AfterStep4 {
        /// N: the iterations step 4 ran.
        count: u32,
    },
    /// `After Step8 (end of pipeline)`.
    AfterStep8,
}

static PRINT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:(Before pipeline)|Step1 F0 i=(\d+)|After Step([1-4]) \((\d+) (?:F0|F0F1|B1W1F1|F0B1F1B0)\)|Step2 i=(\d+) forward_chunk\(([01])\)|Step3 i=(\d+) (before B1|after B1|after W1|after F1)|Step4 i=(\d+)|(After Step8 \(end of pipeline\)))$",
    )
    .expect("valid regex")
});

impl PrintPoint {
    /// Reads a print's label as the instrumentation writes it (`Step3 i=0 after B1`); `None` for
    /// any other text.
    pub fn parse(label: &str) -> Option<Self> {
        let c = PRINT.captures(label)?;
        let num = |i: usize| c.get(i).and_then(|m| m.as_str().parse::<u32>().ok());
        Some(if c.get(1).is_some() {
            Self::BeforePipeline
        } else if let Some(i) = num(2) {
            Self::Step1Forward { i }
        } else if let (Some(step), Some(count)) = (num(3), num(4)) {
            match step {
                1 => Self::AfterStep1 { count },
                2 => Self::AfterStep2 { count },
                3 => Self::AfterStep3 { count },
                _ => Self::AfterStep4 { count },
            }
        } else if let Some(i) = num(5) {
            Self::Step2Forward {
                i,
                phase: u8::from(&c[6] == "1"),
            }
        } else if let Some(i) = num(7) {
            let at = match &c[8] {
                "before B1" => Step3At::BeforeB1,
                "after B1" => Step3At::AfterB1,
                "after W1" => Step3At::AfterW1,
                _ => Step3At::AfterF1,
            };
            Self::Step3 { i, at }
        } else if let Some(i) = num(9) {
            Self::Step4 { i }
        } else {
            Self::AfterStep8
        })
    }

    /// The schedule step (1-8) the print belongs to; 0 before the pipeline.
    pub fn step(&self) -> u8 {
        match self {
            Self::BeforePipeline => 0,
            Self::Step1Forward { .. } | Self::AfterStep1 { .. } => 1,
            Self::Step2Forward { .. } | Self::AfterStep2 { .. } => 2,
            Self::Step3 { .. } | Self::AfterStep3 { .. } => 3,
            Self::Step4 { .. } | Self::AfterStep4 { .. } => 4,
            Self::AfterStep8 => 8,
        }
    }

    /// The loop index `i`, for prints inside a step's loop.
    pub fn iteration(&self) -> Option<u32> {
        match *self {
            Self::Step1Forward { i }
            | Self::Step2Forward { i, .. }
            | Self::Step3 { i, .. }
            | Self::Step4 { i } => Some(i),
            _ => None,
        }
    }

    /// The iteration count an `After StepN (N …)` print gives for its step.
    pub fn count(&self) -> Option<(u8, u32)> {
        match *self {
            Self::AfterStep1 { count } => Some((1, count)),
            Self::AfterStep2 { count } => Some((2, count)),
            Self::AfterStep3 { count } => Some((3, count)),
            Self::AfterStep4 { count } => Some((4, count)),
            _ => None,
        }
    }
}

impl fmt::Display for PrintPoint {
    /// The print's label, as the instrumentation writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BeforePipeline => write!(f, "Before pipeline"),
            Self::Step1Forward { i } => write!(f, "Step1 F0 i={i}"),
            Self::AfterStep1 { count } => write!(f, "After Step1 ({count} F0)"),
            Self::Step2Forward { i, phase } => write!(f, "Step2 i={i} forward_chunk({phase})"),
            Self::AfterStep2 { count } => write!(f, "After Step2 ({count} F0F1)"),
            Self::Step3 { i, at } => {
                let at = match at {
                    Step3At::BeforeB1 => "before B1",
                    Step3At::AfterB1 => "after B1",
                    Step3At::AfterW1 => "after W1",
                    Step3At::AfterF1 => "after F1",
                };
                write!(f, "Step3 i={i} {at}")
            }
            Self::AfterStep3 { count } => write!(f, "After Step3 ({count} B1W1F1)"),
            Self::Step4 { i } => write!(f, "Step4 i={i}"),
            Self::AfterStep4 { count } => write!(f, "After Step4 ({count} F0B1F1B0)"),
            Self::AfterStep8 => write!(f, "After Step8 (end of pipeline)"),
        }
    }
}

/// The estimator state a print sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counterpart {
    /// Index of the estimator event whose state the print sees.
    pub index: usize,
    /// The event is an overlapped `fwd_bwd`: the print sees it after the backward chunk is freed.
    pub after_overlap: bool,
}

/// An estimator timeline, read label by label.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// One entry per estimator event; `None` where the label is not one the simulator writes.
    pub events: Vec<Option<ScheduleEvent>>,
}

impl Schedule {
    /// Reads the labels of an estimator timeline, in order.
    pub fn new<'a>(labels: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            events: labels.into_iter().map(ScheduleEvent::parse).collect(),
        }
    }

    /// The number of loop iterations the estimator ran for `step`.
    pub fn iterations(&self, step: u8) -> u32 {
        self.events
            .iter()
            .flatten()
            .filter(|e| e.step == step)
            .filter_map(|e| e.iteration)
            .max()
            .map_or(0, |i| i + 1)
    }

    fn position(&self, wanted: impl Fn(&ScheduleEvent) -> bool) -> Option<usize> {
        self.events
            .iter()
            .position(|e| e.as_ref().is_some_and(&wanted))
    }

    fn last_through(&self, step: u8) -> Option<usize> {
        self.events
            .iter()
            .rposition(|e| e.as_ref().is_some_and(|e| e.step <= step))
    }

    /// The estimator state `point` sees (the table in the module doc), or `None` when the
    /// estimator's schedule has no such step or iteration.
    pub fn counterpart(&self, point: &PrintPoint) -> Option<Counterpart> {
        let at = |step: u8, i: u32, action: &dyn Fn(&Action) -> bool| {
            self.position(|e| e.step == step && e.iteration == Some(i) && action(&e.action))
        };
        let index = match *point {
            PrintPoint::BeforePipeline => self.position(|e| e.action == Action::Baseline),
            PrintPoint::Step1Forward { i } => {
                at(1, i, &|a| matches!(a, Action::Forward { phase: 0, .. }))
            }
            PrintPoint::Step2Forward { i, phase } => at(
                2,
                i,
                &|a| matches!(a, Action::Forward { phase: p, .. } if *p == phase),
            ),
            PrintPoint::Step3 { i, at: which } => {
                let backward = at(3, i, &|a| matches!(a, Action::Backward { phase: 1, .. }));
                match which {
                    Step3At::BeforeB1 => backward.and_then(|b| b.checked_sub(1)),
                    Step3At::AfterB1 => backward,
                    Step3At::AfterW1 => at(3, i, &|a| *a == Action::Weight),
                    Step3At::AfterF1 => {
                        at(3, i, &|a| matches!(a, Action::Forward { phase: 1, .. }))
                    }
                }
            }
            PrintPoint::Step4 { i } => at(4, i, &|a| {
                matches!(
                    a,
                    Action::ForwardBackward {
                        forward_phase: 1,
                        backward_phase: 0,
                        ..
                    }
                )
            }),
            PrintPoint::AfterStep1 { .. } => self.last_through(1),
            PrintPoint::AfterStep2 { .. } => self.last_through(2),
            PrintPoint::AfterStep3 { .. } => self.last_through(3),
            PrintPoint::AfterStep4 { .. } => self.last_through(4),
            PrintPoint::AfterStep8 => self.last_through(8),
        }?;
        let after_overlap = self.events[index]
            .as_ref()
            .is_some_and(|e| e.released_after().is_some());
        Some(Counterpart {
            index,
            after_overlap,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_label_the_simulator_writes_parses() {
        let cases = [
            ("static_baseline", 0, None, Action::Baseline),
            (
                "S1.i3 fwd(p0) c3",
                1,
                Some(3),
                Action::Forward { phase: 0, chunk: 3 },
            ),
            (
                "S4.i0.last_rank bwd(p1,zb=False) c0",
                4,
                Some(0),
                Action::Backward {
                    phase: 1,
                    chunk: 0,
                    zero_bubble: false,
                },
            ),
            (
                "S4.i6 fwd_bwd(p1,p0) fc7/bc6",
                4,
                Some(6),
                Action::ForwardBackward {
                    forward_phase: 1,
                    forward_chunk: 7,
                    backward_phase: 0,
                    backward_chunk: 6,
                },
            ),
            ("S8.i1 weight_chunk", 8, Some(1), Action::Weight),
        ];
        for (label, step, iteration, action) in cases {
            assert_eq!(
                ScheduleEvent::parse(label),
                Some(ScheduleEvent {
                    step,
                    iteration,
                    action
                }),
                "{label}"
            );
        }
        for bad in [
            "",
            "S9.i0 weight_chunk",
            "S1.i0 fwd(p2) c0",
            "S4.i0 fwd_bwd(p1,p0) fc1",
        ] {
            assert_eq!(ScheduleEvent::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn print_labels_read_back_as_they_are_written() {
        for label in [
            "Before pipeline",
            "Step1 F0 i=1",
            "After Step1 (0 F0)",
            "Step2 i=0 forward_chunk(0)",
            "Step2 i=2 forward_chunk(1)",
            "After Step2 (3 F0F1)",
            "Step3 i=0 before B1",
            "Step3 i=1 after B1",
            "Step3 i=1 after W1",
            "Step3 i=1 after F1",
            "After Step3 (2 B1W1F1)",
            "Step4 i=6",
            "After Step4 (7 F0B1F1B0)",
            "After Step8 (end of pipeline)",
        ] {
            let point = PrintPoint::parse(label).unwrap_or_else(|| panic!("{label}"));
            assert_eq!(point.to_string(), label);
        }
        assert_eq!(PrintPoint::parse("After Step5 (1 B1F1B0)"), None);
        assert_eq!(PrintPoint::parse("Step2 i=0 forward_chunk(2)"), None);
    }

    #[test]
    fn a_print_the_schedule_lacks_gets_no_neighbour() {
        let schedule = Schedule::new(["static_baseline", "S2.i0 fwd(p0) c0", "S2.i0 fwd(p1) c0"]);
        assert_eq!(
            schedule.counterpart(&PrintPoint::Step1Forward { i: 0 }),
            None
        );
        assert_eq!(schedule.counterpart(&PrintPoint::Step4 { i: 0 }), None);
        assert_eq!(
            schedule.counterpart(&PrintPoint::Step3 {
                i: 0,
                at: Step3At::BeforeB1
            }),
            None
        );
        assert_eq!(
            schedule.counterpart(&PrintPoint::AfterStep1 { count: 0 }),
            Some(Counterpart {
                index: 0,
                after_overlap: false
            })
        );
    }
}
