//! Group 4, `pithtrain/dualpipe/dualpipev.py`: memory after every phase of `DualPipeV.step()`'s
//! 8-step schedule, on the ranks in `RANKS`, while `self.memory_profiling` is on.
//!
//! - 4A: the `_profiling` flag and a "Before pipeline" print, just before `# Step 1` at the level
//!   of `step()`'s body (not inside `if self.is_first_pp_rank:`, where every stage but the first
//!   would skip it).
//! - 4B-4E: prints inside the loops of steps 1-4 and after each loop; per-layer profiling in
//!   `execution.py` is switched on around one forward of each chunk: phase 0 in step 1's second
//!   iteration, or in step 2's first where step 1 has none (`step_1 < 2`: the last pp rank,
//!   whose step 1 is empty), and phase 1 in step 2's first iteration. So every layer prints on
//!   the ranks that host it.
//! - 4G: "After Step8" after `assert WeightGradStore.funcs_queue.empty()`.
//!
//! ```text
//! before                                   after
//! # Step 1: nF0                            _profiling = self.memory_profiling and self.rank in {0}
//! step_1 = (pp_size - pp_rank - 1) * 2     if _profiling: ... print(... "Before pipeline: ...")
//! for i in range(step_1):                  # Step 1: nF0
//!     self._forward_chunk(0)               step_1 = (pp_size - pp_rank - 1) * 2
//!                                          for i in range(step_1):
//!                                              if _profiling and i == 1: ... = True
//!                                              self._forward_chunk(0)
//!                                              if _profiling and i == 1: ... = False
//!                                              if _profiling: ... print(... "Step1 F0 i=...")
//!                                          if _profiling: ... print(... "After Step1 ...")
//! ```
//!
//! Observation only: synchronize + read counters + print between existing calls; the per-layer
//! switch is a module flag only group 5A's probes read.

use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::PIPELINE;
use memprints_python::edit::FileEdits;
use memprints_python::{anchor, find};

/// Group 4.
pub const GROUP: Group = Group {
    id: "4",
    target: Target::DualPipeV,
    summary: "prints around steps 1-4 and after step 8 in DualPipeV.step",
    template: PIPELINE,
    markers: &[
        Marker::once("before_pipeline"),
        Marker::once("step1_iteration"),
        Marker::once("step1_after"),
        Marker::once("step2_chunk0"),
        Marker::once("step2_chunk1"),
        Marker::once("step2_after"),
        Marker::once("step3_before_b1"),
        Marker::once("step3_after_b1"),
        Marker::once("step3_after_w1"),
        Marker::once("step3_after_f1"),
        Marker::once("step3_after"),
        Marker::once("step4_iteration"),
        Marker::once("step4_after"),
        Marker::once("step8_after"),
    ],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let class = find::class(&src.module.body, "DualPipeV")
        .ok_or_else(|| anchor::missing(src, "<module>", "`class DualPipeV`", 0))?;
    let step = find::method(class, "step")
        .ok_or_else(|| anchor::missing(src, "DualPipeV", "`def step`", class.start().to_usize()))?;
    let fname = "DualPipeV.step";
    let near = step.start().to_usize();
    let ranks = params.ranks_literal();
    let block = |name: &str| PIPELINE.fill(name, &[("RANKS", &ranks)]);
    let join = |names: &[&str]| {
        names
            .iter()
            .map(|n| block(n))
            .collect::<Vec<_>>()
            .join("\n")
    };

    // 4A.
    let step_1 = anchor::assignment(src, step, "step_1")?;
    edits.insert_paragraph_above_comments(step_1, &block("before_pipeline"))?;

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
    let near2 = loop_2.start().to_usize();
    let f0 = anchor::nth_call(src, fname, body, "_forward_chunk", 0, near2)?;
    let f1 = anchor::nth_call(src, fname, body, "_forward_chunk", 1, near2)?;
    edits.insert_before(f0, &block("step2_phase0_profile_on"), 0)?;
    edits.insert_after(f0, &join(&["step2_phase0_profile_off", "step2_chunk0"]))?;
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
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import torch


class DualPipeV:
    def step(self, *inputs, num_chunks: int = 0):
        pp_rank = self.pp_rank
        pp_size = self.pp_size

        # Step 1: nF0
        step_1 = (pp_size - pp_rank - 1) * 2
        for i in range(step_1):
            self._forward_chunk(0)

        # Step 2: nF0F1
        step_2 = pp_rank + 1
        for i in range(step_2):
            self._forward_chunk(0, recv=False)
            self._forward_chunk(1)

        # Step 3: nB1W1F1
        step_3 = pp_size - pp_rank - 1
        for i in range(step_3):
            self._backward_chunk(1, enable_zb=True)
            self._weight_chunk()
            self._forward_chunk(1, recv=False)

        # Step 4: nF0B1F1B0
        step_4 = num_chunks - pp_size * 2 + pp_rank + 1
        for i in range(step_4):
            self._forward_backward_chunk(0, 1)
            self._forward_backward_chunk(1, 0)

        assert WeightGradStore.funcs_queue.empty()
        return None
"#;

    #[test]
    fn group_4_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_4");
    }

    #[test]
    fn group_4_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
