//! Estimated against measured, for one pp rank: per schedule event, per component, at the peak,
//! and a verdict.
//!
//! [`Measured`] is what the memory prints of one pp rank said (the caller reads it from the
//! report; the figures are taken as given, so they equal the plain report's). [`compare`] first
//! corrects the mismatches of bookkeeping between the two sides ([`super::corrections`]: the
//! cuBLAS workspace moved to the estimator's side when a snapshot names it, the estimator's
//! optimizer state taken out when the run loaded no checkpoint), lists each in `corrections`,
//! and pairs the corrected figures:
//!
//! - **events**: every estimator event, in order, each followed by the pipeline prints that see
//!   its state ([`super::schedule`] has the table). A print pairs with the estimator's state
//!   *after* its event ([`allocated_after`](super::figures::EstimatedEvent::allocated_after)): for an overlapped `fwd_bwd` that
//!   is once the backward chunk is freed. Estimator events no print sees have `measured_bytes`
//!   null; prints the estimator's schedule lacks come last with `estimated_bytes` null.
//!   Estimated is PyTorch tensors (static + dynamic), the figure `alloc=` measures.
//! - **components**: parameters (measured after `apply_fsdp`, against the estimator's parameters
//!   of both stages plus FSDP shards), each stage's parameters and the FSDP shards (estimated
//!   only), optimizer state (measured when a checkpoint load printed it), dynamic memory at the
//!   peak (measured: peak minus `Before pipeline`), autograd saved tensors per measured layer
//!   stage, memory outside PyTorch's allocator (measured `non-pt=` at the measured peak) and fragmentation (measured
//!   `cached=` at the measured peak).
//! - **peak**: the estimator's peak event and figure (the overlap's high-water mark) against the
//!   highest pipeline print.
//!
//! A figure is off when it differs by more than the [`Tolerance`]: 10 % of the measured figure
//! or 128 MiB, whichever is larger. The floor keeps tiny models from being "off" on tens of MiB:
//! the prints round to 0.01 GiB (10.7 MiB), and a real run's GiB-scale figures pass the 10 %
//! long before the floor.

use schemars::JsonSchema;
use serde::Serialize;

use super::corrections::{Correction, DYNAMIC_AT_PEAK, Mismatch, NON_PYTORCH, correct};
use super::figures::Estimate;
pub use super::measured::{Measured, MeasuredPrint, MeasuredSaved};
use super::schedule::{PrintPoint, Schedule};

const GIB: f64 = (1u64 << 30) as f64;

/// When a difference counts as off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct Tolerance {
    /// Of the measured figure, as a fraction (0.10 = 10 %).
    pub relative: f64,
    /// The floor, bytes: a difference up to this is never off.
    pub absolute_bytes: i64,
}

impl Default for Tolerance {
    /// 10 % or 128 MiB.
    fn default() -> Self {
        Self {
            relative: 0.10,
            absolute_bytes: 128 << 20,
        }
    }
}

impl Tolerance {
    fn allows(&self, diff: i64, measured: i64) -> bool {
        let limit = (self.relative * measured.abs() as f64).max(self.absolute_bytes as f64);
        (diff.abs() as f64) <= limit
    }

    fn describe(&self) -> String {
        format!(
            "{:.0}% or {:.0} MiB",
            self.relative * 100.0,
            self.absolute_bytes as f64 / f64::from(1 << 20)
        )
    }
}

/// Which way an off figure leans.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// The estimate is higher than the measurement.
    Over,
    /// The estimate is lower than the measurement.
    Under,
}

/// Both sides of one figure. Absent sides are null ("not measured", "not estimated"), never 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct Pair {
    /// The estimator's figure; `None`: not estimated.
    pub estimated_bytes: Option<i64>,
    /// The prints' figure; `None`: not measured.
    pub measured_bytes: Option<i64>,
    /// Estimated minus measured; `None` when either side is absent.
    pub diff_bytes: Option<i64>,
    /// `diff / measured × 100`; null when either side is absent or measured is 0.
    pub diff_pct: Option<f64>,
    /// Set when the difference is beyond the tolerance; `None` within it or when unpaired.
    pub off: Option<Direction>,
}

impl Pair {
    fn new(estimated: Option<i64>, measured: Option<i64>, tolerance: &Tolerance) -> Self {
        let diff = estimated.zip(measured).map(|(e, m)| e - m);
        let diff_pct = diff
            .zip(measured)
            .filter(|(_, m)| *m != 0)
            .map(|(d, m)| d as f64 / m as f64 * 100.0);
        let off = diff.zip(measured).and_then(|(d, m)| {
            if tolerance.allows(d, m) {
                None
            } else if d > 0 {
                Some(Direction::Over)
            } else {
                Some(Direction::Under)
            }
        });
        Self {
            estimated_bytes: estimated,
            measured_bytes: measured,
            diff_bytes: diff,
            diff_pct,
            off,
        }
    }

    /// Both sides are there.
    pub fn paired(&self) -> bool {
        self.diff_bytes.is_some()
    }
}

/// One row of the event table.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct EventRow {
    /// The pipeline print's label; null for an estimator event no print sees.
    pub print: Option<String>,
    /// The estimator event whose state the row shows; null for a print it has no event for.
    pub estimator_event: Option<String>,
    /// That event's index in the estimator's timeline; null when there is no event.
    pub estimator_index: Option<usize>,
    /// 0 before the pipeline, else the schedule step (1-8).
    pub step: u8,
    /// The step loop's `i`; null outside a loop (`After StepN`, `static_baseline`).
    pub iteration: Option<u32>,
    /// The estimator event is an overlapped forward+backward and the print sees it after the
    /// backward chunk is freed (the estimated figure is that state, not the event's own).
    pub after_overlap: bool,
    /// The estimated PyTorch tensors against the print's `alloc=`.
    #[serde(flatten)]
    pub pair: Pair,
}

/// What a component row measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// The estimator's parameters of both modules plus FSDP shards, against allocated after
    /// `apply_fsdp`.
    Parameters,
    /// One module's parameters (estimated only).
    StageParameters,
    /// The persistent FSDP shards (estimated only).
    FsdpShards,
    /// Optimizer state, against `load_ckpt | optimizer state:` when a checkpoint was loaded.
    OptimizerState,
    /// The estimator's dynamic memory at its peak, against the highest pipeline print minus
    /// `Before pipeline` (less the cuBLAS workspace when a snapshot names it:
    /// [`super::corrections`]).
    DynamicAtPeak,
    /// One layer stage's autograd saved tensors for one chunk, against its group's `activ=`.
    SavedTensors,
    /// Memory outside PyTorch's allocator, against `non-pt=` at the highest pipeline print (plus
    /// the cuBLAS workspace when a snapshot names it: [`super::corrections`]).
    NonPytorch,
    /// Fragmentation at the estimator's peak, against `cached=` at the highest pipeline print.
    Fragmentation,
}

/// One row of the component table.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct ComponentRow {
    /// What the row measures.
    pub component: Component,
    /// The row's name in the report (`module[0] parameters (stage 0)`).
    pub label: String,
    /// Both sides, bytes.
    #[serde(flatten)]
    pub pair: Pair,
}

/// Where each side puts the peak, and both values.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct PeakRow {
    /// The label of the estimator's peak event.
    pub estimator_event: String,
    /// Its index in the estimator's timeline.
    pub estimator_index: usize,
    /// The print that sees the estimator's peak event's state, if any does.
    pub print_at_estimator_peak: Option<String>,
    /// The highest pipeline print; null when the rank printed none.
    pub measured_print: Option<String>,
    /// The peak event's PyTorch tensors (both chunks of an overlap alive) against the highest
    /// print's `alloc=`.
    #[serde(flatten)]
    pub pair: Pair,
}

/// One figure beyond the tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct OffFigure {
    /// `peak`, a component's label or a print's label.
    pub what: String,
    /// Which way it leans.
    pub direction: Direction,
    /// Estimated minus measured, bytes.
    pub diff_bytes: i64,
    /// `diff / measured × 100`; `None` when measured is 0.
    pub diff_pct: Option<f64>,
}

/// The rank's verdict: which figures are off, and one line saying so.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Verdict {
    /// No paired figure is off.
    pub within_tolerance: bool,
    /// The tolerance the figures were judged by.
    pub tolerance: Tolerance,
    /// Every off figure: the peak, then the components, then the events.
    pub off: Vec<OffFigure>,
    /// The verdict in one line (`pp rank 0: the estimate is within 10% or 128 MiB on all …`).
    pub line: String,
}

/// The `estimate` section for one pp rank.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RankComparison {
    /// The pp rank compared.
    pub pp_rank: u32,
    /// Every estimator event in order, each with the prints that see it, then the prints with
    /// no estimator event.
    pub events: Vec<EventRow>,
    /// The component table.
    pub components: Vec<ComponentRow>,
    /// Both sides' peaks.
    pub peak: PeakRow,
    /// Which figures are off.
    pub verdict: Verdict,
    /// The mismatches of bookkeeping corrected before pairing (or that could not be), each
    /// with what was moved, how many bytes, from where to where and why; the figures above
    /// are the corrected ones.
    pub corrections: Vec<Correction>,
    /// The estimate's notes, then what the pairing found worth saying; one sentence each.
    pub notes: Vec<String>,
    /// The estimator's own verdict on the GPU, as it printed it.
    pub estimator_fit: EstimatorFit,
}

/// The estimator's STATUS and headroom as it printed them: its TOTAL before any correction, so
/// that they are its own verdict (memprints' own is the rank's `status` and `headroom_bytes`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, JsonSchema)]
pub struct EstimatorFit {
    /// Its `STATUS:` line; `None` when its output has none.
    pub status: Option<crate::figures::Status>,
    /// Its TOTAL at the peak (model tensors, non-PyTorch and fragmentation), bytes.
    pub total_bytes: i64,
    /// The GPU capacity it judged against (`--gpu-memory-gb`), bytes.
    pub capacity_bytes: i64,
    /// The capacity minus the TOTAL, bytes.
    pub headroom_bytes: i64,
}

fn gib(bytes: i64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB)
}

/// Sets `estimate` beside `measured` (the same pp rank).
///
/// The figures paired are those [`correct`] gives: the mismatches of bookkeeping corrected,
/// each listed in `corrections`.
pub fn compare(estimate: &Estimate, measured: &Measured, tolerance: Tolerance) -> RankComparison {
    // The peak is the prints' own (the report's, where the snapshot's owners were read); the
    // corrections change its figures, not which print it is.
    let peak_at = measured.peak().map(|p| p.point);
    let estimator_fit = EstimatorFit {
        status: estimate.status,
        total_bytes: estimate.total_at_peak,
        capacity_bytes: estimate.gpu_memory,
        headroom_bytes: estimate.gpu_memory - estimate.total_at_peak,
    };
    let (estimate, measured, corrections) = correct(estimate, measured);
    let (estimate, measured) = (&estimate, &measured);
    let peak = measured.pipeline.iter().find(|p| Some(p.point) == peak_at);
    let schedule = estimate.schedule();
    let mut notes = estimate.notes.clone();
    if measured.cublas_workspace == Some(0) {
        notes.push(
            "the memory snapshot names no cuBLAS/cuBLASLt workspace at the peak: nothing to \
             move to the estimator's side"
                .to_owned(),
        );
    }
    let events = event_rows(estimate, measured, &schedule, &tolerance, &mut notes);
    let components = component_rows(
        estimate,
        measured,
        peak,
        &corrections,
        &tolerance,
        &mut notes,
    );
    let peak = peak_row(estimate, measured, peak, &schedule, &tolerance);
    let verdict = verdict(measured.pp_rank, &events, &components, &peak, tolerance);
    RankComparison {
        pp_rank: measured.pp_rank,
        events,
        components,
        peak,
        verdict,
        corrections,
        notes,
        estimator_fit,
    }
}

fn event_rows(
    estimate: &Estimate,
    measured: &Measured,
    schedule: &Schedule,
    tolerance: &Tolerance,
    notes: &mut Vec<String>,
) -> Vec<EventRow> {
    let mut seen_by: Vec<Vec<(&MeasuredPrint, bool)>> = vec![Vec::new(); estimate.events.len()];
    let mut unmatched = Vec::new();
    for print in &measured.pipeline {
        match schedule.counterpart(&print.point) {
            Some(c) => seen_by[c.index].push((print, c.after_overlap)),
            None => unmatched.push(print),
        }
        if let Some((step, count)) = print.point.count() {
            let estimated = schedule.iterations(step);
            if estimated != count {
                notes.push(format!(
                    "step {step} ran {count} iteration(s) but the estimator simulated \
                     {estimated}: the run's settings differ from the estimate's (check --pp, \
                     --micro-batch-size, --global-batch-size, --world)"
                ));
            }
        }
    }
    let mut rows = Vec::new();
    for (index, event) in estimate.events.iter().enumerate() {
        let parsed = schedule.events[index];
        let step = parsed.map_or(0, |e| e.step);
        let iteration = parsed.and_then(|e| e.iteration);
        if seen_by[index].is_empty() {
            rows.push(EventRow {
                print: None,
                estimator_event: Some(event.label.clone()),
                estimator_index: Some(index),
                step,
                iteration,
                after_overlap: false,
                pair: Pair::new(Some(event.allocated), None, tolerance),
            });
        }
        for (print, after_overlap) in &seen_by[index] {
            let estimated = if *after_overlap {
                event.allocated_after
            } else {
                Some(event.allocated)
            };
            rows.push(EventRow {
                print: Some(print.point.to_string()),
                estimator_event: Some(event.label.clone()),
                estimator_index: Some(index),
                step: print.point.step(),
                iteration: print.point.iteration(),
                after_overlap: *after_overlap,
                pair: Pair::new(estimated, Some(print.allocated), tolerance),
            });
        }
    }
    if rows.iter().any(|r| r.after_overlap) {
        notes.push(
            "Step4 prints follow an overlapped forward+backward: they are paired with the \
             estimator's state once the backward chunk is freed, not with its fwd_bwd figure \
             (both chunks alive), which no print sees"
                .to_owned(),
        );
    }
    for print in &unmatched {
        rows.push(EventRow {
            print: Some(print.point.to_string()),
            estimator_event: None,
            estimator_index: None,
            step: print.point.step(),
            iteration: print.point.iteration(),
            after_overlap: false,
            pair: Pair::new(None, Some(print.allocated), tolerance),
        });
    }
    if !unmatched.is_empty() {
        let labels: Vec<String> = unmatched.iter().map(|p| p.point.to_string()).collect();
        notes.push(format!(
            "no estimator event for {}: its schedule lacks that step or iteration",
            labels.join(", ")
        ));
    }
    rows
}

fn component_rows(
    estimate: &Estimate,
    measured: &Measured,
    peak: Option<&MeasuredPrint>,
    corrections: &[Correction],
    tolerance: &Tolerance,
    notes: &mut Vec<String>,
) -> Vec<ComponentRow> {
    let row = |component, label: String, estimated, measured| ComponentRow {
        component,
        label,
        pair: Pair::new(estimated, measured, tolerance),
    };
    let params: i64 = estimate.params.iter().map(|p| p.bytes).sum();
    let mut rows = vec![row(
        Component::Parameters,
        "parameters (measured after apply_fsdp)".to_owned(),
        Some(params + estimate.fsdp_sharded),
        measured.params_after_setup,
    )];
    for p in &estimate.params {
        rows.push(row(
            Component::StageParameters,
            format!("module[{}] parameters (stage {})", p.module, p.stage),
            Some(p.bytes),
            None,
        ));
    }
    rows.push(row(
        Component::FsdpShards,
        "FSDP shards".to_owned(),
        Some(estimate.fsdp_sharded),
        None,
    ));
    if measured.params_after_setup.is_some() {
        notes.push(
            "after apply_fsdp PithTrain holds its FSDP-sharded fp32 parameters; the estimator \
             counts the bf16 unsharded parameters the pipeline uses (plus shards when they are \
             split over more than one GPU)"
                .to_owned(),
        );
    }
    rows.push(row(
        Component::OptimizerState,
        "optimizer state".to_owned(),
        Some(estimate.optimizer),
        measured.optimizer_state,
    ));
    let workspace_moved = corrections
        .iter()
        .any(|c| c.mismatch == Mismatch::CublasWorkspace && c.applied);
    let (moved, moved_in) = if workspace_moved {
        (" − cuBLAS workspace", " + cuBLAS workspace")
    } else {
        ("", "")
    };
    let before = measured
        .pipeline
        .iter()
        .find(|p| p.point == PrintPoint::BeforePipeline);
    rows.push(row(
        Component::DynamicAtPeak,
        format!("{DYNAMIC_AT_PEAK} (measured: peak − Before pipeline{moved})"),
        Some(estimate.at_peak.total()),
        before.zip(peak).map(|(b, p)| p.allocated - b.allocated),
    ));
    for saved in &measured.saved_tensors {
        rows.push(row(
            Component::SavedTensors,
            format!("layer {} stage {} saved tensors", saved.layer, saved.stage),
            estimate.autograd_of(saved.layer, saved.stage),
            Some(saved.activations),
        ));
    }
    if !measured.saved_tensors.is_empty() {
        notes.push(
            "saved tensors: measured is all autograd saved in that stage of one chunk (FSDP's \
             unsharded weights included when the print cannot tell them from activations); \
             estimated is the estimator's autograd saved tensors, which leave out weights and \
             what it counts as LayerRecord tensors (stage 5's combine output)"
                .to_owned(),
        );
    }
    rows.push(row(
        Component::NonPytorch,
        format!("{NON_PYTORCH} (measured: non-pt= at the peak print{moved_in})"),
        Some(estimate.non_pytorch),
        peak.map(|p| p.non_pytorch),
    ));
    rows.push(row(
        Component::Fragmentation,
        format!(
            "fragmentation ({:.0}% of the estimate's subtotal; measured: cached at the peak print)",
            estimate.fragmentation_factor * 100.0
        ),
        Some(estimate.fragmentation_at_peak),
        peak.map(|p| p.cached),
    ));
    rows
}

fn peak_row(
    estimate: &Estimate,
    measured: &Measured,
    peak: Option<&MeasuredPrint>,
    schedule: &Schedule,
    tolerance: &Tolerance,
) -> PeakRow {
    let print_at_estimator_peak = measured
        .pipeline
        .iter()
        .find(|p| {
            schedule
                .counterpart(&p.point)
                .is_some_and(|c| c.index == estimate.peak_index)
        })
        .map(|p| p.point.to_string());
    PeakRow {
        estimator_event: estimate.peak().label.clone(),
        estimator_index: estimate.peak_index,
        print_at_estimator_peak,
        measured_print: peak.map(|p| p.point.to_string()),
        pair: Pair::new(
            Some(estimate.peak().allocated),
            peak.map(|p| p.allocated),
            tolerance,
        ),
    }
}

fn verdict(
    pp_rank: u32,
    events: &[EventRow],
    components: &[ComponentRow],
    peak: &PeakRow,
    tolerance: Tolerance,
) -> Verdict {
    let mut off = Vec::new();
    let mut push = |what: String, pair: &Pair| {
        if let (Some(direction), Some(diff_bytes)) = (pair.off, pair.diff_bytes) {
            off.push(OffFigure {
                what,
                direction,
                diff_bytes,
                diff_pct: pair.diff_pct,
            });
        }
    };
    push("peak".to_owned(), &peak.pair);
    for c in components {
        push(c.label.clone(), &c.pair);
    }
    let paired_events: Vec<&EventRow> = events.iter().filter(|r| r.pair.paired()).collect();
    let off_events: Vec<&&EventRow> = paired_events
        .iter()
        .filter(|r| r.pair.off.is_some())
        .collect();
    for r in &off_events {
        push(r.print.clone().unwrap_or_default(), &r.pair);
    }
    let paired = paired_events.len() + components.iter().filter(|c| c.pair.paired()).count() + 1;
    let mut parts: Vec<String> = Vec::new();
    let describe = |what: &str, pair: &Pair| {
        let diff = pair.diff_bytes.unwrap_or(0);
        let pct = pair
            .diff_pct
            .map_or(String::new(), |p| format!(" ({p:+.0}%)"));
        let lean = if diff > 0 { "over" } else { "under" };
        format!("{what} {lean} by {}{pct}", gib(diff.abs()))
    };
    if peak.pair.off.is_some() {
        parts.push(describe("peak", &peak.pair));
    }
    if let Some(worst) = off_events
        .iter()
        .max_by_key(|r| r.pair.diff_bytes.map_or(0, i64::abs))
    {
        parts.push(format!(
            "{} of {} events off, worst {}",
            off_events.len(),
            paired_events.len(),
            describe(worst.print.as_deref().unwrap_or("?"), &worst.pair)
        ));
    }
    for c in components.iter().filter(|c| c.pair.off.is_some()) {
        let name = c.label.split(" (").next().unwrap_or(&c.label);
        parts.push(describe(name, &c.pair));
    }
    let within = off.is_empty();
    let line = if within {
        format!(
            "pp rank {pp_rank}: the estimate is within {} on all {paired} paired figures",
            tolerance.describe()
        )
    } else {
        format!(
            "pp rank {pp_rank}: {} of {paired} paired figures off by more than {}: {}",
            off.len(),
            tolerance.describe(),
            parts.join("; ")
        )
    };
    Verdict {
        within_tolerance: within,
        tolerance,
        off,
        line,
    }
}
