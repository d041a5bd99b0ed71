//! A file to replace as it is on disk: where its bytes really live (symlinks are followed, so the
//! link stays a link), its mode and owner, and whether it must be written in place (a hard link,
//! or an owner memprints could not give a new file). Also the one name temp files have.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::fsio;
use crate::error::{Error, Result};

/// The suffix of every temp file memprints writes: `.<name>.memprints-tmp` next to `<name>`.
pub const TEMP_SUFFIX: &str = ".memprints-tmp";

/// Mode bits and owner a replacement must carry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Identity {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Identity {
    pub fn of(meta: &fs::Metadata) -> Self {
        Identity {
            mode: meta.mode() & 0o7777,
            uid: meta.uid(),
            gid: meta.gid(),
        }
    }
}

/// One file a commit will replace.
#[derive(Debug)]
pub(crate) struct Target {
    /// As the caller named it, relative to the tree's root.
    pub rel: String,
    /// The real file, symlinks resolved.
    pub path: PathBuf,
    pub identity: Identity,
    /// True for a hard-linked file (`nlink > 1`; a rename would split the links) and for one whose
    /// owner this process cannot give a new file: those are rewritten through their open file.
    pub in_place: bool,
}

impl Target {
    /// Looks up `rel` under `root`; a read-only file is refused unless `allow_read_only`.
    pub fn resolve(root: &Path, rel: &str, allow_read_only: bool) -> Result<Target> {
        let named = root.join(rel);
        let path = fs::canonicalize(&named).map_err(|e| fsio::error(&named, e))?;
        let meta = fs::metadata(&path).map_err(|e| fsio::error(&path, e))?;
        let identity = Identity::of(&meta);
        if !allow_read_only {
            let why = if identity.mode & 0o200 == 0 {
                Some(format!("mode {:04o}", identity.mode))
            } else if rustix::fs::access(&path, rustix::fs::Access::WRITE_OK).is_err() {
                Some(format!(
                    "owner {}:{}, not writable by you",
                    identity.uid, identity.gid
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(Error::ReadOnly {
                    file: rel.to_string(),
                    why,
                });
            }
        }
        Ok(Target {
            rel: rel.to_string(),
            in_place: meta.nlink() > 1 || !can_give_owner(identity),
            path,
            identity,
        })
    }
}

/// Whether a file this process creates can be given `identity`'s owner and group: always for
/// root, else only its own user and one of its groups (`chown` is privileged).
fn can_give_owner(identity: Identity) -> bool {
    let uid = rustix::process::geteuid().as_raw();
    if uid == 0 {
        return true;
    }
    let gid = rustix::process::getegid().as_raw();
    identity.uid == uid
        && (identity.gid == gid
            || rustix::process::getgroups()
                .is_ok_and(|groups| groups.iter().any(|g| g.as_raw() == identity.gid)))
}

/// `.<name>.memprints-tmp` next to `path`.
pub(crate) fn temp_path(path: &Path) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}{TEMP_SUFFIX}"))
}

/// Whether a file name is one of memprints' temp files.
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.len() > 1 + TEMP_SUFFIX.len() && name.starts_with('.') && name.ends_with(TEMP_SUFFIX)
}
