//! Group 3, `pithtrain/modules/training.py`: five `_setup_mem(...)` probes in `setup_model`, so
//! the log shows what each model chunk, weight initialisation and FSDP sharding cost.
//!
//! Anchors: before `modules = []`; after the first and the second `modules.append(...)`; after
//! the `for` loop that calls `init_weights`; after `apply_fsdp(...)`. Observation only.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::python::find;
use crate::template::SETUP;

/// The five labels, in the order they print.
pub const LABELS: [&str; 5] = [
    "before model creation",
    "after module[0] creation",
    "after module[1] creation",
    "after init_weights",
    "after apply_fsdp",
];

/// Plans group 3.
pub fn plan(edits: &mut FileEdits, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
    let def = anchor::function(src, "setup_model")?;
    let probe = |label: &str| SETUP.render("probe", &[("LABEL", label)]);
    let near = def.start().to_usize();

    let modules = def
        .body
        .iter()
        .find(|stmt| matches!(stmt, Stmt::Assign(a) if find::assigned_names(stmt) == ["modules"] && matches!(&*a.value, Expr::List(l) if l.elts.is_empty())))
        .ok_or_else(|| anchor::missing(src, "setup_model", "the statement `modules = []`", near))?;
    edits.insert_before(modules, &probe(LABELS[0]), 0)?;

    for (n, label) in LABELS[1..3].iter().enumerate() {
        let append = anchor::nth_call(src, "setup_model", &def.body, "append", n, near)?;
        edits.insert_after(append, &probe(label))?;
    }

    let init_loop = def
        .body
        .iter()
        .find(|stmt| matches!(stmt, Stmt::For(f) if f.body.iter().any(|s| find::simple_calls(s, "init_weights"))))
        .ok_or_else(|| anchor::missing(src, "setup_model", "the `for` loop calling `init_weights(...)`", near))?;
    edits.insert_after(init_loop, &probe(LABELS[3]))?;

    let fsdp = anchor::call_stmt(src, def, "apply_fsdp")?;
    edits.insert_after(fsdp, &probe(LABELS[4]))?;

    let labels: Vec<String> = LABELS
        .iter()
        .map(|l| format!("setup_model | {l}:"))
        .collect();
    placed.push(Placed {
        group: "3",
        what: "five _setup_mem probes in setup_model".into(),
        labels,
    });
    Ok(())
}
