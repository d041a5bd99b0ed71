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
//! Functions under `@torch.compile` never get prints (a print would break the graph); the
//! anchors above are all outside them, and a compiled anchor method is refused.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::{Error, Result};
use crate::params::Params;
use crate::pithtrain::models::ModelLayout;
use crate::python::{PySource, find};
use crate::template::MODEL;

/// Plans groups 5B-5E.
pub fn plan(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
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

    placed.push(Placed::with_labels(
        "5B-5E",
        &format!(
            "probes in {}.forward_stage1/3, {}.forward, {}.forward_prolog/epilog",
            layout.decoder.name, layout.experts.name, layout.model.name
        ),
        &[
            "layerN stage1: ...",
            "layerN stage3: ...",
            "experts: ...",
            "after prolog",
            "before epilog / after norm / after lm_head",
        ],
    ));
    Ok(())
}

fn not_compiled<'a>(src: &PySource, def: &'a StmtFunctionDef) -> Result<&'a StmtFunctionDef> {
    if find::is_compiled(def) {
        return Err(Error::Unsupported {
            file: src.rel.clone(),
            reason: format!(
                "`{}` (line {}) is under @torch.compile; a print inside it would break the graph, so memprints will not instrument it",
                def.name,
                src.line_number(def.start().to_usize())
            ),
        });
    }
    Ok(def)
}

/// `"text"`, or `f"text"` when the text has `{fields}`.
fn literal(label: &str) -> String {
    if label.contains('{') {
        format!("f\"{label}\"")
    } else {
        format!("\"{label}\"")
    }
}

fn probe(flag: &str, label: &str) -> String {
    MODEL.render("probe", &[("FLAG", flag), ("LABEL", &literal(label))])
}

fn shape_of(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("{n}={{tuple({n}.shape)}}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn preamble(layers: &str) -> String {
    MODEL.render("layer_preamble", &[("DETAIL_LAYERS", layers)])
}

fn first_stmt<'a>(src: &PySource, def: &'a StmtFunctionDef) -> Result<&'a Stmt> {
    find::body_after_docstring(def).first().ok_or_else(|| {
        anchor::missing(
            src,
            def.name.as_str(),
            "a statement in the body",
            def.start().to_usize(),
        )
    })
}

fn stage1_probes(edits: &mut FileEdits, def: &StmtFunctionDef, layers: &str) -> Result<()> {
    let src = edits.src;
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

    edits.insert_before(first_stmt(src, def)?, &preamble(layers), 0)?;
    edits.insert_before(
        compute,
        &probe(
            "_do",
            "  layer{self.idx} stage1: before forward_stage1_compute",
        ),
        0,
    )?;
    let after_compute = if router.is_some() {
        "(LN+Attn+LN)"
    } else {
        "(LN+Attn+LN+gate)"
    };
    edits.insert_after(
        compute,
        &probe(
            "_do",
            &format!("  layer{{self.idx}} stage1: after forward_stage1_compute {after_compute}"),
        ),
    )?;
    if let Some(router) = router {
        edits.insert_after(
            router,
            &probe("_do", "  layer{self.idx} stage1: after router"),
        )?;
    }
    let label = format!(
        "  layer{{self.idx}} stage1: after dispatch_prep  dispatch={{tuple({dispatch_name}.shape)}}"
    );
    edits.insert_after(dispatch, &probe("_do", &label))
}

fn stage3_probes(edits: &mut FileEdits, def: &StmtFunctionDef, layers: &str) -> Result<()> {
    let src = edits.src;
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
    let experts = find::find_deep(&def.body, &|stmt| {
        matches!(stmt, Stmt::Assign(_))
            && find::calls_in_stmt(stmt)
                .iter()
                .any(|c| matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "experts"))
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

    edits.insert_before(first_stmt(src, def)?, &preamble(layers), 0)?;
    edits.insert_before(gather, &probe("_do", &format!("  layer{{self.idx}} stage3: before expand gather  gathered={{tuple({gathered}.shape)}}")), 0)?;
    edits.insert_after(gather, &probe("_do", &format!("  layer{{self.idx}} stage3: after expand gather   expanded={{tuple({gathered}.shape)}}")))?;
    edits.insert_after(scatter, &probe("_do", &format!("  layer{{self.idx}} stage3: after scatter      {scattered}={{tuple({scattered}.shape)}}")))?;

    let call = find::calls_in_stmt(experts)
        .into_iter()
        .find(|c| matches!(&*c.func, Expr::Attribute(a) if a.attr.as_str() == "experts"))
        .expect("found above");
    let statement = edits.with_keyword_argument(experts, call, "_do_mem=_do");
    let block = format!(
        "{statement}\n{}",
        probe(
            "_do",
            &format!(
                "  layer{{self.idx}} stage3: after experts      {outs}={{tuple({outs}.shape)}}"
            )
        )
    );
    edits.replace_lines(experts, &block)?;

    let value = find::value_of(unshuffle).expect("a return with a call");
    let split = format!(
        "{}\n{}\nreturn {outs}",
        MODEL.render(
            "split_return",
            &[("NAME", outs), ("EXPR", src.slice(value))]
        ),
        probe(
            "_do",
            &format!(
                "  layer{{self.idx}} stage3: after unshuffle    {outs}={{tuple({outs}.shape)}}"
            )
        )
    );
    edits.replace_lines(unshuffle, &split)
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

fn experts_label(step: &str, names: &[&str]) -> String {
    format!("    experts: {:<17} {}", step, shape_of(names))
}

fn experts_probes(edits: &mut FileEdits, def: &StmtFunctionDef) -> Result<()> {
    let src = edits.src;
    let near = def.start().to_usize();
    let input = def
        .parameters
        .args
        .iter()
        .map(|p| p.parameter.name.as_str())
        .find(|n| *n != "self")
        .ok_or_else(|| anchor::missing(src, "forward", "the input tensor parameter", near))?;
    add_do_mem_parameter(edits, def)?;
    let body = find::body_after_docstring(def);
    let first = first_stmt(src, def)?;
    edits.insert_before(first, MODEL.block("experts_import"), 1)?;

    let mut flow: Vec<String> = vec![input.to_string()];
    let mut first_step = true;
    for stmt in body {
        let Stmt::Assign(assign) = stmt else { continue };
        let reads = data_names(&assign.value);
        if !reads.iter().any(|r| flow.iter().any(|f| f == r)) {
            continue;
        }
        if first_step {
            edits.insert_before(
                stmt,
                &probe("_do_mem", &experts_label("input", &[input])),
                0,
            )?;
            first_step = false;
        }
        let names = find::assigned_names(stmt);
        flow.extend(names.iter().map(|n| n.to_string()));
        let label = experts_label(&format!("after {}", describe(src, &assign.value)), &names);
        edits.insert_after(stmt, &probe("_do_mem", &label))?;
    }
    if first_step {
        return Err(anchor::missing(
            src,
            "forward",
            &format!("a projection of the input `{input}`"),
            near,
        ));
    }

    let Some(ret @ Stmt::Return(ret_stmt)) = body.last() else {
        return Err(anchor::missing(src, "forward", "the final `return`", near));
    };
    let Some(value) = ret_stmt.value.as_deref() else {
        return Ok(());
    };
    let Expr::Call(call) = value else {
        return Ok(());
    };
    let mut lines = Vec::new();
    let mut out_expr = src.slice(value).to_string();
    if let Some(inner @ Expr::Call(_)) = call.arguments.args.first() {
        let offset = value.start().to_usize();
        let (a, b) = (
            inner.start().to_usize() - offset,
            inner.end().to_usize() - offset,
        );
        lines.push(MODEL.render(
            "split_return",
            &[("NAME", "gu"), ("EXPR", src.slice(inner))],
        ));
        lines.push(probe(
            "_do_mem",
            &experts_label(&format!("after {}", describe(src, inner)), &["gu"]),
        ));
        out_expr = format!("{}gu{}", &out_expr[..a], &out_expr[b..]);
    }
    lines.push(MODEL.render("split_return", &[("NAME", "out"), ("EXPR", &out_expr)]));
    lines.push(probe(
        "_do_mem",
        &experts_label(&format!("after {}", describe(src, value)), &["out"]),
    ));
    lines.push("return out".to_string());
    edits.replace_lines(ret, &lines.join("\n"))
}

/// Adds the `_do_mem` parameter. A signature with a magic trailing comma gets a new
/// `_do_mem: bool = False,` line, as the skill shows; one without gets `*, _do_mem: bool = False`
/// (keyword-only, which is how it is passed), so `remove` can tell the two apart once Ruff has
/// re-wrapped the header, and restore either to the byte.
fn add_do_mem_parameter(edits: &mut FileEdits, def: &StmtFunctionDef) -> Result<()> {
    let src = edits.src;
    let params = &def.parameters;
    if params.vararg.is_some() || !params.kwonlyargs.is_empty() || params.kwarg.is_some() {
        return Err(Error::Unsupported {
            file: src.rel.clone(),
            reason: format!(
                "the experts `forward` (line {}) takes *args, keyword-only or **kwargs parameters; memprints cannot add `_do_mem` to it",
                src.line_number(def.start().to_usize())
            ),
        });
    }
    let last = params.args.last().expect("forward has parameters");
    let last_end = last.end().to_usize();
    let magic_comma = src.text[last_end..params.end().to_usize()].contains(',');
    if magic_comma {
        let line = src.full_lines(last).1;
        let text = format!(
            "{}_do_mem: bool = False,{}",
            src.indent_at(last.start().to_usize()),
            src.newline()
        );
        edits.replace_raw(line, line, text);
        return Ok(());
    }
    let header_start = src.line_start(def.start().to_usize());
    let body_start = src.line_start(def.body[0].start().to_usize());
    let header = format!(
        "{}, *, _do_mem: bool = False{}",
        &src.text[header_start..last_end],
        &src.text[last_end..body_start]
    );
    let text = reformat_header(
        edits.settings,
        &header,
        src.indent_at(def.start().to_usize()).len(),
    )
    .map_err(|message| Error::Format {
        file: src.rel.clone(),
        message,
    })?;
    let nl = src.newline();
    edits.replace_raw(
        header_start,
        body_start,
        if nl == "\n" {
            text
        } else {
            text.replace('\n', nl)
        },
    );
    Ok(())
}

/// Formats a function header (its `def` line(s), without the body) indented by `indent`
/// columns, as Ruff would lay it out in place.
pub fn reformat_header(
    settings: &crate::edit::format::FormatSettings,
    header: &str,
    indent: usize,
) -> Result<String, String> {
    let unit = " ".repeat(settings.indent_width as usize);
    let snippet = format!(
        "{}{unit}pass",
        crate::template::dedent(&header.replace('\r', ""), indent)
    );
    let formatted = settings.format_snippet(&snippet, indent)?;
    let formatted = formatted
        .strip_suffix(&format!("\n{unit}pass"))
        .unwrap_or(&formatted);
    Ok(format!(
        "{}\n",
        crate::template::indent(formatted, &" ".repeat(indent))
    ))
}

fn edge_probes(edits: &mut FileEdits, layout: &ModelLayout) -> Result<()> {
    let src = edits.src;
    let import = MODEL.block("edge_import");

    let prolog = not_compiled(src, layout.model_method("forward_prolog"))?;
    let ret = final_return(src, prolog)?;
    edits.insert_before(first_stmt(src, prolog)?, import, 1)?;
    edits.replace_lines(
        ret,
        &split_final_return(src, ret, "embeds", "after prolog (embed_tokens)"),
    )?;

    let epilog = not_compiled(src, layout.model_method("forward_epilog"))?;
    let top = format!(
        "{import}\n{}",
        probe("_layer_mem_profile", "before epilog (norm + lm_head)")
    );
    edits.insert_before(first_stmt(src, epilog)?, &top, 0)?;
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
    edits.insert_after(
        norm,
        &probe("_layer_mem_profile", "after norm, before lm_head"),
    )?;
    let ret = final_return(src, epilog)?;
    edits.replace_lines(
        ret,
        &split_final_return(src, ret, "logits", "after lm_head"),
    )
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
}

fn split_final_return(src: &PySource, ret: &Stmt, name: &str, label: &str) -> String {
    let value = find::value_of(ret).expect("checked by final_return");
    format!(
        "{}\n{}\nreturn {name}",
        MODEL.render(
            "split_return",
            &[("NAME", name), ("EXPR", src.slice(value))]
        ),
        probe("_layer_mem_profile", label)
    )
}
