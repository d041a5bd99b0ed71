//! The file-system steps a commit is made of, each one a crash point ([`super::crash`]) and each
//! failure named by its path. A full file-size limit (`EFBIG`, once SIGXFSZ is ignored) becomes
//! [`Error::FileTooLarge`] rather than an OS message.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{CWD, RenameFlags};

use super::crash;
use crate::error::{Error, Result};

/// Wraps an I/O error with its path; `EFBIG` (file-size limit reached) gets its own message.
pub(crate) fn error(path: &Path, e: io::Error) -> Error {
    if e.raw_os_error() == Some(libc::EFBIG) {
        Error::FileTooLarge {
            path: path.to_path_buf(),
        }
    } else {
        Error::io(path, e)
    }
}

/// Creates `path` (which must not exist), readable and writable by its owner only, holding `bytes`.
pub(crate) fn create(path: &Path, bytes: &[u8]) -> Result<File> {
    crash::point("writing a new file");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| error(path, e))?;
    file.write_all(bytes).map_err(|e| error(path, e))?;
    Ok(file)
}

/// Flushes a file's bytes to the disk.
pub(crate) fn sync(file: &File, path: &Path) -> Result<()> {
    crash::point("fsync of a file");
    file.sync_all().map_err(|e| error(path, e))
}

/// Flushes a folder's entries (a rename, a new or removed name in it) to the disk.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    crash::point("fsync of a folder");
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| error(dir, e))
}

/// Renames `from` over `to`.
pub(crate) fn rename(from: &Path, to: &Path) -> Result<()> {
    crash::point("a rename");
    fs::rename(from, to).map_err(|e| error(to, e))
}

/// Gives `from` the name `to` unless `to` exists, atomically: `renameat2(RENAME_NOREPLACE)`,
/// else `link(2)` and removing `from`. `Ok(Some(false))` when `to` exists (`from` stays);
/// `Ok(None)` where the file system can do neither (`from` stays).
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> Result<Option<bool>> {
    use rustix::io::Errno;
    crash::point("a rename without replacing");
    match rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Ok(()) => return Ok(Some(true)),
        Err(Errno::EXIST) => return Ok(Some(false)),
        Err(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP) => {}
        Err(e) => return Err(error(to, e.into())),
    }
    match rustix::fs::link(from, to) {
        Ok(()) => {
            remove(from)?;
            Ok(Some(true))
        }
        Err(Errno::EXIST) => Ok(Some(false)),
        Err(Errno::PERM | Errno::OPNOTSUPP | Errno::MLINK) => Ok(None),
        Err(e) => Err(error(to, e.into())),
    }
}

/// Swaps two names atomically (`renameat2(RENAME_EXCHANGE)`); `Ok(false)` where the kernel or
/// the file system cannot.
pub(crate) fn exchange(a: &Path, b: &Path) -> Result<bool> {
    crash::point("a rename exchange");
    match rustix::fs::renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS | rustix::io::Errno::OPNOTSUPP) => {
            Ok(false)
        }
        Err(e) => Err(error(b, e.into())),
    }
}

/// Removes a file; one that is already gone is fine.
pub(crate) fn remove(path: &Path) -> Result<()> {
    if fs::symlink_metadata(path).is_err() {
        return Ok(());
    }
    crash::point("removing a file");
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(error(path, e)),
        _ => Ok(()),
    }
}

/// Reads a whole file.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).map_err(|e| error(path, e))
}
