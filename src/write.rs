//! All-or-nothing writes: every new file is first written next to its target, then each is
//! renamed into place. A file whose bytes changed since memprints read it is not overwritten
//! (nothing is), and a failure midway puts back the files already replaced.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// One file to replace: its path relative to `root`, the text it was read with, the new text.
pub struct Replacement<'a> {
    pub rel: &'a str,
    pub expected: &'a str,
    pub updated: &'a str,
}

/// Writes every replacement or none.
pub fn write_all(root: &Path, replacements: &[Replacement]) -> Result<()> {
    for r in replacements {
        let path = root.join(r.rel);
        let now = fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        if now != r.expected {
            return Err(Error::ChangedOnDisk {
                file: r.rel.to_string(),
            });
        }
    }
    let mut staged: Vec<(PathBuf, PathBuf)> = Vec::new();
    let cleanup = |staged: &[(PathBuf, PathBuf)]| {
        for (tmp, _) in staged {
            let _ = fs::remove_file(tmp);
        }
    };
    for r in replacements {
        let path = root.join(r.rel);
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let tmp = path.with_file_name(format!(".{name}.memprints-tmp"));
        let written = fs::write(&tmp, r.updated).and_then(|()| {
            let permissions = fs::metadata(&path)?.permissions();
            fs::set_permissions(&tmp, permissions)
        });
        if let Err(e) = written {
            cleanup(&staged);
            let _ = fs::remove_file(&tmp);
            return Err(Error::io(&tmp, e));
        }
        staged.push((tmp, path));
    }
    for (i, (tmp, path)) in staged.iter().enumerate() {
        if let Err(e) = fs::rename(tmp, path) {
            for (r, (_, done)) in replacements.iter().zip(&staged).take(i) {
                let _ = fs::write(done, r.expected);
            }
            cleanup(&staged[i..]);
            return Err(Error::io(path, e));
        }
    }
    Ok(())
}
