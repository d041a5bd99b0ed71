//! The mismatches of bookkeeping between the estimator and the prints, corrected before the
//! figures are paired, and each correction named.
//!
//! The estimator and the prints put two things on different sides:
//!
//! - **cuBLAS/cuBLASLt workspace.** The estimator books it outside PyTorch, in its fixed
//!   non-PyTorch figure ("cuBLAS workspace: ~0.5 GiB" of the 2.97 GiB it adds for the first
//!   forward); the caching allocator holds it, so the prints count it in `alloc=`. When the
//!   rank's memory snapshot names it at the peak ([`Measured::cublas_workspace`]), that amount
//!   is moved on the measured side from allocated to outside the allocator: out of the peak
//!   print and every print from the first one after a backward (by then every handle's
//!   workspace exists; it is kept for the process), so out of the dynamic memory at the peak,
//!   and into the non-PyTorch figure at the peak. The prints between the first forward and the
//!   first backward hold part of it (the forward's handle) and are left as measured: the
//!   snapshot's figure is of its peak and does not say which part. Without a snapshot nothing
//!   is moved, and the correction says so and by how much it may skew the figures: the
//!   estimator's own figure for the workspace ([`ESTIMATOR_CUBLAS_WORKSPACE`]).
//! - **Optimizer state.** The estimator counts Adam's state in its static memory, so in every
//!   event from `static_baseline` on; a run from scratch creates it in its first
//!   `optimizer.step()`, after the pipeline the prints measure (they see it only after a
//!   checkpoint load, `load_ckpt | optimizer state:`). When the log shows no checkpoint load,
//!   the estimator's optimizer state is taken out of every estimated event, and so out of its
//!   peak, for the comparison (its optimizer-state row keeps the figure).
//!
//! Contract: [`correct`] returns the corrected copies and one [`Correction`] per mismatch,
//! applied or not; the comparison pairs only the corrected figures, and every changed figure
//! is named in its correction's `figures`, by the row name the comparison gives it.

use schemars::JsonSchema;
use serde::Serialize;

use super::figures::Estimate;
use super::measured::Measured;
use super::schedule::{PrintPoint, Step3At};

const GIB: f64 = (1u64 << 30) as f64;

/// The estimator's own figure for the cuBLAS workspace, bytes: `int(0.5 * GiB)`, as its
/// `estimate_non_pytorch_bytes` states it within the runtime overhead of the first forward.
pub const ESTIMATOR_CUBLAS_WORKSPACE: i64 = 1 << 29;

/// The row name of the peak in a correction's `figures`.
pub const PEAK: &str = "peak";
/// The row name of the dynamic memory at the peak.
pub const DYNAMIC_AT_PEAK: &str = "dynamic at the peak";
/// The row name of memory outside PyTorch's allocator at the peak.
pub const NON_PYTORCH: &str = "outside PyTorch's allocator";
/// The name of the cuBLAS workspace, as the snapshot's owners call it.
pub const CUBLAS_WORKSPACE: &str = "cuBLAS/cuBLASLt workspace";

/// Which mismatch of bookkeeping a correction is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mismatch {
    /// The estimator books the cuBLAS/cuBLASLt workspace outside PyTorch; the prints inside the
    /// caching allocator.
    CublasWorkspace,
    /// The estimator counts optimizer state before the pipeline; a run from scratch has none
    /// there.
    OptimizerState,
}

/// Whose figures a correction changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The prints' figures.
    Measured,
    /// The estimator's figures.
    Estimated,
}

/// One mismatch of bookkeeping and what was done about it.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Correction {
    /// Which mismatch.
    pub mismatch: Mismatch,
    /// What was moved (`cuBLAS/cuBLASLt workspace`, `optimizer state`).
    pub what: String,
    /// The bytes moved; when not `applied`, the bytes by which the figures may be skewed.
    pub bytes: i64,
    /// Whose figures were changed (or would have been).
    pub side: Side,
    /// Where the bytes were booked (`allocated (alloc=)`).
    pub from: String,
    /// Where they were moved to (`outside PyTorch's allocator (non-pt=)…`); `out of the
    /// comparison…` when the other side has no place for them.
    pub to: String,
    /// The figures were corrected; `false` when they could not be (then `figures` is empty and
    /// `why` says what is missing).
    pub applied: bool,
    /// Every compared figure that changed, by its row name: `peak`, a print's label, an
    /// estimator event's label, `dynamic at the peak`, `outside PyTorch's allocator`.
    pub figures: Vec<String>,
    /// Why, in a sentence: the two sides' bookkeeping and where the bytes were read.
    pub why: String,
}

fn gib(bytes: i64) -> String {
    format!("{:.2} GiB", bytes as f64 / GIB)
}

/// A print that comes after at least one backward of the step: step 3 from its first `after
/// B1`, step 4 (an overlapped forward+backward) and after.
pub fn after_backward(point: &PrintPoint) -> bool {
    match *point {
        PrintPoint::Step3 { i, at } => i > 0 || at != Step3At::BeforeB1,
        PrintPoint::AfterStep3 { count } => count > 0,
        p => p.step() >= 4,
    }
}

/// The corrected estimate and measurement, and the corrections (see the module doc).
pub fn correct(estimate: &Estimate, measured: &Measured) -> (Estimate, Measured, Vec<Correction>) {
    let mut estimate = estimate.clone();
    let mut measured = measured.clone();
    let mut out = Vec::new();
    if let Some(c) = workspace(&mut measured) {
        out.push(c);
    }
    if let Some(c) = optimizer(&mut estimate, &measured) {
        out.push(c);
    }
    (estimate, measured, out)
}

fn workspace(measured: &mut Measured) -> Option<Correction> {
    if measured.pipeline.is_empty() {
        return None;
    }
    let from = "allocated (alloc=: the caching allocator holds it)".to_owned();
    let to = "outside PyTorch's allocator (non-pt=), where the estimator books it".to_owned();
    let Some(bytes) = measured.cublas_workspace else {
        return Some(Correction {
            mismatch: Mismatch::CublasWorkspace,
            what: CUBLAS_WORKSPACE.to_owned(),
            bytes: ESTIMATOR_CUBLAS_WORKSPACE,
            side: Side::Measured,
            from,
            to,
            applied: false,
            figures: Vec::new(),
            why: format!(
                "no memory snapshot of this rank names the workspace (pass \
                 --snapshots with the run's step-0 snapshot); the estimator books it outside \
                 PyTorch (its own figure: {}, within the runtime overhead of its non-PyTorch \
                 figure) while the prints count it in alloc=, so the measured allocated figures \
                 may be high and the non-PyTorch one low by up to that much",
                gib(ESTIMATOR_CUBLAS_WORKSPACE)
            ),
        });
    };
    if bytes <= 0 {
        return None;
    }
    let peak = measured
        .peak()
        .map(|p| p.point)
        .expect("a non-empty pipeline has a peak");
    let first_after_backward = measured
        .pipeline
        .iter()
        .position(|p| after_backward(&p.point));
    let before = measured
        .pipeline
        .iter()
        .find(|p| p.point == PrintPoint::BeforePipeline)
        .map(|p| p.point);
    // A peak before the first backward holds only the forward's part of the workspace: it
    // is left as measured, as the other prints before the first backward are.
    let peak_corrected = after_backward(&peak);
    let mut figures = Vec::new();
    for (n, print) in measured.pipeline.iter_mut().enumerate() {
        if first_after_backward.is_some_and(|f| n >= f) {
            print.allocated -= bytes;
            print.non_pytorch += bytes;
            figures.push(print.point.to_string());
        }
    }
    if peak_corrected {
        figures.insert(0, PEAK.to_owned());
        if before.is_some() {
            figures.push(DYNAMIC_AT_PEAK.to_owned());
        }
        figures.push(NON_PYTORCH.to_owned());
    }
    let from_where = measured
        .workspace_from
        .as_deref()
        .map_or(String::new(), |s| format!(" ({s})"));
    Some(Correction {
        mismatch: Mismatch::CublasWorkspace,
        what: CUBLAS_WORKSPACE.to_owned(),
        bytes,
        side: Side::Measured,
        from,
        to,
        applied: true,
        figures,
        why: format!(
            "the estimator books the cuBLAS workspace outside PyTorch (its own figure: {}, in \
             its non-PyTorch figure) while the caching allocator holds it, so the prints count \
             it in alloc=; the rank's memory snapshot{from_where} names {} of it at the peak, \
             held from the first backward on (it is kept for the process); the prints between \
             the first forward and the first backward hold only the forward's part of it and \
             are left as measured{}",
            gib(ESTIMATOR_CUBLAS_WORKSPACE),
            gib(bytes),
            if peak_corrected {
                ""
            } else {
                ", the peak among them"
            }
        ),
    })
}

fn optimizer(estimate: &mut Estimate, measured: &Measured) -> Option<Correction> {
    if measured.optimizer_state.is_some() || measured.pipeline.is_empty() || estimate.optimizer <= 0
    {
        return None;
    }
    let bytes = estimate.optimizer;
    if measured.resumed {
        // A resumed run loaded its optimizer state before the pipeline, as the estimator
        // counts it; only its size is not printed (a tree instrumented without load_ckpt).
        return Some(Correction {
            mismatch: Mismatch::OptimizerState,
            what: "optimizer state".to_owned(),
            bytes,
            side: Side::Estimated,
            from: "the estimator's static memory".to_owned(),
            to: "kept there".to_owned(),
            applied: false,
            figures: Vec::new(),
            why: "the log says PithTrain loaded a checkpoint (Load checkpoint:), so the run \
                  held its optimizer state before the pipeline as the estimator counts it; no \
                  load_ckpt print measured its size, so the two sides are not compared on it"
                .to_owned(),
        });
    }
    let mut figures = vec![PEAK.to_owned()];
    for event in &mut estimate.events {
        event.allocated -= bytes;
        if let Some(after) = &mut event.allocated_after {
            *after -= bytes;
        }
        figures.push(event.label.clone());
    }
    Some(Correction {
        mismatch: Mismatch::OptimizerState,
        what: "optimizer state".to_owned(),
        bytes,
        side: Side::Estimated,
        from: "the estimator's static memory (before the pipeline, in every event)".to_owned(),
        to: "out of the comparison (a run from scratch holds none during its first pipeline)"
            .to_owned(),
        applied: true,
        figures,
        why: format!(
            "the estimator counts {} of optimizer state from static_baseline on, while a run \
             from scratch creates it in its first optimizer.step(), after the pipeline the \
             prints measure, and this log shows no checkpoint load (load_ckpt | optimizer \
             state:) that would have put it there; taken out of every estimated event and the \
             estimated peak",
            gib(bytes)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A peak before the first backward keeps its figures (it holds only the forward's
    /// part of the workspace); the prints from the first backward on lose the workspace.
    #[test]
    fn a_peak_before_the_first_backward_is_left_as_measured() {
        use crate::measured::MeasuredPrint;
        const MIB: i64 = 1 << 20;
        let print = |label: &str, allocated| MeasuredPrint {
            point: PrintPoint::parse(label).unwrap(),
            allocated,
            cached: 0,
            non_pytorch: 1000 * MIB,
        };
        let measured = Measured {
            pipeline: vec![
                print("Before pipeline", 100 * MIB),
                print("After Step2 (1 F0F1)", 900 * MIB),
                print("Step3 i=0 after B1", 500 * MIB),
            ],
            cublas_workspace: Some(64 * MIB),
            ..Measured::default()
        };
        let mut corrected = measured.clone();
        let c = workspace(&mut corrected).unwrap();
        assert_eq!(
            corrected.pipeline[1], measured.pipeline[1],
            "the peak, as measured"
        );
        assert_eq!(corrected.pipeline[2].allocated, 436 * MIB);
        assert!(!c.figures.iter().any(|f| f == PEAK), "{:?}", c.figures);
        assert!(c.why.contains("the peak among them"), "{}", c.why);
    }

    #[test]
    fn a_print_is_after_a_backward_from_step_3_s_first_b1_on() {
        let after = |label: &str| after_backward(&PrintPoint::parse(label).unwrap());
        for label in [
            "Before pipeline",
            "Step1 F0 i=0",
            "After Step1 (2 F0)",
            "Step2 i=0 forward_chunk(1)",
            "After Step2 (1 F0F1)",
            "Step3 i=0 before B1",
            "After Step3 (0 B1W1F1)",
        ] {
            assert!(!after(label), "{label}");
        }
        for label in [
            "Step3 i=0 after B1",
            "Step3 i=1 before B1",
            "After Step3 (1 B1W1F1)",
            "Step4 i=0",
            "After Step4 (7 F0B1F1B0)",
            "After Step8 (end of pipeline)",
        ] {
            assert!(after(label), "{label}");
        }
    }
}
