//! The intent record of a commit: `.memprints/journal.json` in the tree's root.
//!
//! Before the first file is replaced, the record names every file with the SHA-256 of its old
//! and new bytes and holds a copy of the old bytes (and of the new ones for a file overwritten in
//! place, so that recovery can tell a half-done overwrite from a user's edit). It is written to a
//! temp file, fsynced and renamed into place, so it is either whole or absent: its rename is the
//! moment the commit begins, its removal the moment it ends.
//!
//! When recovery finds a file it must not touch, it writes that file's old bytes out to
//! `.memprints/before/<path>` for the user to copy back; they go when the record does.

use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::fsio;
use super::target::{Target, temp_path};
use crate::error::{Error, Result};

/// The folder in the tree's root where memprints keeps its lock and journal.
pub const STATE_DIR: &str = ".memprints";
const RECORD: &str = "journal.json";
const BEFORE: &str = "before";
/// Bumped when the record's shape changes; a record of another format is not guessed at.
const FORMAT: u32 = 1;

/// `journal.json`.
#[derive(Serialize, Deserialize)]
struct Record {
    format: u32,
    /// The command that wrote it (`add`, `remove`), to say what was interrupted.
    command: String,
    files: Vec<Entry>,
}

/// One file of a commit.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// As the user knows it, relative to the tree's root.
    pub rel: String,
    /// The real file (symlinks resolved): relative to the tree's root when inside it, so a moved
    /// checkout still recovers, else absolute.
    pub path: PathBuf,
    pub old_sha256: String,
    pub new_sha256: String,
    /// The bytes from before the commit.
    pub old: String,
    /// For a file overwritten in place, its new bytes.
    pub new: Option<String>,
}

/// An intent record on disk.
pub(crate) struct Journal {
    root: PathBuf,
    pub command: String,
    pub entries: Vec<Entry>,
}

/// The SHA-256 of `bytes`, in lowercase hex (64 digits).
pub(crate) fn sha256(bytes: &[u8]) -> String {
    // sha2 0.11's digest has no `LowerHex`; the digits are written one byte at a time.
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

impl Journal {
    /// `.memprints/journal.json` under `root`.
    pub fn path(root: &Path) -> PathBuf {
        root.join(STATE_DIR).join(RECORD)
    }

    /// Writes the record of a commit that replaces each target's `old` text by its `new`.
    pub fn begin(root: &Path, command: &str, files: &[(&Target, &str, &str)]) -> Result<Journal> {
        let entries: Vec<Entry> = files
            .iter()
            .map(|(target, old, new)| Entry {
                rel: target.rel.clone(),
                path: target
                    .path
                    .strip_prefix(root)
                    .unwrap_or(&target.path)
                    .to_path_buf(),
                old_sha256: sha256(old.as_bytes()),
                new_sha256: sha256(new.as_bytes()),
                old: old.to_string(),
                new: target.in_place.then(|| new.to_string()),
            })
            .collect();
        let record = Record {
            format: FORMAT,
            command: command.to_string(),
            files: entries,
        };
        let text = serde_json::to_vec(&record).expect("a record always serialises");
        let path = Self::path(root);
        let temp = temp_path(&path);
        fsio::remove(&temp)?;
        let written = fsio::create(&temp, &text)
            .and_then(|file| fsio::sync(&file, &temp))
            .and_then(|()| fsio::rename(&temp, &path));
        if let Err(e) = written {
            let _ = fsio::remove(&temp);
            return Err(e);
        }
        fsio::sync_dir(&root.join(STATE_DIR))?;
        Ok(Journal {
            root: root.to_path_buf(),
            command: record.command,
            entries: record.files,
        })
    }

    /// Reads the record under `root`, if there is one.
    pub fn find(root: &Path) -> Result<Option<Journal>> {
        let path = Self::path(root);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        let bad = |reason: String| Error::BadJournal {
            record: path.clone(),
            reason,
        };
        let record: Record = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if record.format != FORMAT {
            return Err(bad(format!(
                "written in format {}, this memprints reads {FORMAT}",
                record.format
            )));
        }
        for entry in &record.files {
            let new_ok = entry
                .new
                .as_ref()
                .is_none_or(|new| sha256(new.as_bytes()) == entry.new_sha256);
            if sha256(entry.old.as_bytes()) != entry.old_sha256 || !new_ok {
                return Err(bad(format!(
                    "the copy of {} does not match its SHA-256",
                    entry.rel
                )));
            }
        }
        Ok(Some(Journal {
            root: root.to_path_buf(),
            command: record.command,
            entries: record.files,
        }))
    }

    /// Where an entry's file is.
    pub fn path_of(&self, entry: &Entry) -> PathBuf {
        self.root.join(&entry.path)
    }

    /// Writes an entry's old bytes to `.memprints/before/<rel>` and returns that path.
    pub fn write_before(&self, entry: &Entry) -> Result<PathBuf> {
        let path = self.root.join(STATE_DIR).join(BEFORE).join(&entry.rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|e| fsio::error(dir, e))?;
        }
        fsio::remove(&path)?;
        drop(fsio::create(&path, entry.old.as_bytes())?);
        Ok(path)
    }

    /// Ends the commit: removes the record, then any `before/` copies.
    pub fn finish(self) -> Result<()> {
        let state = self.root.join(STATE_DIR);
        fsio::remove(&Self::path(&self.root))?;
        fsio::sync_dir(&state)?;
        let before = state.join(BEFORE);
        if before.exists() {
            fs::remove_dir_all(&before).map_err(|e| fsio::error(&before, e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::sha256;

    /// Journals written before keep matching: the FIPS 180-2 vectors, as lowercase hex.
    #[test]
    fn sha256_is_the_standard_digest_in_lowercase_hex() {
        assert_eq!(
            sha256(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
