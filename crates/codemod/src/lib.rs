//! # memprints-codemod
//!
//! PithTrain's `add-memory-prints` skill as a codemod: the seven groups of prints in six files,
//! added at their exact anchors, read back by `status` and taken out to the byte by `remove`.
//!
//! The flow: [`pithtrain`] finds the checkout and its six [`pithtrain::Target`] files →
//! [`instrument`] runs every group of [`instrument::GROUPS`] over them in memory, each group
//! filling its [`template`] (the `.py` files under `templates/`) and saying where it goes through
//! `memprints_python::edit` → [`commands`] checks the plan (parses, ruff-stable, `strip` gives the
//! original back) and hands it to `memprints_commit::write_all`, which writes all files
//! atomically. `remove` ([`instrument::strip`]) and `status` ([`instrument::status`]) read the
//! instrumentation back out of a tree by the [`instrument::vocabulary`] of the same templates.
//! [`params`] holds the requests' values (ranks, layers, the parallel layout), [`ruff`] the
//! external `ruff check --fix` step, [`sample`] the embedded sample tree of `memprints demo`.
//! Its errors are [`Error`]; the Python layer's and the commit's pass through it.

pub mod check;
pub mod commands;
pub mod demo;
pub mod diff;
pub mod error;
pub mod instrument;
pub mod params;
pub mod pithtrain;
pub mod printing;
pub mod ruff;
pub mod sample;
pub mod summary;
pub mod template;

pub use commands::*;
pub use error::{Error, Result};
