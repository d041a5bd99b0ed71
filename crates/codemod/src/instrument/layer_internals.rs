//! Groups 5B-5E, `pithtrain/models/<model>.py`: probes inside the decoder layer's
//! `forward_stage1` and `forward_stage3`, the experts' `forward`, and the model's
//! `forward_prolog` / `forward_epilog`. Found by structure ([`ModelLayout`]), so any model that
//! follows the 5-stage protocol is instrumented without a table entry.
//!
//! - 5B `forward_stage1`: before and after the compiled `forward_stage1_compute(...)` (its
//!   label says "LN+Attn+LN+gate", or "LN+Attn+LN" plus an "after router" probe where the router
//!   runs outside it, as in gpt-oss), and after `prepare_dispatch(...)`.
//! - 5C `forward_stage3`: around the expand gather, after `scatter_for_grouped_gemm`, after the
//!   experts (which get `_do_mem=_do`), and after the unshuffle, whose `return` is split into
//!   `outs = ...; return outs`. Dense layers return early, before any of these anchors.
//! - 5D experts `forward(..., _do_mem: bool = False)`: the input, then every step of the data
//!   flow from it (projections, slices, activations, bias adds), found by following the names
//!   the input flows into; a `return proj(act(...))` becomes `gu = act(...); out = proj(gu);
//!   return out`. A body that already returns a name keeps its return.
//! - 5E: after the embedding in `forward_prolog`, around norm and lm_head in `forward_epilog`.
//!
//! ```text
//! before                                   after
//! def forward_epilog(self, h):             def forward_epilog(self, h):
//!     h = self.norm(h)                         from pithtrain.dualpipe.execution import ...
//!     return self.lm_head(h)                   if _layer_mem_profile:
//!                                                  _lmem("before epilog (norm + lm_head)")
//!                                              h = self.norm(h)
//!                                              if _layer_mem_profile: ...
//!                                              logits = self.lm_head(h)
//!                                              if _layer_mem_profile:
//!                                                  _lmem("after lm_head")
//!                                              return logits
//! ```
//!
//! Observation only: the probes call group 1B's `_lmem` behind flags that are off unless the
//! pipeline switched per-layer profiling on; a split `return` returns the same value, and the
//! `_do_mem` parameter defaults to off. Functions under `@torch.compile` never get prints (a
//! print would break the graph); the anchors above are all outside them, and a compiled anchor
//! method is refused.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use super::vocabulary::Vocabulary;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::pithtrain::Target;
use crate::pithtrain::layout::ModelLayout;
use crate::template::LAYER_INTERNALS;
use memprints_python::edit::{FileEdits, actions};
use memprints_python::{PySource, anchor, find};

/// Groups 5B-5E.
pub const GROUP: Group = Group {
    id: "5B-5E",
    target: Target::Model,
    summary: "probes in DECODER.forward_stage1/3, EXPERTS.forward, MODEL.forward_prolog/epilog",
    template: LAYER_INTERNALS,
    markers: &[
        Marker::times("layer_preamble", 2),
        Marker::once("stage1_before_compute"),
        Marker::once("stage1_after_dispatch"),
        Marker::once("stage3_before_gather"),
        Marker::once("stage3_after_gather"),
        Marker::once("stage3_after_scatter"),
        Marker::once("stage3_after_experts"),
        Marker::once("stage3_return"),
        Marker::once("experts_import"),
        Marker::once("prolog_return"),
        Marker::once("epilog_preamble"),
        Marker::once("epilog_after_norm"),
        Marker::once("epilog_return"),
    ],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let layout = ModelLayout::find(src)?;
    let layers = params.layers_literal();

    let stage1 = not_compiled(src, layout.decoder_method("forward_stage1"))?;
    stage1_probes(edits, stage1, &layers)?;
    let stage3 = not_compiled(src, layout.decoder_method("forward_stage3"))?;
    stage3_probes(edits, stage3, &layers)?;
    let experts = find::method(layout.experts, "forward").ok_or_else(|| {
        anchor::missing(
            src,
            layout.experts.name.as_str(),
            "`def forward`",
            layout.experts.start().to_usize(),
        )
    })?;
    experts_probes(edits, not_compiled(src, experts)?)?;
    edge_probes(edits, &layout)?;
    Ok(vec![
        ("DECODER", layout.decoder.name.to_string()),
        ("EXPERTS", layout.experts.name.to_string()),
        ("MODEL", layout.model.name.to_string()),
    ])
}

fn not_compiled<'a>(src: &PySource, def: &'a StmtFunctionDef) -> Result<&'a StmtFunctionDef> {
    if find::is_compiled(def) {
        return Err(Error::CompiledAnchor {
            file: src.rel.clone(),
            function: def.name.to_string(),
            line: src.line_number(def.start().to_usize()),
        });
    }
    Ok(def)
}

fn first_stmt<'a>(src: &PySource, def: &'a StmtFunctionDef) -> Result<&'a Stmt> {
    find::body_after_docstring(def)
        .first()
        .ok_or_else(|| {
            anchor::missing(
                src,
                def.name.as_str(),
                "a statement in the body",
                def.start().to_usize(),
            )
        })
        .map_err(Error::from)
}

fn stage1_probes(edits: &mut FileEdits, def: &StmtFunctionDef, layers: &str) -> Result<()> {
    let src = edits.src();
    let body = find::body_after_docstring(def);
    let compute = anchor::call_stmt(src, def, "forward_stage1_compute")?;
    let router = body
        .iter()
        .filter(|s| s.start() > compute.start())
        .find(|s| find::calls_in_stmt(s).iter().any(|c| matches!(&*c.func, Expr::Attribute(a) if matches!(a.attr.as_str(), "router" | "gate") && src.slice(&*a.value) == "self.mlp")));
    let dispatch = anchor::call_stmt(src, def, "prepare_dispatch")?;
    let dispatch_name = *find::assigned_names(dispatch).first().ok_or_else(|| {
        anchor::missing(
            src,
            def.name.as_str(),
            "`<tokens>, <routing> = prepare_dispatch(...)`",
            dispatch.start().to_usize(),
        )
    })?;

    let preamble = LAYER_INTERNALS.fill("layer_preamble", &[("DETAIL_LAYERS", layers)]);
    edits.insert_before(first_stmt(src, def)?, &preamble, 0)?;
    edits.insert_before(compute, LAYER_INTERNALS.block("stage1_before_compute"), 0)?;
    let after_compute = match router {
        Some(_) => "stage1_after_compute_before_router",
        None => "stage1_after_compute",
    };
    edits.insert_after(compute, LAYER_INTERNALS.block(after_compute))?;
    if let Some(router) = router {
        edits.insert_after(router, LAYER_INTERNALS.block("stage1_after_router"))?;
    }
    let after_dispatch =
        LAYER_INTERNALS.fill("stage1_after_dispatch", &[("DISPATCH", dispatch_name)]);
    Ok(edits.insert_after(dispatch, &after_dispatch)?)
}

fn stage3_probes(edits: &mut FileEdits, def: &StmtFunctionDef, layers: &str) -> Result<()> {
    let src = edits.src();
    let near = def.start().to_usize();
    let gather = anchor::call_stmt(src, def, "padded_index_gather")?;
    let gathered = *find::assigned_names(gather).first().ok_or_else(|| {
        anchor::missing(
            src,
            def.name.as_str(),
            "`<tokens> = padded_index_gather(<tokens>, expand_idx)`",
            near,
        )
    })?;
    let scatter = anchor::call_stmt(src, def, "scatter_for_grouped_gemm")?;
    let scattered = *find::assigned_names(scatter).first().ok_or_else(|| {
        anchor::missing(
            src,
            def.name.as_str(),
            "`<tokens>, ... = scatter_for_grouped_gemm(...)`",
            near,
        )
    })?;
    let is_experts_call = |c: &&ruff_python_ast::ExprCall| matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "experts");
    let experts = find::find_deep(&def.body, &|stmt| {
        matches!(stmt, Stmt::Assign(_)) && find::calls_in_stmt(stmt).iter().any(is_experts_call)
    })
    .ok_or_else(|| {
        anchor::missing(
            src,
            def.name.as_str(),
            "`outs = self.mlp.experts(...)`",
            near,
        )
    })?;
    let outs = *find::assigned_names(experts)
        .first()
        .expect("an Assign binds a name");
    let unshuffle = def
        .body
        .last()
        .filter(|s| matches!(s, Stmt::Return(_)) && find::simple_calls(s, "padded_index_gather"))
        .ok_or_else(|| {
            anchor::missing(
                src,
                def.name.as_str(),
                "the final `return padded_index_gather(outs, reverse_shuffle_idxs)`",
                near,
            )
        })?;

    let fill = |block: &str, values: &[(&str, &str)]| LAYER_INTERNALS.fill(block, values);
    let preamble = fill("layer_preamble", &[("DETAIL_LAYERS", layers)]);
    edits.insert_before(first_stmt(src, def)?, &preamble, 0)?;
    let gathered = [("GATHERED", gathered)];
    edits.insert_before(gather, &fill("stage3_before_gather", &gathered), 0)?;
    edits.insert_after(gather, &fill("stage3_after_gather", &gathered))?;
    let scattered = [("SCATTERED", scattered)];
    edits.insert_after(scatter, &fill("stage3_after_scatter", &scattered))?;

    let call = find::calls_in_stmt(experts)
        .into_iter()
        .find(|c| is_experts_call(c))
        .expect("found above");
    let keyword = LAYER_INTERNALS.fragment("experts_keyword");
    actions::add_keyword_argument(edits, experts, call, keyword)?;
    edits.insert_after(experts, &fill("stage3_after_experts", &[("OUTS", outs)]))?;
    Ok(actions::split_return(edits, unshuffle, |expr| {
        fill("stage3_return", &[("EXPR", expr)])
    })?)
}

/// Names that `expr` reads as data: plain names, but not `name.shape`, `.device`, `.dtype`.
fn data_names(expr: &Expr) -> Vec<&str> {
    struct Names<'a>(Vec<&'a str>);
    impl<'a> Visitor<'a> for Names<'a> {
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Attribute(a) if matches!(a.attr.as_str(), "shape" | "device" | "dtype") => {}
                Expr::Name(n) => self.0.push(n.id.as_str()),
                _ => visitor::walk_expr(self, expr),
            }
        }
    }
    let mut names = Names(Vec::new());
    names.visit_expr(expr);
    names.0
}

/// What a data step does, for its label: the projection, function or method it calls.
fn describe(src: &PySource, expr: &Expr) -> String {
    match expr {
        Expr::Call(call) => match &*call.func {
            Expr::Attribute(attr) if src.slice(&*attr.value) == "self" => {
                let name = attr.attr.as_str();
                if name.starts_with('_') {
                    let weight = call.arguments.args.iter().find_map(|a| match a {
                        Expr::Attribute(w) if src.slice(&*w.value) == "self" => {
                            Some(w.attr.to_string())
                        }
                        _ => None,
                    });
                    weight.unwrap_or_else(|| name.to_string())
                } else {
                    name.to_string()
                }
            }
            Expr::Attribute(attr) if matches!(&*attr.value, Expr::Subscript(_)) => "slice".into(),
            Expr::Attribute(attr) => attr.attr.to_string(),
            Expr::Name(name) => name.id.to_string(),
            _ => "call".into(),
        },
        Expr::Subscript(_) => "slice".into(),
        _ => "compute".into(),
    }
}

/// The probe after an experts step that calls `operation` and binds `names`.
fn experts_step(operation: &str, names: &[&str]) -> String {
    LAYER_INTERNALS.fill(
        "experts_step",
        &[
            ("OPERATION", &padded(operation)),
            ("SHAPES", &shapes(names)),
        ],
    )
}

/// Operation names are padded to 11 columns, so that the shapes after them line up.
fn padded(operation: &str) -> String {
    format!("{operation:<11}")
}

fn shapes(names: &[&str]) -> String {
    names
        .iter()
        .map(|name| LAYER_INTERNALS.fill("experts_shape", &[("NAME", name)]))
        .collect::<Vec<_>>()
        .join(" ")
}

fn experts_probes(edits: &mut FileEdits, def: &StmtFunctionDef) -> Result<()> {
    let src = edits.src();
    let near = def.start().to_usize();
    let input = def
        .parameters
        .args
        .iter()
        .map(|p| p.parameter.name.as_str())
        .find(|n| *n != "self")
        .ok_or_else(|| anchor::missing(src, "forward", "the input tensor parameter", near))?;
    actions::add_last_parameter(edits, def, LAYER_INTERNALS.fragment("experts_parameter"))?;
    let body = find::body_after_docstring(def);
    let first = first_stmt(src, def)?;
    edits.insert_before(first, LAYER_INTERNALS.block("experts_import"), 1)?;

    let mut flow: Vec<String> = vec![input.to_string()];
    let mut first_step = true;
    for stmt in body {
        let Stmt::Assign(assign) = stmt else { continue };
        let reads = data_names(&assign.value);
        if !reads.iter().any(|r| flow.iter().any(|f| f == r)) {
            continue;
        }
        if first_step {
            let probe = LAYER_INTERNALS.fill("experts_input", &[("SHAPES", &shapes(&[input]))]);
            edits.insert_before(stmt, &probe, 0)?;
            first_step = false;
        }
        let names = find::assigned_names(stmt);
        flow.extend(names.iter().map(|n| n.to_string()));
        let probe = experts_step(&describe(src, &assign.value), &names);
        edits.insert_after(stmt, &probe)?;
    }
    if first_step {
        return Err(anchor::missing(
            src,
            "forward",
            &format!("a projection of the input `{input}`"),
            near,
        )
        .into());
    }

    let Some(ret @ Stmt::Return(ret_stmt)) = body.last() else {
        return Err(anchor::missing(src, "forward", "the final `return`", near).into());
    };
    let Some(value @ Expr::Call(call)) = ret_stmt.value.as_deref() else {
        // A body that returns a name (or nothing) already shows its result: it keeps its return.
        return Ok(());
    };
    let inner_operation = match call.arguments.args.first() {
        Some(inner @ Expr::Call(_)) => describe(src, inner),
        _ => {
            return Err(anchor::missing(
                src,
                "forward",
                "a final `return <projection>(<activation>(...))`, or `return <name>`",
                ret.start().to_usize(),
            )
            .into());
        }
    };
    let outer_operation = describe(src, value);
    let (inner_name, _) = &Vocabulary::get().nested_splits[0];
    let split = actions::split_nested_return(edits, ret, inner_name, |inner, outer| {
        LAYER_INTERNALS.fill(
            "experts_return",
            &[
                ("INNER", inner),
                ("INNER_OPERATION", &padded(&inner_operation)),
                ("OUTER", outer),
                ("OUTER_OPERATION", &padded(&outer_operation)),
            ],
        )
    })?;
    debug_assert!(split, "checked above: the return is a nested call");
    Ok(())
}

fn edge_probes(edits: &mut FileEdits, layout: &ModelLayout) -> Result<()> {
    let src = edits.src();

    let prolog = not_compiled(src, layout.model_method("forward_prolog"))?;
    let ret = final_return(src, prolog)?;
    edits.insert_before(
        first_stmt(src, prolog)?,
        LAYER_INTERNALS.block("prolog_import"),
        1,
    )?;
    actions::split_return(edits, ret, |expr| {
        LAYER_INTERNALS.fill("prolog_return", &[("EXPR", expr)])
    })?;

    let epilog = not_compiled(src, layout.model_method("forward_epilog"))?;
    edits.insert_before(
        first_stmt(src, epilog)?,
        LAYER_INTERNALS.block("epilog_preamble"),
        0,
    )?;
    let norm = find::body_after_docstring(epilog)
        .iter()
        .find(|s| {
            find::calls_in_stmt(s)
                .iter()
                .any(|c| src.slice(&*c.func) == "self.norm")
        })
        .ok_or_else(|| {
            anchor::missing(
                src,
                "forward_epilog",
                "the call `self.norm(...)`",
                epilog.start().to_usize(),
            )
        })?;
    edits.insert_after(norm, LAYER_INTERNALS.block("epilog_after_norm"))?;
    let ret = final_return(src, epilog)?;
    Ok(actions::split_return(edits, ret, |expr| {
        LAYER_INTERNALS.fill("epilog_return", &[("EXPR", expr)])
    })?)
}

fn final_return<'a>(src: &PySource, def: &'a StmtFunctionDef) -> Result<&'a Stmt> {
    def.body
        .last()
        .filter(|s| matches!(s, Stmt::Return(r) if r.value.is_some()))
        .ok_or_else(|| {
            anchor::missing(
                src,
                def.name.as_str(),
                "a final `return <expression>`",
                def.start().to_usize(),
            )
        })
        .map_err(Error::from)
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    /// Split gate and up projections, a keyword-only `_do_mem` (no magic trailing comma), the
    /// router inside the compiled block.
    const BEFORE: &str = r#"import torch
from torch import nn


class Experts(nn.Module):
    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:
        g = self.gate_proj(x, offs)
        u = self.up_proj(x, offs)
        return self.down_proj(silu_mul(g, u), offs)


class MoE(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.experts = Experts(config)


class DecoderLayer(nn.Module):
    def __init__(self, config, layer_id: int):
        super().__init__()
        self.idx = layer_id
        self.mlp = MoE(config)

    @torch.compile(fullgraph=True)
    def forward_stage1_compute(self, hidden_states):
        return hidden_states, hidden_states, None, None

    def forward_stage1(self, hidden_states):
        hidden_states, residual, topk_idx, topk_weight = self.forward_stage1_compute(hidden_states)
        dispatch_tokens, routing = prepare_dispatch(hidden_states, topk_idx, topk_weight)
        return dispatch_tokens, residual, routing

    def forward_stage3(self, gathered_tokens, expert_idxs=None, expand_idx=None):
        gathered_tokens = padded_index_gather(gathered_tokens, expand_idx)
        output_tokens, reverse_shuffle_idxs, offs = scatter_for_grouped_gemm(gathered_tokens)
        outs = self.mlp.experts(output_tokens, offs)
        return padded_index_gather(outs, reverse_shuffle_idxs)

    def forward_stage5(self, moe_outs, residual):
        return residual + moe_outs


class Model(nn.Module):
    def forward_prolog(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.embed_tokens(input_ids)

    def forward_epilog(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden_states = self.norm(hidden_states)
        return self.lm_head(hidden_states)
"#;

    #[test]
    fn group_5b_5e_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_5b_5e");
    }

    /// A fused projection sliced in two, a magic trailing comma in the experts signature (the
    /// parameter gets a line of its own), an experts body that returns a name (its return
    /// stays), and the router outside the compiled block (its own probe).
    #[test]
    fn group_5b_5e_round_trips_a_fused_model_with_the_router_outside() {
        let before = BEFORE
            .replace(
                "    def forward(self, x: torch.Tensor, offs: torch.Tensor) -> torch.Tensor:\n        g = self.gate_proj(x, offs)\n        u = self.up_proj(x, offs)\n        return self.down_proj(silu_mul(g, u), offs)\n",
                "    def forward(\n        self,\n        x: torch.Tensor,\n        offs: torch.Tensor,\n    ) -> torch.Tensor:\n        gate_up = self.gate_up_proj(x, offs)\n        out = self.down_proj(gate_up[..., ::2], offs)\n        return out\n",
            )
            .replace(
                "        dispatch_tokens, routing = prepare_dispatch(",
                "        topk_idx, topk_weight = self.mlp.router(hidden_states)\n        dispatch_tokens, routing = prepare_dispatch(",
            );
        testing::check_group(&super::GROUP, &before, "group_5b_5e_fused_router_outside");
    }

    #[test]
    fn group_5b_5e_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
