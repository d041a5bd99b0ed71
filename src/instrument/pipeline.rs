//! Group 4, `pithtrain/dualpipe/dualpipev.py`: memory after every phase of `DualPipeV.step()`'s
//! 8-step schedule, on the ranks in `RANKS`, while `self.memory_profiling` is on.
//!
//! - 4A: the `_profiling` flag and a "Before pipeline" print, just before `# Step 1` at the level
//!   of `step()`'s body (not inside `if self.is_first_pp_rank:`, where every stage but the first
//!   would skip it).
//! - 4B-4E: prints inside the loops of steps 1-4 and after each loop; step 1's second iteration
//!   (phase 0) and step 2's first (phase 1) switch on per-layer profiling in `execution.py`.
//! - 4G: "After Step8" after `assert WeightGradStore.funcs_queue.empty()`.
//!
//! Observation only: synchronize + read counters + print between existing calls.

use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::python::find;
use crate::template::PIPELINE;

/// Plans group 4.
pub fn plan(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
    let class = find::class(&src.module.body, "DualPipeV")
        .ok_or_else(|| anchor::missing(src, "<module>", "`class DualPipeV`", 0))?;
    let step = find::method(class, "step")
        .ok_or_else(|| anchor::missing(src, "DualPipeV", "`def step`", class.start().to_usize()))?;
    let fname = "DualPipeV.step";
    let near = step.start().to_usize();
    let ranks = params.ranks_literal();
    let block = |name: &str| PIPELINE.render(name, &[("RANKS", &ranks)]);
    let join = |names: &[&str]| {
        names
            .iter()
            .map(|n| block(n))
            .collect::<Vec<_>>()
            .join("\n")
    };

    // 4A.
    let step_1 = anchor::assignment(src, step, "step_1")?;
    let at = anchor::leading_comments_start(src, step_1.start().to_usize());
    let blank = usize::from(anchor::blank_line_before(src, at));
    edits.insert_lines(
        at,
        src.indent_at(step_1.start().to_usize()),
        &block("before_pipeline"),
        0,
        blank,
    )?;

    // 4B.
    let loop_1 = anchor::range_loop(src, step, "step_1")?;
    let f0 = anchor::nth_call(
        src,
        fname,
        anchor::loop_body(loop_1),
        "_forward_chunk",
        0,
        near,
    )?;
    edits.insert_before(f0, &block("step1_layer_profile_on"), 0)?;
    edits.insert_after(f0, &join(&["step1_layer_profile_off", "step1_iteration"]))?;
    edits.insert_after(loop_1, &block("step1_after"))?;

    // 4C.
    let loop_2 = anchor::range_loop(src, step, "step_2")?;
    let body = anchor::loop_body(loop_2);
    let f0 = anchor::nth_call(
        src,
        fname,
        body,
        "_forward_chunk",
        0,
        loop_2.start().to_usize(),
    )?;
    let f1 = anchor::nth_call(
        src,
        fname,
        body,
        "_forward_chunk",
        1,
        loop_2.start().to_usize(),
    )?;
    edits.insert_after(f0, &block("step2_chunk0"))?;
    edits.insert_before(f1, &block("step2_layer_profile_on"), 0)?;
    edits.insert_after(f1, &join(&["step2_layer_profile_off", "step2_chunk1"]))?;
    edits.insert_after(loop_2, &block("step2_after"))?;

    // 4D.
    let loop_3 = anchor::range_loop(src, step, "step_3")?;
    let body = anchor::loop_body(loop_3);
    let near3 = loop_3.start().to_usize();
    let b1 = anchor::nth_call(src, fname, body, "_backward_chunk", 0, near3)?;
    let w1 = anchor::nth_call(src, fname, body, "_weight_chunk", 0, near3)?;
    let f1 = anchor::nth_call(src, fname, body, "_forward_chunk", 0, near3)?;
    edits.insert_before(b1, &block("step3_before_b1"), 0)?;
    edits.insert_after(b1, &block("step3_after_b1"))?;
    edits.insert_after(w1, &block("step3_after_w1"))?;
    edits.insert_after(f1, &block("step3_after_f1"))?;
    edits.insert_after(loop_3, &block("step3_after"))?;

    // 4E.
    let loop_4 = anchor::range_loop(src, step, "step_4")?;
    let last = anchor::loop_body(loop_4)
        .last()
        .filter(|stmt| find::simple_calls(stmt, "_forward_backward_chunk"))
        .ok_or_else(|| {
            anchor::missing(
                src,
                fname,
                "`self._forward_backward_chunk(1, 0)` ending the step 4 loop",
                loop_4.start().to_usize(),
            )
        })?;
    edits.insert_after(last, &block("step4_iteration"))?;
    edits.insert_after(loop_4, &block("step4_after"))?;

    // 4G.
    let drained = step
        .body
        .iter()
        .find(|stmt| {
            matches!(stmt, ruff_python_ast::Stmt::Assert(_))
                && src.slice(*stmt).contains("funcs_queue.empty()")
        })
        .ok_or_else(|| {
            anchor::missing(
                src,
                fname,
                "`assert WeightGradStore.funcs_queue.empty()`",
                near,
            )
        })?;
    edits.insert_after(drained, &block("step8_after"))?;

    placed.push(Placed::with_labels(
        "4",
        "prints around steps 1-4 and after step 8 in DualPipeV.step",
        &[
            "Before pipeline",
            "Step1 F0 i=",
            "After Step1",
            "Step2 i= forward_chunk(0|1)",
            "After Step2",
            "Step3 i= before B1/after B1/after W1/after F1",
            "After Step3",
            "Step4 i=",
            "After Step4",
            "After Step8 (end of pipeline)",
        ],
    ));
    Ok(())
}
