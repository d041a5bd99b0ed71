//! Group 1B, `pithtrain/dualpipe/execution.py`: the per-layer helpers group 5A's probes call.
//!
//! What it adds, after the module's last import (above `# fmt: off`, so Ruff formats it like any
//! other code): the `_layer_mem_profile` flag (group 4 switches it on for one chunk per step), the
//! printing ranks `_layer_mem_ranks = RANKS`, the `_SavedTensorsProfiler` context manager and
//! `_lmem(label)`.
//!
//! ```text
//! before                                   after
//! import torch                             import torch
//!                                          # -- Per-layer activation profiling --
//! # fmt: off                               _layer_mem_profile = False
//!                                          _layer_mem_ranks = {0}
//!                                          class _SavedTensorsProfiler: ...
//!                                          def _lmem(label: str) -> None: ...
//!                                          # fmt: off
//! ```
//!
//! Observation only: `_lmem` reads a memory counter and prints; the profiler's
//! `saved_tensors_hooks` pack function returns every tensor unchanged, so autograd saves the
//! same tensors with it as without.

use ruff_python_ast::Stmt;

use super::group::{Group, Marker, Words};
use crate::edit::FileEdits;
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::python::anchor;
use crate::template::LAYER_HELPERS;

/// Group 1B.
pub const GROUP: Group = Group {
    id: "1B",
    target: Target::Execution,
    summary: "_SavedTensorsProfiler and _lmem after the imports",
    labels: &[],
    template: LAYER_HELPERS,
    markers: &[Marker::once("module_helpers")],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let last_import = src
        .module
        .body
        .iter()
        .take_while(|stmt| !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)))
        .filter(|stmt| matches!(stmt, Stmt::Import(_) | Stmt::ImportFrom(_)))
        .last()
        .ok_or_else(|| anchor::missing(src, "<module>", "the module's imports", 0))?;
    let block = LAYER_HELPERS.fill("module_helpers", &[("RANKS", &params.ranks_literal())]);
    edits.insert_after_spaced(last_import, &block, 1, 2)?;
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#""""Per-stage execution."""

import torch

# fmt: off

def layer_forward(block, hidden_states):
    return block(hidden_states)
"#;

    #[test]
    fn group_1b_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_1b");
    }

    #[test]
    fn group_1b_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
