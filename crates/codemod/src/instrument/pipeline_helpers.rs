//! Group 1A, `pithtrain/dualpipe/dualpipev.py`: the helpers group 4's prints call, and the flag
//! that switches them on.
//!
//! What it adds: `_mem_gb()` (allocated GiB) and `_mem_detail()` (allocated, cached-pool and
//! non-PyTorch GiB) right before `class DualPipeV` (above its leading comments), and
//! `self.memory_profiling = True` after `self.comm_stream = ...` in `DualPipeV.__init__`.
//!
//! ```text
//! before                                   after
//! class DualPipeV(nn.Module):              def _mem_gb() -> float: ...
//!     def __init__(self, ...):             def _mem_detail() -> str: ...
//!         self.comm_stream = Stream()      class DualPipeV(nn.Module):
//!                                              def __init__(self, ...):
//!                                                  self.comm_stream = Stream()
//!                                                  self.memory_profiling = True  # Set to ...
//! ```
//!
//! Observation only: the helpers read `torch.cuda` memory counters and return numbers; the
//! flag is a new attribute nothing else reads.

use ruff_text_size::Ranged;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::PIPELINE_HELPERS;
use memprints_python::edit::FileEdits;
use memprints_python::{anchor, find};

/// Group 1A.
pub const GROUP: Group = Group {
    id: "1A",
    target: Target::DualPipeV,
    summary: "_mem_gb/_mem_detail before class DualPipeV; memory_profiling flag in __init__",
    template: PIPELINE_HELPERS,
    markers: &[Marker::once("module_helpers"), Marker::once("init_flag")],
    insert,
};

fn insert(edits: &mut FileEdits, _: &Params) -> Result<Words> {
    let src = edits.src();
    let class = find::class(&src.module.body, "DualPipeV")
        .ok_or_else(|| anchor::missing(src, "<module>", "`class DualPipeV`", 0))?;
    edits.insert_above_comments(class, PIPELINE_HELPERS.block("module_helpers"), 2)?;

    let init = find::method(class, "__init__").ok_or_else(|| {
        anchor::missing(src, "DualPipeV", "`def __init__`", class.start().to_usize())
    })?;
    let comm_stream = anchor::assignment(src, init, "self.comm_stream")?;
    edits.insert_after(comm_stream, PIPELINE_HELPERS.block("init_flag"))?;
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import torch


class DualPipeV:
    def __init__(self, modules):
        self.modules = modules
        self.comm_stream = torch.cuda.Stream()
"#;

    #[test]
    fn group_1a_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_1a");
    }

    #[test]
    fn group_1a_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
