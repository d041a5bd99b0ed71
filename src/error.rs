//! The library's error type: every failure names what went wrong and where, in a first line a user
//! can act on; anchor errors add the nearby source lines below it.

use std::path::PathBuf;

/// Everything that can stop a memprints command.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{file}: not valid Python: {message}")]
    Parse { file: String, message: String },

    #[error("{file}: in `{function}`: cannot find {anchor}\n{context}")]
    AnchorNotFound {
        file: String,
        function: String,
        anchor: String,
        context: String,
    },

    #[error(
        "no PithTrain checkout at or above {start} (looked for a pyproject.toml naming the project `pithtrain`); pass --repo DIR"
    )]
    RepoNotFound { start: PathBuf },

    #[error("unknown model `{model}`: no {file}; models in this tree: {available}")]
    UnknownModel {
        model: String,
        file: String,
        available: String,
    },

    #[error("invalid {what} `{input}`: {reason}")]
    InvalidArgument {
        what: &'static str,
        input: String,
        reason: String,
    },

    #[error("{file}: {reason}")]
    Unsupported { file: String, reason: String },

    #[error(
        "{file}: after instrumentation the file would not be stable under ruff format (this is a memprints bug; nothing was written):\n{diff}"
    )]
    Unstable { file: String, diff: String },

    #[error(
        "{file}: memprints could not verify that `remove` restores it byte for byte, so nothing was written:\n{diff}"
    )]
    NotReversible { file: String, diff: String },

    #[error("{file}: changed on disk while memprints was working; nothing was written")]
    ChangedOnDisk { file: String },

    #[error("{file}: ruff's formatter failed: {message}")]
    Format { file: String, message: String },

    #[error("{file}: {message}")]
    Config { file: String, message: String },

    #[error(transparent)]
    Commit(#[from] crate::write::CommitError),
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
