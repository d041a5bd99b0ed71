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
//! This code sits below `# fmt: off`: the templates are inserted in their final shape.

use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::python::{PySource, find};
use crate::template::LAYER_FORWARD;

/// Plans group 5A.
pub fn plan(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
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
    let values = |extra: &[(&'static str, &str)]| {
        let mut v: Vec<(&str, String)> = vec![
            ("LAYER", layer.to_string()),
            ("DETAIL_LAYERS", layers.clone()),
        ];
        v.extend(extra.iter().map(|(k, val)| (*k, val.to_string())));
        v
    };
    let render = |name: &str, extra: &[(&'static str, &str)]| {
        let owned = values(extra);
        let refs: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
        LAYER_FORWARD.render(name, &refs)
    };
    let probe = |label: &str| render("probe", &[("LABEL", label)]);

    let stage1 = anchor::comment_line(src, def, "# Stage 1.")?;
    let blank = usize::from(anchor::blank_line_before(src, stage1));
    edits.insert_lines(
        stage1,
        src.indent_at(stage1),
        &render("preamble", &[]),
        0,
        blank,
    )?;

    for (stage, label) in [
        ("stage1", None),
        ("stage3", Some("after stage3 (forward_stage3)")),
        ("stage5", Some("after stage5 (forward_stage5)")),
    ] {
        let call = stage_call(src, def, layer, &format!("forward_{stage}"))?;
        let statement = src.statement_text(call, None);
        let mut block = render(
            "saved_tensors",
            &[("STAGE", stage), ("STATEMENT", &statement)],
        );
        if let Some(label) = label {
            block.push('\n');
            block.push_str(&probe(label));
        }
        edits.replace_lines(call, &block)?;
    }

    let record = anchor::assignment(src, def, ".stage1")?;
    edits.insert_after(
        record,
        &probe("after stage1 (forward_stage1: attn + gate + dispatch_prep)"),
    )?;
    for (stage, next, label) in [
        (2, 3, "after stage2 (dispatch a2a)"),
        (4, 5, "after stage4 (combine a2a)"),
    ] {
        let pop = closing_range_pop(src, def, stage, next)?;
        edits.insert_after(pop, &probe(label))?;
    }

    placed.push(Placed::with_labels(
        "5A",
        "per-stage probes and saved-tensor profiles in layer_forward",
        &["layerN after stage1..5", "layerN stageK saved tensors:"],
    ));
    Ok(())
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
}
