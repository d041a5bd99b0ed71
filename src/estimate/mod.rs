//! PithTrain's analytical memory estimator, driven from outside, and its figures set beside the
//! memory prints.
//!
//! The flow: [`settings`] reads the run's settings from the config line PithTrain logs at start
//! (with overrides) → [`runner`] finds `tools/memory_estimator/` in the user's tree and runs it
//! with the user's Python and a timeout, through a small driver that never imports torch → an
//! [`Estimate`] per pp rank ([`figures`]; [`text`] when the estimator's objects changed and only
//! its text output can be read) → [`mod@compare`] pairs it with what the prints measured
//! ([`compare::Measured`]) event by event and component by component, using [`schedule`] to know
//! which estimator state each pipeline print sees, and gives a verdict. [`caveats`] adds what the
//! estimator is known not to model for the run's model config.
//!
//! Units: the estimator's "GB" are GiB (its `format_gb` divides by `1024**3` and its non-PyTorch
//! figure is built from `GiB = 1024**3`). Every size here is in bytes (`i64`): exact integers from
//! the driver, or the text's GiB/MiB/KiB figures × 2³⁰/2²⁰/2¹⁰ rounded to the byte.

pub mod caveats;
pub mod compare;
pub mod figures;
pub mod runner;
pub mod schedule;
pub mod settings;
pub mod text;

use std::path::PathBuf;

pub use compare::{Measured, RankComparison, Tolerance, compare};
pub use figures::Estimate;
pub use runner::{EstimatorOptions, estimate};
pub use settings::{LoggedConfig, Overrides, RunSettings};

/// Why no estimate could be made; each prints as one line a user can act on.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error(
        "no PithTrain memory estimator in {tree} (tools/memory_estimator/ is missing); pass --repo with a PithTrain checkout that has it"
    )]
    EstimatorNotFound { tree: PathBuf },

    #[error("cannot run `{python}`: {source}; pass --python with a Python 3 interpreter")]
    PythonNotFound {
        python: String,
        source: std::io::Error,
    },

    #[error("the memory estimator did not finish within {seconds} s (it was stopped)")]
    TimedOut { seconds: u64 },

    /// `last_line`: the last line the estimator wrote to stderr.
    #[error("the memory estimator failed: {last_line}")]
    EstimatorFailed { last_line: String },

    #[error("the memory estimator imported {module}; it must run without torch")]
    TorchImported { module: String },

    #[error("cannot read the memory estimator's output: {reason}")]
    Unparseable { reason: String },

    #[error(
        "cannot estimate: {missing} not in the log's PithTrain config line{no_line}; pass {flags}"
    )]
    MissingSettings {
        missing: String,
        no_line: &'static str,
        flags: String,
    },

    #[error("model config {path} not found; pass --config with the run's config.json")]
    ConfigNotFound { path: PathBuf },

    #[error(
        "the run names its model by Hugging Face id `{id}`; pass --config with its config.json"
    )]
    HubModel { id: String },

    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}
