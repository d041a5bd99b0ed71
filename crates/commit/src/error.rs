//! What can stop a commit: plain I/O, a file changed under memprints' feet, the lock, the
//! journal, recovery, file identity. Each variant names the file or lock involved and says, in
//! one line, what the user can do.

use std::path::PathBuf;

/// A failure of the commit machinery: I/O, the lock, the journal, recovery, file identity.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{path}: {cause}", path = path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said. Not an error `source`: it is printed in the message
        /// already, and a chain printer (`{:#}`) would print it a second time.
        cause: std::io::Error,
    },

    /// A file changed between reading and writing.
    #[error("{file}: changed on disk while memprints was working; nothing was written")]
    ChangedOnDisk {
        /// The file.
        file: String,
    },

    /// Another memprints run holds the tree's lock.
    #[error(
        "another memprints ({holder}) is changing this tree; wait for it to finish and run again (lock: {})",
        lock.display()
    )]
    Locked {
        /// The lock file, `.memprints/lock` under the root.
        lock: PathBuf,
        /// Who holds it: the command, pid, host when another, and for how long.
        holder: String,
    },

    /// Two of the replacements name one real file (through a symlink or a hard link).
    #[error("{file}: is the same file as {other}; nothing was written")]
    SameFile {
        /// The later replacement's path, relative to the root.
        file: String,
        /// The earlier replacement naming the same file.
        other: String,
    },

    /// A file to replace is read-only and [`Options::allow_read_only`](super::Options) is off.
    #[error(
        "{file} is read-only ({why}); memprints does not replace read-only files: make it writable and run again"
    )]
    ReadOnly {
        /// The file, relative to the root.
        file: String,
        /// Why it counts as read-only: its mode (`mode 0444`), or an owner that makes it not
        /// writable by this user.
        why: String,
    },

    /// A write failed with `EFBIG`: the process's file-size limit is below the file's size.
    #[error(
        "{}: the file-size limit (ulimit -f) is too small for it; raise the limit and run again",
        path.display()
    )]
    FileTooLarge {
        /// The file being written (a target, its temp file, or the journal).
        path: PathBuf,
    },

    /// The staged file could not be given the replaced file's owner and group. `cause` is
    /// printed in the message, so it is not an error `source`: a chain printer would print it
    /// twice.
    #[error("{file}: cannot keep its owner {uid}:{gid} when replacing it: {cause}")]
    OwnerNotKept {
        /// The file, relative to the root.
        file: String,
        /// The owner's user id.
        uid: u32,
        /// The owner's group id.
        gid: u32,
        /// What `fchown` said.
        cause: std::io::Error,
    },

    /// Recovery found a file that was edited after the interrupted commit; it left that file
    /// alone and put back the others.
    #[error(
        "after an interrupted memprints commit, {files} changed again (neither the bytes from before the commit nor those after it), so memprints left it as it is and put back the other files; to go back to the tree before the commit copy the file named over it (your edits to it are lost), to keep your version delete the folder {}; then run memprints again",
        state.display()
    )]
    Conflict {
        /// Each edited file, with where its bytes from before the commit were written
        /// (`.memprints/before/…`), comma-separated.
        files: String,
        /// The state folder, `.memprints` under the root, which still holds the journal.
        state: PathBuf,
    },

    /// The journal of an interrupted commit cannot be read or is not one this memprints writes.
    #[error(
        "{}: the record of an interrupted memprints commit cannot be used ({reason}), so memprints changed nothing; it holds the files' text from before that commit (`old`): put back what you need, then delete it",
        record.display()
    )]
    BadJournal {
        /// The journal, `.memprints/journal.json` under the root.
        record: PathBuf,
        /// What is wrong with it: bad JSON, another format, or a copy that does not match its
        /// SHA-256.
        reason: String,
    },

    /// [`write_all`](super::write_all) found a journal: [`recover`](super::recover) was not run
    /// first.
    #[error(
        "an interrupted memprints commit is pending ({}); recover it (write::recover) before writing",
        journal.display()
    )]
    Pending {
        /// The journal, `.memprints/journal.json` under the root.
        journal: PathBuf,
    },

    /// A commit failed and rolling it back failed too; the journal stays for the next run.
    #[error(
        "{error}; putting the files back failed too ({rollback}); the next `memprints add` or `memprints remove` finishes that"
    )]
    RollbackFailed {
        /// Why the commit failed.
        error: Box<Error>,
        /// Why the rollback failed.
        rollback: Box<Error>,
    },
}

/// The commit's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }
}
