//! The layout of a PithTrain model file: which of its classes is the decoder layer, the experts
//! and the model. Found by structure rather than by name, so a model
//! written last week with the add-new-model skill is understood like the four that ship:
//!
//! - the decoder-layer class is the one with `forward_stage1`, `forward_stage3` and
//!   `forward_stage5` methods;
//! - the experts class is the class behind `self.mlp.experts` (the decoder's `self.mlp = X(...)`,
//!   whose `__init__` sets `self.experts = E(...)`); plain MLP classes are not it;
//! - the model class is the one with `forward_prolog` and `forward_epilog`.

use ruff_python_ast::{Expr, Stmt, StmtClassDef, StmtFunctionDef};
use ruff_text_size::Ranged;

use crate::error::{Error, Result};
use memprints_python::{PySource, anchor, find};

/// The three classes of a model file that memprints instruments.
pub struct ModelLayout<'a> {
    /// The decoder-layer class (`forward_stage1/3/5`).
    pub decoder: &'a StmtClassDef,
    /// The experts class, behind `self.mlp.experts`.
    pub experts: &'a StmtClassDef,
    /// The model class (`forward_prolog` / `forward_epilog`).
    pub model: &'a StmtClassDef,
}

impl<'a> ModelLayout<'a> {
    /// Finds the classes, or says which one is missing.
    pub fn find(src: &'a PySource) -> Result<Self> {
        let body = &src.module.body;
        let has = |class: &StmtClassDef, names: &[&str]| {
            names.iter().all(|n| find::method(class, n).is_some())
        };
        let decoder = find::classes(body)
            .find(|c| has(c, &["forward_stage1", "forward_stage3", "forward_stage5"]))
            .ok_or_else(|| {
                if find::classes(body).any(|c| find::method(c, "forward_attn").is_some()) {
                    Error::OldPithTrain {
                        file: src.rel.clone(),
                        what: "this model uses the old stage API (forward_attn / forward_mlp / forward_aggregate)".into(),
                    }
                } else {
                    anchor::missing(src, "<module>", "a decoder-layer class with forward_stage1/3/5 methods", 0).into()
                }
            })?;
        let model = find::classes(body)
            .find(|c| has(c, &["forward_prolog", "forward_epilog"]))
            .ok_or_else(|| {
                anchor::missing(
                    src,
                    "<module>",
                    "a model class with forward_prolog/forward_epilog",
                    0,
                )
            })?;
        let experts = experts_class(src, decoder)?;
        Ok(ModelLayout {
            decoder,
            experts,
            model,
        })
    }

    /// Method `name` of the decoder class (it exists: `find` checked).
    pub fn decoder_method(&self, name: &str) -> &'a StmtFunctionDef {
        find::method(self.decoder, name).expect("checked by ModelLayout::find")
    }

    /// Method `name` of the model class (it exists: `find` checked).
    pub fn model_method(&self, name: &str) -> &'a StmtFunctionDef {
        find::method(self.model, name).expect("checked by ModelLayout::find")
    }

    /// The name of the MoE class: the class assigned to `self.mlp` whose `__init__` creates
    /// the experts.
    pub fn experts_owner(&self, src: &'a PySource) -> Option<String> {
        let init = find::method(self.decoder, "__init__")?;
        mlp_class_names(init)
            .into_iter()
            .find(|name| {
                find::class(&src.module.body, name)
                    .and_then(|class| find::method(class, "__init__"))
                    .is_some_and(|mlp_init| {
                        let mut experts = Vec::new();
                        collect_assigned_calls(&mlp_init.body, "self.experts", &mut experts);
                        !experts.is_empty()
                    })
            })
            .map(str::to_string)
    }
}

/// Names of classes called on the right of `self.mlp = ...` in the decoder's `__init__`.
pub fn mlp_class_names(init: &StmtFunctionDef) -> Vec<&str> {
    let mut names = Vec::new();
    collect_assigned_calls(&init.body, "self.mlp", &mut names);
    names
}

fn collect_assigned_calls<'a>(body: &'a [Stmt], target: &str, out: &mut Vec<&'a str>) {
    for stmt in body {
        if let Stmt::Assign(assign) = stmt {
            let targets_match = assign.targets.iter().any(|t| match t {
                Expr::Attribute(attr) => {
                    matches!(&*attr.value, Expr::Name(n) if n.id.as_str() == "self")
                        && target == format!("self.{}", attr.attr.as_str())
                }
                _ => false,
            });
            if targets_match {
                for call in find::calls_in_expr(&assign.value) {
                    if let Expr::Name(name) = &*call.func {
                        out.push(name.id.as_str());
                    }
                }
            }
        }
        for child in find::child_bodies(stmt) {
            collect_assigned_calls(child, target, out);
        }
    }
}

/// The class behind `self.mlp.experts`.
fn experts_class<'a>(src: &'a PySource, decoder: &'a StmtClassDef) -> Result<&'a StmtClassDef> {
    let near = decoder.start().to_usize();
    let init = find::method(decoder, "__init__")
        .ok_or_else(|| anchor::missing(src, decoder.name.as_str(), "`def __init__`", near))?;
    for mlp_name in mlp_class_names(init) {
        let Some(mlp) = find::class(&src.module.body, mlp_name) else {
            continue;
        };
        let Some(mlp_init) = find::method(mlp, "__init__") else {
            continue;
        };
        let mut experts = Vec::new();
        collect_assigned_calls(&mlp_init.body, "self.experts", &mut experts);
        if let Some(class) = experts
            .into_iter()
            .find_map(|name| find::class(&src.module.body, name))
        {
            return Ok(class);
        }
    }
    Err(anchor::missing(
        src,
        &format!("{}.__init__", decoder.name),
        "the experts class (`self.mlp = MoE(...)` whose `__init__` sets `self.experts = Experts(...)`)",
        near,
    )
    .into())
}
