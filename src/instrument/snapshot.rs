//! Group 7, `pithtrain/tasks/pretrain_lm.py`: the first training step this process runs gets the
//! pipeline's per-step prints and a full allocator timeline, dumped as a snapshot pickle after
//! `model.step(...)` (or on `torch.OutOfMemoryError`, which is re-raised).
//!
//! Two things the skill gets wrong are right here: the profiled step is the first one this
//! process trains (step 0, or the first step after a resume, which never runs step 0), and a
//! memory history that the configurable profiler (`memory_profile_start`) started on that step
//! is neither restarted nor stopped. The one refactor: `model.step(...)` moves, verbatim, into a
//! `try:` whose handler only dumps and re-raises.

use ruff_python_ast::{Expr, Stmt};
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::python::find;
use crate::template::SNAPSHOT;

/// Plans group 7.
pub fn plan(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
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

    let statement = src.statement_text(model_step, None);
    let values = [
        ("RANKS", params.ranks_literal()),
        ("STEP", step.to_string()),
        ("PROFILER_START", profiler_start.to_string()),
        ("SNAPSHOT_DIR", params.snapshot_dir.clone()),
        ("STATEMENT", statement),
    ];
    let refs: Vec<(&str, &str)> = values.iter().map(|(k, v)| (*k, v.as_str())).collect();

    let at = anchor::leading_comments_start(src, def.start().to_usize());
    edits.insert_lines(at, "", &SNAPSHOT.render("first_step_state", &refs), 0, 2)?;
    edits.insert_after(train, &SNAPSHOT.render("before_step", &refs))?;
    let wrapped = format!(
        "{}\n{}",
        SNAPSHOT.render("wrap_step", &refs),
        SNAPSHOT.render("after_step", &refs)
    );
    edits.replace_lines(model_step, &wrapped)?;

    placed.push(Placed::with_labels(
        "7",
        "first-step snapshot around model.step in train_step",
        &["Memory snapshot saved to <dir>/memory_snapshot_rank<R>_step<S>.pickle"],
    ));
    Ok(())
}
