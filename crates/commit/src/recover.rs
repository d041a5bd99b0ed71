//! Finishing what an interrupted commit left: every command that writes calls [`recover`] first,
//! holding the lock. An interrupted commit is rolled back from its journal — each file that holds
//! its new bytes (or, overwritten in place, a half-done mix of old and new) gets its old bytes
//! back through a temp file and an atomic swap — and then leftover temp files are removed from the
//! folders memprints writes in. Rolling back is the one direction: an interrupted `add` leaves a
//! clean tree, an interrupted `remove` an instrumented one (and that `remove` can run again).
//!
//! A file whose bytes are neither its old nor its new ones was edited after the crash: it is never
//! overwritten. Recovery puts back the other files, keeps the journal, writes the file's old
//! bytes to `.memprints/before/`, and stops with [`Error::Conflict`] naming both.
//!
//! A kill during recovery is fine: recovery changes nothing the journal does not already describe,
//! and the journal goes only once every file is back, so the next command simply recovers again.
//! [`pending`] is the read-only check `status` makes.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::fsio;
use super::journal::{Entry, Journal, STATE_DIR, sha256};
use super::lock::Lock;
use super::replace::{stage, swap_in, torn, write_in_place};
use super::target::{Identity, is_temp_name, temp_path};
use crate::error::{Error, Result};

/// What [`recover`] did, said in one line by its `Display`.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The interrupted command that was rolled back, when there was one.
    pub rolled_back: Option<String>,
    /// Files given back their bytes from before that command, relative to the root.
    pub restored: Vec<String>,
    /// Leftover temp files removed, relative to the root where inside it.
    pub leftovers: Vec<PathBuf>,
}

impl fmt::Display for Recovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(command) = &self.rolled_back {
            if self.restored.is_empty() {
                write!(
                    f,
                    "every file was already as before an interrupted `memprints {command}`; dropped its journal"
                )?;
            } else {
                write!(
                    f,
                    "rolled back an interrupted `memprints {command}`: {} as before it ({})",
                    match self.restored.len() {
                        1 => "1 file is".to_string(),
                        n => format!("{n} files are"),
                    },
                    self.restored.join(", ")
                )?;
            }
            if !self.leftovers.is_empty() {
                f.write_str("; ")?;
            }
        }
        if !self.leftovers.is_empty() {
            write!(
                f,
                "removed what an interrupted memprints run left: {}",
                join_paths(&self.leftovers)
            )?;
        }
        Ok(())
    }
}

/// Rolls back an interrupted commit and removes leftover temp files (the journal's, and those in
/// `folders`, relative to the root); `None` when there was
/// nothing to do.
pub fn recover(lock: &Lock, folders: &[&str]) -> Result<Option<Recovered>> {
    let root = lock.root();
    let mut recovered = Recovered::default();
    if let Some(journal) = Journal::find(root)? {
        let mut changed = Vec::new();
        for entry in &journal.entries {
            match restore(&journal, entry)? {
                Outcome::AsBefore => {}
                Outcome::Restored => recovered.restored.push(entry.rel.clone()),
                Outcome::Changed => changed.push(entry),
            }
        }
        if !changed.is_empty() {
            let mut files = Vec::new();
            for entry in changed {
                let before = journal.write_before(entry)?;
                files.push(format!(
                    "{} (its bytes from before: {})",
                    entry.rel,
                    before.display()
                ));
            }
            return Err(Error::Conflict {
                files: files.join(", "),
                state: root.join(STATE_DIR),
            });
        }
        recovered.rolled_back = Some(journal.command.clone());
        journal.finish()?;
    }
    for temp in leftover_temps(root, folders) {
        fsio::remove(&temp)?;
        recovered.leftovers.push(relative(root, &temp));
    }
    let nothing = recovered.rolled_back.is_none() && recovered.leftovers.is_empty();
    Ok((!nothing).then_some(recovered))
}

/// What an interrupted run left in a tree, found without changing anything.
#[derive(Debug)]
pub struct Pending {
    journal: Option<JournalState>,
    temps: Vec<PathBuf>,
}

/// What the journal says, when there is one.
#[derive(Debug)]
enum JournalState {
    /// The record of a commit to roll back, and its command.
    Interrupted(String),
    /// A record that cannot be used, and why.
    Unreadable(String),
}

impl fmt::Display for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        match &self.journal {
            Some(JournalState::Interrupted(command)) => parts.push(format!(
                "an interrupted `memprints {command}` left its journal in {}",
                Journal::path(Path::new("")).display()
            )),
            Some(JournalState::Unreadable(why)) => parts.push(why.clone()),
            None => {}
        }
        if !self.temps.is_empty() {
            parts.push(format!("leftover temp files ({})", join_paths(&self.temps)));
        }
        write!(
            f,
            "{}; the next `memprints add` or `memprints remove` puts the tree back first",
            parts.join(" and ")
        )
    }
}

/// What an interrupted run left under `root`, if anything.
pub fn pending(root: &Path, folders: &[&str]) -> Option<Pending> {
    let journal = match Journal::find(root) {
        Ok(None) => None,
        Ok(Some(journal)) => Some(JournalState::Interrupted(journal.command)),
        Err(e) => Some(JournalState::Unreadable(e.to_string())),
    };
    let temps: Vec<PathBuf> = leftover_temps(root, folders)
        .iter()
        .map(|t| relative(root, t))
        .collect();
    (journal.is_some() || !temps.is_empty()).then_some(Pending { journal, temps })
}

/// What [`restore`] found a file in.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// It holds its old bytes.
    AsBefore,
    /// It held the commit's bytes (or a half-done overwrite) and has its old bytes back.
    Restored,
    /// It holds other bytes (or is gone): someone else changed it; it was left as it is.
    Changed,
}

/// Gives one file of a journal its old bytes back, unless someone else has changed it.
pub(crate) fn restore(journal: &Journal, entry: &Entry) -> Result<Outcome> {
    let path = journal.path_of(entry);
    fsio::remove(&temp_path(&path))?;
    let current = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Changed),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let sha = sha256(&current);
    if sha == entry.old_sha256 {
        return Ok(Outcome::AsBefore);
    }
    let old = entry.old.as_bytes();
    let ours = sha == entry.new_sha256
        || entry.new.as_ref().is_some_and(|new| {
            torn(&current, old, new.as_bytes()) || torn(&current, new.as_bytes(), old)
        });
    if !ours {
        return Ok(Outcome::Changed);
    }
    if entry.new.is_some() {
        write_in_place(&entry.rel, &path, &current, old)?;
    } else {
        let meta = fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        stage(&entry.rel, &path, Identity::of(&meta), old)?;
        swap_in(&entry.rel, &path, &current)?;
    }
    fsio::sync_dir(path.parent().unwrap_or(Path::new("/")))?;
    Ok(Outcome::Restored)
}

/// Temp files of memprints: the journal's, and those in `folders` (relative to `root`: the
/// folders of the files the caller edits, which only the caller knows).
fn leftover_temps(root: &Path, folders: &[&str]) -> Vec<PathBuf> {
    let mut temps: Vec<PathBuf> = Some(temp_path(&Journal::path(root)))
        .filter(|t| t.exists())
        .into_iter()
        .collect();
    for folder in folders {
        let Ok(entries) = fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_str().is_some_and(is_temp_name) {
                temps.push(entry.path());
            }
        }
    }
    temps.sort();
    temps
}

fn relative(root: &Path, path: &Path) -> PathBuf {
    path.strip_prefix(root).unwrap_or(path).to_path_buf()
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
