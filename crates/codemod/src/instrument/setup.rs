//! Group 3, `pithtrain/modules/training.py`: five `_setup_mem(...)` probes in `setup_model`, so
//! the log shows what each model chunk, weight initialisation and FSDP sharding cost.
//!
//! Anchors: before `modules = []`; after the first and the second `modules.append(...)`; after
//! the `for` loop that calls `init_weights`; after `apply_fsdp(...)`.
//!
//! ```text
//! before                                   after
//! modules = []                             _setup_mem("before model creation")
//! modules.append(Model(config, phase=0))   modules = []
//! modules.append(Model(config, phase=1))   modules.append(Model(config, phase=0))
//! for module in modules:                   _setup_mem("after module[0] creation")
//!     init_weights(module, n)              ...
//! apply_fsdp(modules, mesh)                apply_fsdp(modules, mesh)
//!                                          _setup_mem("after apply_fsdp")
//! ```
//!
//! Observation only: each probe is a call to group 1C's helper, which reads counters and prints.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::SETUP;
use memprints_python::edit::FileEdits;
use memprints_python::{anchor, find};

/// Group 3.
pub const GROUP: Group = Group {
    id: "3",
    target: Target::Training,
    summary: "five _setup_mem probes in setup_model",
    template: SETUP,
    markers: &[
        Marker::once("before_model_creation"),
        Marker::once("after_module0_creation"),
        Marker::once("after_module1_creation"),
        Marker::once("after_init_weights"),
        Marker::once("after_apply_fsdp"),
    ],
    insert,
};

fn insert(edits: &mut FileEdits, _: &Params) -> Result<Words> {
    let src = edits.src();
    let def = anchor::function(src, "setup_model")?;
    let near = def.start().to_usize();

    let modules = def
        .body
        .iter()
        .find(|stmt| matches!(stmt, Stmt::Assign(a) if find::assigned_names(stmt) == ["modules"] && matches!(&*a.value, Expr::List(l) if l.elts.is_empty())))
        .ok_or_else(|| anchor::missing(src, "setup_model", "the statement `modules = []`", near))?;
    edits.insert_before(modules, SETUP.block("before_model_creation"), 0)?;

    for (n, block) in ["after_module0_creation", "after_module1_creation"]
        .into_iter()
        .enumerate()
    {
        let append = anchor::nth_call(src, "setup_model", &def.body, "append", n, near)?;
        edits.insert_after(append, SETUP.block(block))?;
    }

    let init_loop = def
        .body
        .iter()
        .find(|stmt| matches!(stmt, Stmt::For(f) if f.body.iter().any(|s| find::simple_calls(s, "init_weights"))))
        .ok_or_else(|| anchor::missing(src, "setup_model", "the `for` loop calling `init_weights(...)`", near))?;
    edits.insert_after(init_loop, SETUP.block("after_init_weights"))?;

    let fsdp = anchor::call_stmt(src, def, "apply_fsdp")?;
    edits.insert_after(fsdp, SETUP.block("after_apply_fsdp"))?;
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import torch
from torch import nn


def setup_model(cfg) -> nn.Module:
    modules = []
    modules.append(Model(cfg, phase=0))
    modules.append(Model(cfg, phase=1))

    for module in modules:
        init_weights(module)

    modules = nn.Sequential(*modules)
    apply_fsdp(modules, cfg.mesh)
    return modules
"#;

    #[test]
    fn group_3_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_3");
    }

    #[test]
    fn group_3_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
