//! Group 1C, `pithtrain/modules/training.py`: `_setup_mem(label)`, the helper group 3's probes
//! call, right before `def setup_model` (above its leading comments).
//!
//! ```text
//! before                                   after
//! def setup_model(cfg, mesh):              def _setup_mem(label: str) -> None:
//!     ...                                      """Print CUDA memory at a setup checkpoint."""
//!                                              if torch.distributed.get_rank() in {0}: ...
//!
//!                                          def setup_model(cfg, mesh):
//!                                              ...
//! ```
//!
//! Observation only: on the printing ranks it synchronizes, reads memory counters and prints.

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::SETUP_HELPERS;
use memprints_python::anchor;
use memprints_python::edit::FileEdits;

/// Group 1C.
pub const GROUP: Group = Group {
    id: "1C",
    target: Target::Training,
    summary: "_setup_mem before def setup_model",
    template: SETUP_HELPERS,
    markers: &[Marker::once("module_helpers")],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let def = anchor::function(edits.src(), "setup_model")?;
    let block = SETUP_HELPERS.fill("module_helpers", &[("RANKS", &params.ranks_literal())]);
    edits.insert_above_comments(def, &block, 2)?;
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;

    const BEFORE: &str = r#"import torch


# Builds the model chunks of this rank.
def setup_model(cfg, mesh):
    return cfg
"#;

    #[test]
    fn group_1c_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_1c");
    }

    #[test]
    fn group_1c_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }
}
