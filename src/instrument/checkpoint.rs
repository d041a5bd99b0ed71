//! Group 6, `pithtrain/tasks/pretrain_lm.py`: after `dcp.load(...)` in `load_checkpoint`, the size
//! of the optimizer state just loaded (summed over every optimizer: PithTrain keeps a tuple of
//! them) and the allocator's view of memory.
//!
//! `DTensor` is imported only when the module does not import it already. Observation only:
//! reads tensor sizes and memory counters, prints.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::python::find;
use crate::template::CHECKPOINT;

/// Plans group 6.
pub fn plan(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
    let def = anchor::function(src, "load_checkpoint")?;
    let load = find::find_deep(&def.body, &|stmt| {
        find::is_simple(stmt)
            && find::calls_in_stmt(stmt).iter().any(|call| {
                matches!(&*call.func, Expr::Attribute(a) if a.attr.as_str() == "load" && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "dcp"))
            })
    })
    .ok_or_else(|| anchor::missing(src, "load_checkpoint", "a call to `dcp.load(...)`", def.start().to_usize()))?;

    let binds = |name: &str| {
        find::find_deep(&def.body, &|stmt| {
            find::assigned_names(stmt).contains(&name)
        })
        .is_some()
    };
    let optimizers = if binds("optimizers") {
        "optimizers"
    } else if binds("optimizer") {
        "(optimizer,)"
    } else {
        return Err(anchor::missing(
            src,
            "load_checkpoint",
            "a local `optimizers` (or `optimizer`)",
            def.start().to_usize(),
        ));
    };
    let block = CHECKPOINT.render(
        "after_load",
        &[
            ("RANKS", &params.ranks_literal()),
            ("OPTIMIZERS", optimizers),
        ],
    );
    edits.insert_after(load, &block)?;

    if !imports_name(&src.module.body, "DTensor") {
        let (anchor_stmt, before) = dtensor_import_position(&src.module.body)
            .ok_or_else(|| anchor::missing(src, "<module>", "the module's torch imports", 0))?;
        let import = CHECKPOINT.block("dtensor_import");
        if before {
            edits.insert_before(anchor_stmt, import, 0)?;
        } else {
            edits.insert_after(anchor_stmt, import)?;
        }
    }
    placed.push(Placed::with_labels(
        "6",
        "optimizer-state print after dcp.load in load_checkpoint",
        &["load_ckpt | optimizer state:"],
    ));
    Ok(())
}

/// True when a top-level import binds `name`.
pub fn imports_name(body: &[Stmt], name: &str) -> bool {
    body.iter().any(|stmt| match stmt {
        Stmt::ImportFrom(import) => import
            .names
            .iter()
            .any(|alias| alias.asname.as_ref().unwrap_or(&alias.name).as_str() == name),
        _ => false,
    })
}

/// Where `from torch.distributed.tensor import DTensor` goes so isort's order holds: before the
/// first `from torch...` import that sorts after it, else after the last `torch` import.
fn dtensor_import_position(body: &[Stmt]) -> Option<(&Stmt, bool)> {
    const MODULE: &str = "torch.distributed.tensor";
    let mut last_torch = None;
    for stmt in body
        .iter()
        .take_while(|s| matches!(s, Stmt::Import(_) | Stmt::ImportFrom(_) | Stmt::Expr(_)))
    {
        match stmt {
            Stmt::ImportFrom(import) => {
                let module = import.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                if module == "torch" || module.starts_with("torch.") {
                    if module.to_lowercase().as_str() > MODULE {
                        return Some((stmt, true));
                    }
                    last_torch = Some(stmt);
                }
            }
            Stmt::Import(import)
                if import.names.iter().any(|a| {
                    a.name.as_str() == "torch" || a.name.as_str().starts_with("torch.")
                }) =>
            {
                last_torch = Some(stmt);
            }
            _ => {}
        }
    }
    last_torch.map(|stmt| (stmt, false))
}
