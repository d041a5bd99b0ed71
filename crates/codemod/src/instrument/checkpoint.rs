//! Group 6, `pithtrain/tasks/pretrain_lm.py`: after `dcp.load(...)` in `load_checkpoint`, the size
//! of the optimizer state just loaded (summed over every optimizer: PithTrain keeps a tuple of
//! them) and the allocator's view of memory.
//!
//! ```text
//! before                                   after
//! dcp.load(state, checkpoint_id=...)       dcp.load(state, checkpoint_id=...)
//! training.step = ...                      rank = torch.distributed.get_rank()
//!                                          if rank in {0}:
//!                                              ... print(f"[rank={rank}] load_ckpt | ...")
//!                                          training.step = ...
//! ```
//!
//! `from torch.distributed.tensor import DTensor` is added, in isort's place, only when the
//! module does not import `DTensor` already. Observation only: reads tensor sizes and memory
//! counters, prints.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::CHECKPOINT;
use memprints_python::edit::FileEdits;
use memprints_python::{anchor, find};

/// Group 6.
pub const GROUP: Group = Group {
    id: "6",
    target: Target::PretrainLm,
    summary: "optimizer-state print after dcp.load in load_checkpoint",
    template: CHECKPOINT,
    markers: &[Marker::once("after_load")],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
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
        )
        .into());
    };
    let block = CHECKPOINT.fill(
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
    Ok(Words::new())
}

/// True when a top-level import binds `name`.
fn imports_name(body: &[Stmt], name: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp


def load_checkpoint(cfg) -> None:
    checkpoints = sorted(Path(cfg.save_location).glob("step-*"))
    optimizers = cfg.optimizers
    state = {"optim": [o.state_dict() for o in optimizers]}
    dcp.load(state, checkpoint_id=checkpoints[-1])
    cfg.step = int(checkpoints[-1].stem.removeprefix("step-"))
"#;

    #[test]
    fn group_6_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_6");
    }

    #[test]
    fn group_6_keeps_a_dtensor_import_that_was_there() {
        let before = BEFORE.replace(
            "import torch.distributed.checkpoint as dcp\n",
            "import torch.distributed.checkpoint as dcp\nfrom torch.distributed.tensor import DTensor\n",
        ) + "\n\ndef local(t):\n    return t.to_local() if isinstance(t, DTensor) else t\n";
        testing::check_group(&super::GROUP, &before, "group_6_dtensor_imported");
    }

    /// PithTrain's own `rank = torch.distributed.get_rank()` right after `dcp.load(...)` ends up
    /// right after the inserted block: it looks like the block's first line, and must stay.
    #[test]
    fn group_6_keeps_the_users_own_rank_line_after_the_block() {
        let before = BEFORE.replace(
            "    cfg.step = ",
            "    rank = torch.distributed.get_rank()\n    cfg.step = ",
        );
        testing::check_group(&super::GROUP, &before, "group_6_user_rank_line");
    }

    #[test]
    fn group_6_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
