//! memprints: adds the PithTrain memory-prints skill to a checkout exactly, in milliseconds and
//! reversibly, and reads what the prints say.
//!
//! The flow: [`pithtrain`] finds the target and its layout → [`instrument`] plans every group's
//! edits in memory ([`edit`] applies them, [`template`] renders the Python) → the plan is checked
//! (parses, ruff-stable, reversible) → [`write`] writes all files atomically. [`remove`] and
//! [`status`] read instrumentation back out of a tree.

pub mod compressed;
pub mod diff;
pub mod edit;
pub mod error;
pub mod estimate;
pub mod instrument;
pub mod ops;
pub mod params;
pub mod pithtrain;
pub mod present;
pub mod python;
pub mod remove;
pub mod report;
pub mod ruff;
pub mod sample;
pub mod snapshot;
pub mod status;
pub mod template;
pub mod write;

pub use error::{Error, Result};
