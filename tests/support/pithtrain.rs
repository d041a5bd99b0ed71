//! The real PithTrain checkout some tests run against, when `MEMPRINTS_PITHTRAIN` names one.

use std::path::PathBuf;

/// A PithTrain checkout to run the real estimator on (read-only), from `MEMPRINTS_PITHTRAIN`;
/// `None`, with a note, when it is not set.
pub fn checkout() -> Option<PathBuf> {
    match std::env::var_os("MEMPRINTS_PITHTRAIN") {
        Some(tree) => Some(PathBuf::from(tree)),
        None => {
            eprintln!(
                "skipped: set MEMPRINTS_PITHTRAIN=/path/to/pith-train to run the real estimator"
            );
            None
        }
    }
}
