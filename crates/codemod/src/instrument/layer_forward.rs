//! Group 5A, `pithtrain/dualpipe/execution.py`: per-stage memory and saved-tensor profiles in
//! `layer_forward()` for the detail layers, while the pipeline has switched
//! `_layer_mem_profile` on.
//!
//! Each of the three stage calls (`layer.forward_stage1/3/5(...)`) is wrapped, verbatim, in
//! `if _do_saved: with _SavedTensorsProfiler(...): <call> ... else: <call>`; the profiler's
//! `saved_tensors_hooks` pack function returns every tensor unchanged, so autograd saves the
//! same tensors either way. Probes follow stage 1's record (`layer_record.stage1 = record`), the
//! `nvtx.range_pop()` closing stages 2 and 4, and the stage 3 and 5 calls.
//!
//! ```text
//! before                                   after
//! # Stage 1.                               _do_lmem = _layer_mem_profile and block.idx in (0, 1)
//! ...                                      _do_saved = _layer_mem_profile and block.idx in (0, 1)
//! out = block.forward_stage1(...)          # Stage 1.
//!                                          ...
//!                                          if _do_saved:
//!                                              _prof = _SavedTensorsProfiler(block, ...)
//!                                              with _prof:
//!                                                  out = block.forward_stage1(...)
//!                                              _prof.print_summary()
//!                                          else:
//!                                              out = block.forward_stage1(...)
//! ```
//!
//! This code sits below `# fmt: off`: the templates are inserted in their final shape.

use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::{Error, Result};
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::LAYER_FORWARD;
use memprints_python::edit::{FileEdits, actions};
use memprints_python::{PySource, anchor, find};

/// Group 5A.
pub const GROUP: Group = Group {
    id: "5A",
    target: Target::Execution,
    summary: "per-stage probes and saved-tensor profiles in layer_forward",
    template: LAYER_FORWARD,
    markers: &[
        Marker::once("preamble"),
        Marker::times("saved_tensors", 3),
        Marker::once("after_stage1"),
        Marker::once("after_stage2"),
        Marker::once("after_stage3"),
        Marker::once("after_stage4"),
        Marker::once("after_stage5"),
    ],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let def = anchor::function(src, "layer_forward")?;
    let layer = def
        .parameters
        .args
        .first()
        .map(|p| p.parameter.name.as_str())
        .ok_or_else(|| {
            anchor::missing(
                src,
                "layer_forward",
                "the `layer` parameter",
                def.start().to_usize(),
            )
        })?;
    let layers = params.layers_literal();
    let values = [("LAYER", layer), ("DETAIL_LAYERS", layers.as_str())];
    let block = |name: &str| LAYER_FORWARD.fill(name, &values);

    let stage1 = anchor::comment_line(src, def, "# Stage 1.")?;
    edits.insert_paragraph_at(stage1, &block("preamble"))?;

    for (stage, probe) in [
        ("stage1", None),
        ("stage3", Some("after_stage3")),
        ("stage5", Some("after_stage5")),
    ] {
        let call = stage_call(src, def, layer, &format!("forward_{stage}"))?;
        actions::wrap_in_if_else(edits, call, |statement| {
            LAYER_FORWARD.fill(
                "saved_tensors",
                &[("LAYER", layer), ("STAGE", stage), ("STATEMENT", statement)],
            )
        })?;
        if let Some(probe) = probe {
            edits.insert_after(call, &block(probe))?;
        }
    }

    let record = anchor::assignment(src, def, ".stage1")?;
    edits.insert_after(record, &block("after_stage1"))?;
    for (stage, next, probe) in [(2, 3, "after_stage2"), (4, 5, "after_stage4")] {
        let pop = closing_range_pop(src, def, stage, next)?;
        edits.insert_after(pop, &block(probe))?;
    }
    Ok(Words::new())
}

/// The statement `... = <layer>.<method>(...)` in `layer_forward`.
fn stage_call<'a>(
    src: &PySource,
    def: &'a StmtFunctionDef,
    layer: &str,
    method: &str,
) -> Result<&'a Stmt> {
    find::find_deep(&def.body, &|stmt| {
        matches!(stmt, Stmt::Assign(_))
            && find::calls_in_stmt(stmt)
                .iter()
                .any(|call| match &*call.func {
                    Expr::Attribute(attr) => {
                        attr.attr.as_str() == method
                            && matches!(&*attr.value, Expr::Name(n) if n.id.as_str() == layer)
                    }
                    _ => false,
                })
    })
    .ok_or_else(|| {
        anchor::missing(
            src,
            "layer_forward",
            &format!("the assignment `... = {layer}.{method}(...)`"),
            def.start().to_usize(),
        )
    })
    .map_err(Error::from)
}

/// The last top-level `nvtx.range_pop()` between the `# Stage {stage}.` and `# Stage {next}.`
/// comments.
fn closing_range_pop<'a>(
    src: &PySource,
    def: &'a StmtFunctionDef,
    stage: u32,
    next: u32,
) -> Result<&'a Stmt> {
    let from = anchor::comment_line(src, def, &format!("# Stage {stage}."))?;
    let to = anchor::comment_line(src, def, &format!("# Stage {next}."))?;
    def.body
        .iter()
        .filter(|stmt| {
            (from..to).contains(&stmt.start().to_usize()) && find::simple_calls(stmt, "range_pop")
        })
        .last()
        .ok_or_else(|| {
            anchor::missing(
                src,
                "layer_forward",
                &format!("`nvtx.range_pop()` closing Stage {stage}"),
                from,
            )
        })
        .map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import torch
import torch.cuda.nvtx as nvtx

# fmt: off

def layer_forward(block, hidden_states, layer_record):
    """Run the five stages of one layer."""

    # Stage 1.
    hidden_states = hidden_states.detach().requires_grad_()
    dispatch_tokens, residual, routing = block.forward_stage1(hidden_states)
    layer_record.stage1 = (hidden_states, dispatch_tokens)
    nvtx.range_pop()

    # Stage 2.
    gathered_tokens = exchange(dispatch_tokens)
    nvtx.range_pop()

    # Stage 3.
    moe_outs = block.forward_stage3(
        gathered_tokens,
        routing,
    )
    nvtx.range_pop()

    # Stage 4.
    moe_outs = exchange(moe_outs)
    nvtx.range_pop()

    # Stage 5.
    hidden_states = block.forward_stage5(moe_outs, residual)
    nvtx.range_pop()

    return hidden_states
"#;

    #[test]
    fn group_5a_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_5a");
    }

    #[test]
    fn group_5a_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }

    #[test]
    fn the_profiler_is_handed_the_layer_object_and_no_pointers_collected_before_fsdp() {
        let values = [
            ("LAYER", "block"),
            ("STAGE", "stage3"),
            ("STATEMENT", "x = 1"),
        ];
        let wrapper = crate::template::LAYER_FORWARD.fill("saved_tensors", &values);
        assert!(
            wrapper.contains("_prof = _SavedTensorsProfiler(block, \"stage3\")\n"),
            "{wrapper}"
        );
        let preamble = crate::template::LAYER_FORWARD.fill(
            "preamble",
            &[("LAYER", "block"), ("DETAIL_LAYERS", "(0, 1)")],
        );
        assert_eq!(
            preamble,
            "_do_lmem = _layer_mem_profile and block.idx in (0, 1)\n\
             _do_saved = _layer_mem_profile and block.idx in (0, 1)"
        );
    }
}
