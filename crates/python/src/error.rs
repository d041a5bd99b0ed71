//! What can stop work on a Python source: it cannot be read, parsed or formatted, an anchor is
//! not where the skill expects it, or a signature has no room for what memprints adds. Each
//! variant names the file and says, in its first line, what a user can do.

use std::path::PathBuf;

/// Everything that can go wrong while reading, finding in, editing or formatting Python.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading a file failed.
    #[error("{path}: {cause}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said. Not an error `source`: it is printed in the message
        /// already, and a chain printer (`{:#}`) would print it a second time.
        cause: std::io::Error,
    },

    /// A file is not valid Python.
    #[error("{file}: not valid Python: {message}")]
    Parse {
        /// The file, relative to the repository root.
        file: String,
        /// The parser's message, with the line.
        message: String,
    },

    /// A group's anchor is not where the skill expects it.
    #[error("{file}: in `{function}`: cannot find {anchor}\n{context}")]
    AnchorNotFound {
        /// The file.
        file: String,
        /// The function (or `<module>`) searched.
        function: String,
        /// What was looked for.
        anchor: String,
        /// Numbered source lines where it was expected.
        context: String,
    },

    /// A function's signature has no place for the parameter memprints adds.
    #[error(
        "{file}: `{function}` (line {line}) takes {takes}; memprints cannot add `{parameter}` to it"
    )]
    UnsupportedSignature {
        /// The file.
        file: String,
        /// The function.
        function: String,
        /// Its line.
        line: usize,
        /// What it takes that is in the way, e.g. `*args, keyword-only or **kwargs parameters`.
        takes: &'static str,
        /// The parameter memprints adds.
        parameter: String,
    },

    /// Ruff's formatter refused code.
    #[error("{file}: ruff's formatter failed: {message}")]
    Format {
        /// The file.
        file: String,
        /// The formatter's message.
        message: String,
    },

    /// A configuration file (pyproject.toml) cannot be used.
    #[error("{file}: {message}")]
    Config {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },

    /// An internal error: an edit plan that must not happen (overlapping edits, output that
    /// ruff would change). Nothing was written.
    #[error(
        "{file}: {what} (this is a memprints bug; nothing was written, please report it){details}"
    )]
    Bug {
        /// The file being planned.
        file: String,
        /// What went wrong.
        what: String,
        /// More lines (a diff), each after a newline; empty for none.
        details: String,
    },
}

/// The Python layer's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }

    /// An internal error on `file`: `what` went wrong, `details` (e.g. a diff) shows it.
    pub fn bug(file: impl Into<String>, what: impl Into<String>, details: &str) -> Self {
        Error::Bug {
            file: file.into(),
            what: what.into(),
            details: if details.is_empty() {
                String::new()
            } else {
                format!("\n{details}")
            },
        }
    }

    /// True for [`Error::Bug`]: memprints' fault, not the input's.
    pub fn is_bug(&self) -> bool {
        matches!(self, Error::Bug { .. })
    }
}
