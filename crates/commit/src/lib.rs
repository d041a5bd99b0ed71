//! # memprints-commit
//!
//! All-or-nothing commits of several files, that a crash cannot split. It knows files, not
//! PithTrain: the caller names the files and the folders they live in. Its errors are [`Error`].
//!
//! A command that writes takes the tree's [`Lock`] first, then calls [`recover`] (which rolls
//! back whatever an interrupted run left), plans, and hands its [`Replacement`]s to
//! [`write_all`], which:
//!
//! 1. checks every file still holds the bytes the plan was made from, and is not read-only;
//! 2. writes the journal ([`journal`]: every file with the SHA-256 of its old and new bytes and a
//!    copy of the old ones), fsynced;
//! 3. stages every new file as `.<name>.memprints-tmp` next to its target, with its mode and
//!    owner, fsynced;
//! 4. swaps each one in atomically and checks what it swapped out ([`replace`]; hard-linked files
//!    are overwritten in place instead), then fsyncs the folders;
//! 5. removes the journal.
//!
//! A failure in steps 3–4 rolls back the files already replaced the way [`recover`] does (temp
//! file and swap, never a rewrite in place that could leave a file empty); a kill at any point
//! leaves a journal that the next command's [`recover`] rolls back. Either way the tree ends as it
//! was before the commit or as the commit meant it, never a mix.

mod crash;
mod error;
mod fsio;
mod journal;
mod lock;
mod recover;
mod replace;
mod sigxfsz;
mod target;

use std::path::{Path, PathBuf};

pub use crash::CRASH_AT;
pub use error::{Error, Result};
pub use journal::STATE_DIR;
pub use lock::{Busy, Lock, holder};
pub use recover::{Pending, Recovered, pending, recover};
pub use sigxfsz::ignore_sigxfsz;
pub use target::TEMP_SUFFIX;

use journal::Journal;
use recover::Outcome;
use target::Target;

/// One file to replace: its path relative to the root, the text it was read with, the new text.
pub struct Replacement<'a> {
    /// The file's path relative to the tree's root.
    pub rel: &'a str,
    /// The text the plan was made from; the file must still hold exactly these bytes.
    pub expected: &'a str,
    /// The text to write.
    pub updated: &'a str,
}

/// How [`write_all`] treats files that need care.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Replace read-only files too (by default they are refused with
    /// [`Error::ReadOnly`]); their mode stays read-only.
    pub allow_read_only: bool,
}

/// Writes every replacement or none, under `lock`.
pub fn write_all(lock: &Lock, replacements: &[Replacement], options: &Options) -> Result<()> {
    if replacements.is_empty() {
        return Ok(());
    }
    let root = lock.root();
    if Journal::find(root)?.is_some() {
        return Err(Error::Pending {
            journal: Journal::path(root),
        });
    }
    let mut targets: Vec<Target> = Vec::new();
    for r in replacements {
        let target = Target::resolve(root, r.rel, options.allow_read_only)?;
        if let Some(same) = targets.iter().find(|t| t.path == target.path) {
            return Err(Error::SameFile {
                file: r.rel.to_string(),
                other: same.rel.to_string(),
            });
        }
        if fsio::read(&target.path)? != r.expected.as_bytes() {
            return Err(Error::ChangedOnDisk {
                file: r.rel.to_string(),
            });
        }
        targets.push(target);
    }
    let files: Vec<(&Target, &str, &str)> = targets
        .iter()
        .zip(replacements)
        .map(|(t, r)| (t, r.expected, r.updated))
        .collect();
    let journal = Journal::begin(root, lock.command(), &files)?;
    let mut replaced = 0;
    match apply(&files, &mut replaced) {
        Ok(()) => journal.finish(),
        Err(error) => match roll_back(journal, replaced) {
            Ok(()) => Err(error),
            Err(rollback) => Err(Error::RollbackFailed {
                error: Box::new(error),
                rollback: Box::new(rollback),
            }),
        },
    }
}

/// Steps 3 and 4; `replaced` counts the files that hold their new bytes.
fn apply(files: &[(&Target, &str, &str)], replaced: &mut usize) -> Result<()> {
    for (target, _, new) in files.iter().filter(|(t, _, _)| !t.in_place) {
        replace::stage(&target.rel, &target.path, target.identity, new.as_bytes())?;
    }
    for (target, old, new) in files {
        let (old, new) = (old.as_bytes(), new.as_bytes());
        if target.in_place {
            replace::write_in_place(&target.rel, &target.path, old, new)?;
        } else {
            replace::swap_in(&target.rel, &target.path, old)?;
        }
        *replaced += 1;
    }
    let mut folders: Vec<PathBuf> = files
        .iter()
        .filter_map(|(t, _, _)| t.path.parent().map(Path::to_path_buf))
        .collect();
    folders.sort();
    folders.dedup();
    for folder in folders {
        fsio::sync_dir(&folder)?;
    }
    Ok(())
}

/// Puts back the first `replaced` files (and the one that failed midway, if it was being
/// overwritten in place) and removes every temp file, then the journal. A file past `replaced`
/// that holds other bytes is the user's save that stopped the commit: it stays.
fn roll_back(journal: Journal, replaced: usize) -> Result<()> {
    let mut changed = None;
    for (i, entry) in journal.entries.iter().enumerate() {
        if recover::restore(&journal, entry)? == Outcome::Changed && i < replaced {
            changed.get_or_insert_with(|| entry.rel.clone());
        }
    }
    match changed {
        Some(file) => Err(Error::ChangedOnDisk { file }),
        None => journal.finish(),
    }
}
