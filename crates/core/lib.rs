//! # memprints
//!
//! The `memprints` command line: one module per command under [`cli`] (its `…Args` and its
//! `run`), the exit codes, and the one writer of output. It is the only crate that knows clap and
//! anyhow; the work is done by the libraries below it:
//!
//! - `memprints-codemod`: the skill's prints in a PithTrain checkout (`add`, `remove`, `status`,
//!   `check`, `plan`, `demo`), on `memprints-python` (Python sources, Ruff's crates) and
//!   `memprints-commit` (several files replaced as one all-or-nothing commit);
//! - `memprints-log`: logs read into runs, ranks and passes (`report`);
//! - `memprints-snapshot`: CUDA memory-snapshot pickles (`snapshot`, `report --snapshots`);
//! - `memprints-estimate`: PithTrain's memory estimator beside the prints (`report --estimate`);
//! - `memprints-present`: what the reports say, in text, markdown, HTML and JSON.

pub mod cli;
