//! Group 2, `pithtrain/modules/distributed.py`: what the CUDA context and the NCCL world
//! communicator cost (`setup_default_process_group`), and what the device mesh costs
//! (`setup_device_mesh`).
//!
//! What it adds: free-memory probes right before and after `init_process_group(...)` and
//! `init_device_mesh(...)`, with a print of the differences on the ranks in `RANKS`.
//!
//! ```text
//! before                                   after
//! kwargs = dict(backend="nccl", ...)       kwargs = dict(backend="nccl", ...)
//! torch.distributed.init_process_group(..) # Probe: isolate CUDA context cost ...
//! atexit.register(...)                     torch.cuda.set_device(distributed.local_rank)
//! torch.cuda.set_device(...)               torch.cuda.synchronize() ... G = 1024**3
//!                                          torch.distributed.init_process_group(..)
//!                                          torch.cuda.synchronize() ... print(...)
//!                                          atexit.register(...)
//!                                          # memprints: set_device moved above init_process_group
//! ```
//!
//! The skill's one allowed refactor here: `set_device` moves above `init_process_group` so the
//! probe reads the right device; a marker comment keeps its old place so `remove` can put it
//! back. The rank guard uses the global rank (`distributed.rank`, known from the environment
//! before the process group exists), since `--ranks` are global ranks. Otherwise observation
//! only: synchronize, read `mem_get_info`, print.

use ruff_python_ast::{Expr, Stmt, StmtFunctionDef};
use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::DISTRIBUTED;
use memprints_python::anchor;
use memprints_python::edit::FileEdits;

/// Group 2.
pub const GROUP: Group = Group {
    id: "2",
    target: Target::Distributed,
    summary: "probes around init_process_group and init_device_mesh",
    template: DISTRIBUTED,
    markers: &[
        Marker::once("before_init_process_group"),
        Marker::once("after_init_process_group"),
        Marker::once("before_init_device_mesh"),
        Marker::once("after_init_device_mesh"),
    ],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let ranks = params.ranks_literal();

    let def = anchor::function(src, "setup_default_process_group")?;
    let ctx = context_name(def).ok_or_else(|| {
        anchor::missing(
            src,
            def.name.as_str(),
            "the assignment `<context>.local_rank = ...`",
            def.start().to_usize(),
        )
    })?;
    let init = anchor::call_stmt(src, def, "init_process_group")?;
    let set_device = anchor::call_stmt(src, def, "set_device")?;
    let moved = set_device.start() > init.start();
    let set_device_text = if moved {
        edits.replace_lines(set_device, DISTRIBUTED.block("moved_set_device"))?;
        src.statement_text(set_device, None)
    } else {
        String::new()
    };
    let values = [
        ("CTX", ctx),
        ("RANKS", ranks.as_str()),
        ("SET_DEVICE", set_device_text.as_str()),
    ];
    edits.insert_before(
        init,
        &DISTRIBUTED.fill("before_init_process_group", &values),
        0,
    )?;
    edits.insert_after(init, &DISTRIBUTED.fill("after_init_process_group", &values))?;

    let mesh_def = anchor::function(src, "setup_device_mesh")?;
    let mesh = anchor::call_stmt(src, mesh_def, "init_device_mesh")?;
    edits.insert_before(
        mesh,
        &DISTRIBUTED.fill("before_init_device_mesh", &values),
        0,
    )?;
    edits.insert_after(mesh, &DISTRIBUTED.fill("after_init_device_mesh", &values))?;
    Ok(Words::new())
}

/// The object that `setup_default_process_group` stores `local_rank` on (`distributed`, or the
/// skill's `ctx`).
fn context_name(def: &StmtFunctionDef) -> Option<&str> {
    def.body.iter().find_map(|stmt| match stmt {
        Stmt::Assign(assign) => assign.targets.iter().find_map(|target| match target {
            Expr::Attribute(attr) if attr.attr.as_str() == "local_rank" => match &*attr.value {
                Expr::Name(name) => Some(name.id.as_str()),
                _ => None,
            },
            _ => None,
        }),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import atexit
import os

import torch

from pithtrain.contexts import distributed


def setup_default_process_group(cfg) -> None:
    distributed.rank = int(os.environ["RANK"])
    distributed.local_rank = int(os.environ["LOCAL_RANK"])
    torch.distributed.init_process_group(backend="nccl")
    atexit.register(torch.distributed.destroy_process_group)
    torch.cuda.set_device(distributed.local_rank)


def setup_device_mesh(cfg) -> None:
    distributed.device_mesh = torch.distributed.init_device_mesh("cuda", (2, 1))
"#;

    #[test]
    fn group_2_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_2");
    }

    #[test]
    fn group_2_round_trips_when_set_device_already_comes_first() {
        let before = BEFORE
            .replace("    torch.cuda.set_device(distributed.local_rank)\n", "")
            .replace(
                "    torch.distributed.init_process_group",
                "    torch.cuda.set_device(distributed.local_rank)\n    torch.distributed.init_process_group",
            );
        testing::check_group(&super::GROUP, &before, "group_2_set_device_first");
    }

    #[test]
    fn group_2_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
