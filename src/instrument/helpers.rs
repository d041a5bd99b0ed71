//! Group 1: the helper functions every other group calls.
//!
//! - 1A, `dualpipev.py`: `_mem_gb()` and `_mem_detail()` right before `class DualPipeV`, and
//!   `self.memory_profiling = True` after `self.comm_stream = ...` in `DualPipeV.__init__`.
//! - 1B, `execution.py`: `_layer_mem_profile`, `_layer_mem_ranks = RANKS`, the
//!   `_SavedTensorsProfiler` context manager and `_lmem()` after the imports (above `# fmt: off`,
//!   so Ruff formats them like any other code).
//! - 1C, `training.py`: `_setup_mem()` right before `def setup_model`.
//!
//! Observation only: the helpers read `torch.cuda` memory counters and print. The saved-tensor
//! hook's pack function returns its tensor unchanged.

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;

use super::{Placed, anchor};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::python::find;
use crate::template::{HELPERS_LAYER, HELPERS_PIPELINE, HELPERS_SETUP};

/// 1A in `dualpipev.py`.
pub fn pipeline(edits: &mut FileEdits, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
    let class = find::class(&src.module.body, "DualPipeV")
        .ok_or_else(|| anchor::missing(src, "<module>", "`class DualPipeV`", 0))?;
    let at = anchor::leading_comments_start(src, class.start().to_usize());
    edits.insert_lines(at, "", HELPERS_PIPELINE.block("module_helpers"), 0, 2)?;

    let init = find::method(class, "__init__").ok_or_else(|| {
        anchor::missing(src, "DualPipeV", "`def __init__`", class.start().to_usize())
    })?;
    let comm_stream = anchor::assignment(src, init, "self.comm_stream")?;
    edits.insert_after(comm_stream, HELPERS_PIPELINE.block("init_flag"))?;
    placed.push(Placed::new(
        "1A",
        "_mem_gb/_mem_detail before class DualPipeV; memory_profiling flag in __init__",
    ));
    Ok(())
}

/// 1B in `execution.py`.
pub fn layer(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
    let last_import = src
        .module
        .body
        .iter()
        .take_while(|stmt| !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)))
        .filter(|stmt| matches!(stmt, Stmt::Import(_) | Stmt::ImportFrom(_)))
        .last()
        .ok_or_else(|| anchor::missing(src, "<module>", "the module's imports", 0))?;
    let after = src.full_lines(last_import).1;
    let existing_blank = src.text[after..]
        .split_inclusive('\n')
        .take_while(|l| l.trim().is_empty())
        .count();
    let block = HELPERS_LAYER.render("module_helpers", &[("RANKS", &params.ranks_literal())]);
    edits.insert_lines(after, "", &block, 1, 2usize.saturating_sub(existing_blank))?;
    placed.push(Placed::new(
        "1B",
        "_SavedTensorsProfiler and _lmem after the imports",
    ));
    Ok(())
}

/// 1C in `training.py`.
pub fn setup(edits: &mut FileEdits, params: &Params, placed: &mut Vec<Placed>) -> Result<()> {
    let src = edits.src;
    let def = anchor::function(src, "setup_model")?;
    let at = anchor::leading_comments_start(src, def.start().to_usize());
    let block = HELPERS_SETUP.render("module_helpers", &[("RANKS", &params.ranks_literal())]);
    edits.insert_lines(at, "", &block, 0, 2)?;
    placed.push(Placed::new("1C", "_setup_mem before def setup_model"));
    Ok(())
}
