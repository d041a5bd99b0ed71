//! Group 2, `pithtrain/modules/distributed.py`: what the CUDA context and the NCCL world
//! communicator cost (`setup_default_process_group`), and what the device mesh costs
//! (`setup_device_mesh`).
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
//! before the process group exists), since `--ranks` are global ranks.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::template::DISTRIBUTED;

/// Plans group 2.
pub fn plan(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
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
    let mut before = DISTRIBUTED.block("before_init_process_group").to_string();
    let set_device_text = src.statement_text(set_device, None);
    if moved {
        edits.replace_lines(set_device, DISTRIBUTED.block("moved_set_device"))?;
    } else {
        before = before.replace("SET_DEVICE\n", "");
    }
    let values = [
        ("CTX", ctx),
        ("RANKS", ranks.as_str()),
        ("SET_DEVICE", set_device_text.as_str()),
    ];
    edits.insert_before(init, &crate::template::render(&before, &values), 0)?;
    edits.insert_after(
        init,
        &DISTRIBUTED.render("after_init_process_group", &values),
    )?;

    let mesh_def = anchor::function(src, "setup_device_mesh")?;
    let mesh = anchor::call_stmt(src, mesh_def, "init_device_mesh")?;
    edits.insert_before(
        mesh,
        &DISTRIBUTED.render("before_init_device_mesh", &values),
        0,
    )?;
    edits.insert_after(mesh, &DISTRIBUTED.render("after_init_device_mesh", &values))?;

    placed.push(Placed::with_labels(
        "2",
        "probes around init_process_group and init_device_mesh",
        &[
            "init_process_group | cuda_ctx= after_nccl_world= nccl_world_cost=",
            "init_device_mesh | non-pt= mesh_cost=",
        ],
    ));
    Ok(())
}

/// The object that `setup_default_process_group` stores `local_rank` on (`distributed`, or the
/// skill's `ctx`).
fn context_name(def: &ruff_python_ast::StmtFunctionDef) -> Option<&str> {
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
