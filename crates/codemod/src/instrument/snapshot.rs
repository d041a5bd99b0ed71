//! Group 7, `pithtrain/tasks/pretrain_lm.py`: the first training step this process runs gets the
//! pipeline's per-step prints and a full allocator timeline, dumped as a snapshot pickle after
//! `model.step(...)` (or on `torch.OutOfMemoryError`, which is re-raised).
//!
//! Two things the skill gets wrong are right here: the profiled step is the first one this
//! process trains (step 0, or the first step after a resume, which never runs step 0), and a
//! memory history that the configurable profiler (`memory_profile_start`) started on that step
//! is neither restarted nor stopped. The one refactor: `model.step(...)` moves, verbatim, into a
//! `try:` whose handler only dumps and re-raises.
//!
//! ```text
//! before                                   after
//! def train_step(cfg):                     _mem_first_step: dict[str, int] = {}
//!     model.train()                        def train_step(cfg):
//!     loss = model.step(...)                   model.train()
//!                                              _mem_profile = ...; _mem_snapshot = ...
//!                                              try:
//!                                                  loss = model.step(...)
//!                                              except torch.OutOfMemoryError:
//!                                                  ... dump the snapshot; raise
//!                                              if _mem_snapshot: ... dump the snapshot
//! ```
//!
//! Observation only: the allocator history records what happens anyway, and the pickle goes to
//! `--snapshot-dir`; the step itself runs exactly as before, its error re-raised.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::SNAPSHOT;
use memprints_python::edit::{FileEdits, actions};
use memprints_python::{anchor, find};

/// Group 7.
pub const GROUP: Group = Group {
    id: "7",
    target: Target::PretrainLm,
    summary: "first-step snapshot around model.step in train_step",
    template: SNAPSHOT,
    markers: &[
        Marker::once("first_step_state"),
        Marker::once("before_step"),
        Marker::once("wrap_step"),
        Marker::once("after_step"),
    ],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let def = anchor::function(src, "train_step")?;
    let near = def.start().to_usize();
    let text = src.slice(def);
    let step = ["ctx.training.step", "training.step"]
        .into_iter()
        .find(|expr| text.contains(expr))
        .ok_or_else(|| {
            anchor::missing(src, "train_step", "the step counter `training.step`", near)
        })?;
    let profiler_start = ["cfg.training.memory_profile_start"]
        .into_iter()
        .find(|expr| text.contains(expr))
        .unwrap_or("None");

    let on_model = |method: &'static str| {
        move |stmt: &Stmt| {
            find::is_simple(stmt)
                && find::calls_in_stmt(stmt).iter().any(|call| {
                    matches!(&*call.func, Expr::Attribute(a) if a.attr.as_str() == method && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "model"))
                })
        }
    };
    let train = find::find_deep(&def.body, &on_model("train"))
        .ok_or_else(|| anchor::missing(src, "train_step", "the call `model.train()`", near))?;
    let model_step = find::find_deep(&def.body, &on_model("step"))
        .ok_or_else(|| anchor::missing(src, "train_step", "the call `model.step(...)`", near))?;

    let ranks = params.ranks_literal();
    let values = [
        ("RANKS", ranks.as_str()),
        ("STEP", step),
        ("PROFILER_START", profiler_start),
        ("SNAPSHOT_DIR", params.snapshot_dir.as_str()),
    ];
    edits.insert_above_comments(def, &SNAPSHOT.fill("first_step_state", &values), 2)?;
    edits.insert_after(train, &SNAPSHOT.fill("before_step", &values))?;
    actions::wrap_in_try(edits, model_step, |statement| {
        let mut with_statement = values.to_vec();
        with_statement.push(("STATEMENT", statement));
        SNAPSHOT.fill("wrap_step", &with_statement)
    })?;
    edits.insert_after(model_step, &SNAPSHOT.fill("after_step", &values))?;
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import torch

from pithtrain.contexts import training


def train_step(cfg) -> None:
    start = cfg.training.memory_profile_start
    model = training.model
    model.train()
    loss, _ = model.step(
        cfg.tokens,
        num_chunks=cfg.num_chunks,
    )
    training.step += 1
"#;

    #[test]
    fn group_7_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_7");
    }

    #[test]
    fn group_7_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
