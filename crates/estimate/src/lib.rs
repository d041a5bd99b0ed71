//! # memprints-estimate
//!
//! PithTrain's analytical memory estimator, driven from outside, and its figures set beside the
//! memory prints.
//!
//! The flow: [`settings`] reads the run's settings from the config line PithTrain logs at start
//! (with overrides) → [`runner`] finds `tools/memory_estimator/` in the user's tree and runs it
//! with the user's Python and a timeout, through a small driver that never imports torch → an
//! [`Estimate`] per pp rank ([`figures`]; [`text`] when the estimator's objects changed and only
//! its text output can be read) → [`corrections`] puts both sides' figures on the same
//! bookkeeping and names each change → [`mod@compare`] pairs it with what the prints measured
//! ([`measured::Measured`]) event by event and component by component, using [`schedule`] to know
//! which estimator state each pipeline print sees, and gives a verdict. [`caveats`] adds what the
//! estimator is known not to model for the run's model config.
//!
//! Units: the estimator's "GB" are GiB (its `format_gb` divides by `1024**3` and its non-PyTorch
//! figure is built from `GiB = 1024**3`). Every size here is in bytes (`i64`): exact integers from
//! the driver, or the text's GiB/MiB/KiB figures × 2³⁰/2²⁰/2¹⁰ rounded to the byte.

pub mod caveats;
pub mod compare;
pub mod corrections;
pub mod figures;
pub mod measured;
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
    /// The tree has no `tools/memory_estimator/__main__.py`.
    #[error(
        "no PithTrain memory estimator in {tree} (tools/memory_estimator/ is missing); pass --repo with a PithTrain checkout that has it"
    )]
    EstimatorNotFound {
        /// The PithTrain checkout that was searched.
        tree: PathBuf,
    },

    /// The interpreter could not be started.
    #[error("cannot run `{python}`: {source}; pass --python with a Python 3 interpreter")]
    PythonNotFound {
        /// The interpreter as given (`python3`, or `--python`).
        python: String,
        /// What spawning it said.
        source: std::io::Error,
    },

    /// An interpreter run outlived [`EstimatorOptions::timeout`] and was killed.
    #[error("the memory estimator did not finish within {seconds} s (it was stopped)")]
    TimedOut {
        /// The timeout, in whole seconds.
        seconds: u64,
    },

    /// The interpreter exited with a failure (or was killed by a signal).
    #[error("the memory estimator failed: {last_line}")]
    EstimatorFailed {
        /// The last non-empty line the estimator wrote to stderr; `killed by a signal` when it
        /// wrote none and died of a signal.
        last_line: String,
    },

    /// Something imported `torch` (the driver's exit code 5).
    #[error("the memory estimator imported {module}; it must run without torch")]
    TorchImported {
        /// The first `torch` module asked for (`torch`, `torch.cuda`…).
        module: String,
    },

    /// The estimator ran but its output (driver JSON or text) is not what memprints reads.
    #[error("cannot read the memory estimator's output: {reason}")]
    Unparseable {
        /// What is missing or wrong: the driver's result line, a `Peak at: event #…` line, a
        /// JSON field…
        reason: String,
    },

    /// Settings the estimator needs are neither in the log's config line nor given as flags.
    #[error(
        "cannot estimate: {missing} not in the log's PithTrain config line{no_line}; pass {flags}"
    )]
    MissingSettings {
        /// The missing settings, comma-separated (`sequence length, model config`).
        missing: String,
        /// When the log has no `launch(cfg=…)` line, a note saying so, else empty.
        no_line: &'static str,
        /// The flags that give them, in the same order (`--seq-len, --config`).
        flags: String,
    },

    /// The model config the run names (or `--config` gives) is not a file.
    #[error("model config {path} not found; pass --config with the run's config.json")]
    ConfigNotFound {
        /// The path looked at, after resolving a relative one.
        path: PathBuf,
    },

    /// The log names the model by Hugging Face id, and no `--config` gives its config.json.
    #[error(
        "the run names its model by Hugging Face id `{id}`; pass --config with its config.json"
    )]
    HubModel {
        /// The id (`Qwen/Qwen3-30B-A3B`).
        id: String,
    },

    /// An I/O failure while running the estimator.
    #[error("{what}: {source}")]
    Io {
        /// What memprints was doing (`waiting for the memory estimator`).
        what: String,
        /// What the operating system said.
        source: std::io::Error,
    },
}
