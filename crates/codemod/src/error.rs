//! The codemod's error type. Every kind names the situation and, for user errors, the way
//! forward, in a first line a user can act on; anchor errors (from the Python layer) add the
//! nearby source lines below it. A bug ([`Error::is_bug`]) is kept apart: it is memprints' fault,
//! never the user's.

use std::path::PathBuf;

/// Everything that can stop the codemod.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said. Not an error `source`: it is printed in the message
        /// already, and a chain printer (`{:#}`) would print it a second time.
        cause: std::io::Error,
    },

    /// A file is not UTF-8 text.
    #[error(
        "{file}: not UTF-8 text (invalid bytes after byte {offset}); memprints reads Python sources as UTF-8"
    )]
    NotUtf8 {
        /// The file, relative to the repository root.
        file: String,
        /// How many bytes are valid UTF-8.
        offset: usize,
    },

    /// No PithTrain checkout was found.
    #[error(
        "no PithTrain checkout at or above {start} (looked for a pyproject.toml naming the project `pithtrain`); pass --repo DIR"
    )]
    RepoNotFound {
        /// Where the search started.
        start: PathBuf,
    },

    /// The folder is not a PithTrain checkout: a file every checkout has is missing.
    #[error("{missing}: missing: this does not look like a PithTrain checkout; pass --repo DIR")]
    NotACheckout {
        /// The missing file, relative to the root.
        missing: String,
    },

    /// `check` without files in a tree that has none of the files `add` edits.
    #[error(
        "none of the files `add` edits is in {root} ({files}): nothing was checked; pass --repo with a PithTrain checkout, or the files to check"
    )]
    NoTargetFiles {
        /// The tree's root.
        root: PathBuf,
        /// The files looked for.
        files: String,
    },

    /// The checkout predates the PithTrain API the skill is written for.
    #[error(
        "{file}: {what}.\nmemprints instruments PithTrain from the \"Engine and model-layer refactor\" (commit f53f32d, 2026-07-14) on; update the checkout. Nothing was changed."
    )]
    OldPithTrain {
        /// The file that shows it.
        file: String,
        /// What is old about it.
        what: String,
    },

    /// The model name is not a file in `pithtrain/models/`.
    #[error("unknown model `{model}`: no {file}; models in this tree: {available}")]
    UnknownModel {
        /// The name given.
        model: String,
        /// The file it would be.
        file: String,
        /// The models there are.
        available: String,
    },

    /// The model name names a file of `pithtrain/models/` that is not a model.
    #[error(
        "`{model}` is not a model: {file} is the protocol every model implements; models in this tree: {available}"
    )]
    NotAModel {
        /// The name given.
        model: String,
        /// The file it names.
        file: String,
        /// The models there are.
        available: String,
    },

    /// A command-line value is not valid.
    #[error("invalid {what} `{input}`: {reason}")]
    InvalidArgument {
        /// The option.
        what: &'static str,
        /// The value given.
        input: String,
        /// Why it is refused.
        reason: String,
    },

    /// A file that gets code using `torch` does not import it.
    #[error(
        "{file}: the module does not `import torch`, which the inserted code needs; add the import and run memprints again"
    )]
    TorchNotImported {
        /// The file.
        file: String,
    },

    /// An anchor function is compiled; a print inside it would break the graph.
    #[error(
        "{file}: `{function}` (line {line}) is under @torch.compile; a print inside it would break the graph, so memprints will not instrument it"
    )]
    CompiledAnchor {
        /// The file.
        file: String,
        /// The compiled function.
        function: String,
        /// Its line.
        line: usize,
    },

    /// The model's MoE-vs-dense rule cannot be read or evaluated.
    #[error("{file}: {reason}; pass --detail-layers LIST to choose the layers yourself")]
    UnreadableMoeRule {
        /// The model file.
        file: String,
        /// What is in the way.
        reason: String,
    },

    /// `update` or `remove` on a tree without instrumentation.
    #[error("{root}: nothing to update: the tree is not instrumented; run `memprints add`")]
    NotInstrumented {
        /// The checkout.
        root: String,
    },

    /// The instrumentation is incomplete, so what `add` used cannot be read back.
    #[error(
        "{root}: the instrumentation is incomplete: cannot tell {what}; restore the files with git, or re-run `memprints add`"
    )]
    IncompleteInstrumentation {
        /// The checkout.
        root: String,
        /// What cannot be told.
        what: &'static str,
    },

    /// The user edited inside inserted code, so memprints will not rewrite the file.
    #[error(
        "{file}: cannot update: {lines}; take those edits out and try again, or run `memprints remove --force` (it takes them out with the prints) and then `memprints add`"
    )]
    UserEdited {
        /// The file.
        file: String,
        /// Which lines, e.g. `lines 12-14 differ from what memprints inserted`.
        lines: String,
    },

    /// The tree is instrumented for another model than the one asked for.
    #[error(
        "{file}: the tree is instrumented for `{instrumented}`, not `{requested}`; run `memprints remove` first"
    )]
    InstrumentedForOtherModel {
        /// The instrumented model's file.
        file: String,
        /// The instrumented model.
        instrumented: String,
        /// The model asked for.
        requested: String,
    },

    /// `remove` could not be shown to give back the original bytes, so nothing was written.
    #[error(
        "{file}: memprints could not verify that `remove` restores it byte for byte, so nothing was written:\n{diff}"
    )]
    NotReversible {
        /// The file.
        file: String,
        /// What `remove` would give, against the original.
        diff: String,
    },

    /// A configuration file (pyproject.toml, config.json) cannot be used.
    #[error("{file}: {message}")]
    Config {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },

    /// Reading, parsing, editing or formatting a Python source failed.
    #[error(transparent)]
    Python(#[from] memprints_python::Error),

    /// The multi-file commit (journal, lock, recovery) failed.
    #[error(transparent)]
    Commit(#[from] memprints_commit::Error),
}

/// The codemod's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }

    /// An internal error on `file`: `what` went wrong, `details` (e.g. a diff) shows it. The
    /// Python layer owns the one kind of bug (its message and [`memprints_python::Error::is_bug`]).
    pub fn bug(file: impl Into<String>, what: impl Into<String>, details: &str) -> Self {
        Error::Python(memprints_python::Error::bug(file, what, details))
    }

    /// True for a bug, here or in the Python layer: memprints' fault, not the input's.
    pub fn is_bug(&self) -> bool {
        match self {
            Error::Python(e) => e.is_bug(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_prints_its_cause_once_even_through_a_chain_printer() {
        let err = Error::io(
            "/tmp/x.py",
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        // What a chain printer such as anyhow's `{:#}` shows: the message, then every source.
        let mut chained = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            chained.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        assert_eq!(chained.matches("permission denied").count(), 1, "{chained}");
        assert!(chained.starts_with("/tmp/x.py: "), "{chained}");
    }

    #[test]
    fn user_errors_say_what_to_do() {
        let err = Error::InstrumentedForOtherModel {
            file: "pithtrain/models/a.py".into(),
            instrumented: "a".into(),
            requested: "b".into(),
        };
        assert!(err.to_string().contains("run `memprints remove` first"));
        assert!(!err.is_bug());
    }
}
