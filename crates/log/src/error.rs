//! Why a report could not be made.

use std::path::PathBuf;

/// Why a report could not be made. Each prints as one line naming the path.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No input was given.
    #[error("no log given: pass one or more log files or directories")]
    NoInputs,
    /// An input could not be opened, listed or read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A directory holds no file with a log's name.
    #[error("directory {dir} holds no log files")]
    EmptyDirectory {
        /// The directory.
        dir: PathBuf,
    },
}
