//! memprints: adds the PithTrain memory-prints skill to a checkout exactly, in milliseconds and
//! reversibly, and reads what the prints say.
//!
//! The codemod's flow: [`pithtrain`] finds the checkout and its six [`pithtrain::Target`] files →
//! [`instrument`] runs every group of [`instrument::GROUPS`] over them in memory, each group
//! filling its [`template`] and saying where it goes through [`edit`] → [`codemod`] checks the
//! plan (parses, ruff-stable, `strip` gives the original back) → [`write`](mod@write) writes all files
//! atomically. `remove` ([`instrument::strip`]) and `status` ([`instrument::status`]) read the
//! instrumentation back out of a tree by the [`instrument::vocabulary`] of the same templates.

#![warn(missing_docs)]

pub mod cli;
pub mod codemod;
pub mod compressed;
pub mod diff;
pub mod edit;
pub mod error;
pub mod estimate;
pub mod instrument;
pub mod params;
pub mod pithtrain;
pub mod present;
pub mod python;
pub mod report;
pub mod ruff;
pub mod sample;
pub mod snapshot;
pub mod template;
pub mod text;
pub mod write;

pub use error::{Error, Result};
