//! How new bytes get into one file with no moment where it is empty or half written, and without
//! losing a save the user makes meanwhile.
//!
//! The new bytes go to the temp file first ([`stage`]: created, given the file's mode and owner,
//! fsynced); [`swap_in`] then exchanges the two names atomically (`renameat2(RENAME_EXCHANGE)`)
//! and reads what was swapped out: if those are not the bytes memprints planned from, someone
//! saved in between, so the names are swapped back and the commit stops with `ChangedOnDisk`.
//! Where the kernel or file system cannot exchange, the file is checked once more and the temp
//! renamed over it; the save of a user that lands between that check and the rename is lost.
//!
//! Remaining windows, even with the exchange: a process that still holds the old file open and
//! writes into it after memprints has read the swapped-out bytes (its write goes to the removed
//! file), and a second save landing between the swap and the swap back. Extended attributes and
//! ACLs are not carried over to the new file.
//!
//! A target marked `in_place` ([`super::target::Target`]) is instead rewritten through one open
//! file ([`write_in_place`]): read and compared, overwritten, truncated, fsynced. That keeps hard
//! links and the owner; it is not atomic, which is why the journal holds both the old and the new
//! bytes of such a file and recovery recognises a half-done overwrite ([`torn`]).

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::crash;
use super::fsio;
use super::target::{Identity, temp_path};
use crate::error::{Error, Result};

/// Writes `bytes` to `path`'s temp file with `identity`'s mode and owner, durably.
pub(crate) fn stage(rel: &str, path: &Path, identity: Identity, bytes: &[u8]) -> Result<()> {
    let temp = temp_path(path);
    fsio::remove(&temp)?;
    let file = fsio::create(&temp, bytes)?;
    let meta = file.metadata().map_err(|e| fsio::error(&temp, e))?;
    let current = Identity::of(&meta);
    if (current.uid, current.gid) != (identity.uid, identity.gid) {
        std::os::unix::fs::fchown(&file, Some(identity.uid), Some(identity.gid)).map_err(
            |cause| Error::OwnerNotKept {
                file: rel.to_string(),
                uid: identity.uid,
                gid: identity.gid,
                cause,
            },
        )?;
    }
    // After the chown, which clears set-user-ID and set-group-ID bits.
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(identity.mode))
        .map_err(|e| fsio::error(&temp, e))?;
    fsio::sync(&file, &temp)
}

/// Puts the staged temp file in `path`'s place, provided `path` still holds `expected`.
pub(crate) fn swap_in(rel: &str, path: &Path, expected: &[u8]) -> Result<()> {
    let temp = temp_path(path);
    let changed = || Error::ChangedOnDisk {
        file: rel.to_string(),
    };
    if fsio::exchange(&temp, path)? {
        if fsio::read(&temp)? != expected {
            fsio::exchange(&temp, path)?;
            fsio::remove(&temp)?;
            return Err(changed());
        }
        return fsio::remove(&temp);
    }
    if fsio::read(path)? != expected {
        fsio::remove(&temp)?;
        return Err(changed());
    }
    fsio::rename(&temp, path)
}

/// Overwrites `path` through one open file, provided it still holds `expected`.
pub(crate) fn write_in_place(rel: &str, path: &Path, expected: &[u8], bytes: &[u8]) -> Result<()> {
    let io = |e| fsio::error(path, e);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(io)?;
    let mut current = Vec::new();
    file.read_to_end(&mut current).map_err(io)?;
    if current != expected {
        return Err(Error::ChangedOnDisk {
            file: rel.to_string(),
        });
    }
    crash::point("overwriting a file in place");
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    file.write_all(bytes).map_err(io)?;
    crash::point("truncating a file in place");
    file.set_len(bytes.len() as u64).map_err(io)?;
    fsio::sync(&file, path)
}

/// Whether `current` is what an in-place overwrite of `from` by `to` leaves when it stops
/// midway: the first `k` bytes of `to`, then `from` from byte `k` on (nothing of it once `k`
/// reaches its end), before the final truncation. `from` and `to` themselves count too.
pub(crate) fn torn(current: &[u8], from: &[u8], to: &[u8]) -> bool {
    let prefix = common_prefix(current, to);
    if current.len() == from.len() {
        let suffix = common_prefix(current.iter().rev(), from.iter().rev());
        return current.len() - suffix <= prefix;
    }
    prefix == current.len() && (current.len() >= from.len() || current.len() == to.len())
}

fn common_prefix<T: PartialEq>(
    a: impl IntoIterator<Item = T>,
    b: impl IntoIterator<Item = T>,
) -> usize {
    a.into_iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::{Identity, stage, swap_in, temp_path, torn, write_in_place};
    use crate::error::Error;

    const PLANNED: &str = "planned from\n";
    const OURS: &str = "memprints' version\n";
    const SAVED: &str = "the user's save\n";

    fn staged_file() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.py");
        fs::write(&path, PLANNED).unwrap();
        let identity = Identity::of(&fs::metadata(&path).unwrap());
        stage("f.py", &path, identity, OURS.as_bytes()).unwrap();
        (dir, path)
    }

    #[test]
    fn a_save_written_into_the_file_before_the_swap_is_given_back() {
        let (_dir, path) = staged_file();
        fs::write(&path, SAVED).unwrap();
        let err = swap_in("f.py", &path, PLANNED.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::ChangedOnDisk { .. }), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), SAVED);
        assert!(!temp_path(&path).exists());
    }

    #[test]
    fn a_save_renamed_over_the_file_before_the_swap_is_given_back() {
        let (dir, path) = staged_file();
        let editor_temp = dir.path().join("f.py~");
        fs::write(&editor_temp, SAVED).unwrap();
        fs::rename(&editor_temp, &path).unwrap();
        let err = swap_in("f.py", &path, PLANNED.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::ChangedOnDisk { .. }), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), SAVED);
    }

    #[test]
    fn the_swap_puts_the_staged_bytes_in_place_and_removes_the_temp_file() {
        let (_dir, path) = staged_file();
        swap_in("f.py", &path, PLANNED.as_bytes()).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), OURS);
        assert!(!temp_path(&path).exists());
    }

    #[test]
    fn an_in_place_write_refuses_a_file_that_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.py");
        fs::write(&path, SAVED).unwrap();
        let err = write_in_place("f.py", &path, PLANNED.as_bytes(), OURS.as_bytes()).unwrap_err();
        assert!(matches!(err, Error::ChangedOnDisk { .. }), "{err}");
        assert_eq!(fs::read_to_string(&path).unwrap(), SAVED);
    }

    #[test]
    fn torn_accepts_every_midway_state_of_an_overwrite_in_both_directions() {
        let old = b"short old text\n".as_slice();
        let new = b"a longer new text, with more in it\n".as_slice();
        for (from, to) in [(old, new), (new, old)] {
            for k in 0..=to.len() {
                let mut state = to[..k].to_vec();
                if k < from.len() {
                    state.extend_from_slice(&from[k..]);
                }
                assert!(torn(&state, from, to), "k={k}");
            }
            assert!(torn(to, from, to));
            assert!(torn(from, from, to));
        }
    }

    #[test]
    fn torn_rejects_an_edit_that_no_overwrite_produces() {
        let old = b"def f():\n    return 1\n".as_slice();
        let new = b"def f():\n    print(1)\n    return 1\n".as_slice();
        assert!(!torn(b"def f():\n    return 2\n", old, new));
        assert!(!torn(
            b"def f():\n    print(1)\n    return 1\n# mine\n",
            old,
            new
        ));
        assert!(!torn(b"", old, new));
    }
}
