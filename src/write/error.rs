//! What can stop a commit besides plain I/O and a file changed under memprints' feet: each
//! variant names the file or lock involved and says, in one line, what the user can do.

use std::path::PathBuf;

/// A failure of the commit machinery: the lock, the journal, recovery, file identity.
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(
        "another memprints ({holder}) is changing this tree; wait for it to finish and run again (lock: {})",
        lock.display()
    )]
    Locked { lock: PathBuf, holder: String },

    /// Two of the replacements name one real file (through a symlink or a hard link).
    #[error("{file}: is the same file as {other}; nothing was written")]
    SameFile { file: String, other: String },

    #[error(
        "{file} is read-only ({why}); memprints does not replace read-only files: make it writable and run again"
    )]
    ReadOnly { file: String, why: String },

    #[error(
        "{}: the file-size limit (ulimit -f) is too small for it; raise the limit and run again",
        path.display()
    )]
    FileTooLarge { path: PathBuf },

    /// `cause` is printed in the message, so it is not an error `source`: a chain printer would
    /// print it twice.
    #[error("{file}: cannot keep its owner {uid}:{gid} when replacing it: {cause}")]
    OwnerNotKept {
        file: String,
        uid: u32,
        gid: u32,
        cause: std::io::Error,
    },

    #[error(
        "after an interrupted memprints commit, {files} changed again (neither the bytes from before the commit nor those after it), so memprints left it as it is and put back the other files; to go back to the tree before the commit copy the file named over it (your edits to it are lost), to keep your version delete the folder {}; then run memprints again",
        state.display()
    )]
    Conflict { files: String, state: PathBuf },

    #[error(
        "{}: the record of an interrupted memprints commit cannot be used ({reason}), so memprints changed nothing; it holds the files' text from before that commit (`old`): put back what you need, then delete it",
        record.display()
    )]
    BadJournal { record: PathBuf, reason: String },

    #[error(
        "an interrupted memprints commit is pending ({}); recover it (write::recover) before writing",
        journal.display()
    )]
    Pending { journal: PathBuf },

    #[error(
        "{error}; putting the files back failed too ({rollback}); the next `memprints add` or `memprints remove` finishes that"
    )]
    RollbackFailed {
        error: Box<crate::Error>,
        rollback: Box<crate::Error>,
    },
}
