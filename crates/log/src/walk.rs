//! Which files `report` reads: the walk of the inputs it is given.
//!
//! Contract: [`expand_inputs`]: a file is taken as given; a directory contributes its regular,
//! non-hidden files with a log's name (`.log`, `.txt`, `.out`, `.err`, also `.gz`/`.zst`) in
//! name order, and lists every other file in it as skipped, saying why (memory snapshots by
//! name, anything else as not a log). Sub-directories are not entered. Nothing is opened but
//! the directories: whether a file holds text is the scanner's question
//! ([`crate::scan::inputs::open_text`]).

use std::path::{Path, PathBuf};

use crate::error::ReportError;
use crate::schema::SkippedInput;

/// The files to read, and the files of a directory that are not read.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<SkippedInput>), ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for input in inputs {
        let read_err = |source| ReportError::Read {
            path: input.clone(),
            source,
        };
        let meta = std::fs::metadata(input).map_err(read_err)?;
        if !meta.is_dir() {
            files.push(input.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(input)
            .map_err(read_err)?
            .filter_map(Result::ok)
            .filter(is_file)
            .map(|e| e.path())
            .filter(|p| !is_hidden(p))
            .collect();
        found.sort();
        let (logs, others): (Vec<PathBuf>, Vec<PathBuf>) =
            found.into_iter().partition(|p| is_log_name(p));
        if logs.is_empty() {
            return Err(ReportError::EmptyDirectory { dir: input.clone() });
        }
        files.extend(logs);
        skipped.extend(others.iter().map(|p| SkippedInput {
            path: p.display().to_string(),
            reason: if is_snapshot_name(p) {
                "a memory snapshot, not a log (read through the log's `Memory snapshot saved \
                 to` line, or pass it with --snapshots)"
                    .to_owned()
            } else {
                "not a log by its name".to_owned()
            },
        }));
    }
    Ok((files, skipped))
}

/// Whether a directory's entry is a regular file, or a link to one: the type the directory
/// gives is enough for any other entry (no look-up per file, a few milliseconds for a folder
/// of a thousand logs).
fn is_file(entry: &std::fs::DirEntry) -> bool {
    match entry.file_type() {
        Ok(t) if t.is_symlink() => entry.path().is_file(),
        Ok(t) => t.is_file(),
        Err(_) => entry.path().is_file(),
    }
}

/// Why a binary file named on the command line is not read.
pub fn binary_reason(path: &Path) -> String {
    if is_snapshot_name(path) {
        "a memory snapshot, not a log: pass it with --snapshots".to_owned()
    } else {
        "binary data, not a log".to_owned()
    }
}

/// A binary file left out of the report, with [`binary_reason`].
pub fn skipped_binary(path: &Path) -> crate::schema::SkippedInput {
    crate::schema::SkippedInput {
        path: path.display().to_string(),
        reason: binary_reason(path),
    }
}

/// A name without its compression suffix.
fn bare_name(path: &Path) -> &str {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name.strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(name)
}

/// Files a folder contributes: logs (`.log`, `.txt`, `.out`, `.err`), also gzip'd or zstd'd.
fn is_log_name(path: &Path) -> bool {
    let bare = bare_name(path);
    [".log", ".txt", ".out", ".err"]
        .iter()
        .any(|ext| bare.ends_with(ext))
}

fn is_snapshot_name(path: &Path) -> bool {
    let bare = bare_name(path);
    bare.ends_with(".pickle") || bare.ends_with(".pkl")
}

fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_expands_to_its_visible_logs_and_names_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sub")).unwrap();
        for name in ["b.log", "a.log", ".hidden", "snap.pickle.gz", "notes.md"] {
            std::fs::write(dir.path().join(name), "[rank=0] x\n").unwrap();
        }
        // Links count as what they lead to: a file, or a directory (left out), or nothing.
        std::os::unix::fs::symlink(dir.path().join("a.log"), dir.path().join("c.log")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("d.log")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("gone"), dir.path().join("e.log")).unwrap();
        let (files, skipped) = expand_inputs(&[dir.path().to_path_buf()]).unwrap();
        let names = ["a.log", "b.log", "c.log"];
        assert_eq!(files, names.map(|n| dir.path().join(n)));
        let skipped: Vec<(String, bool)> = skipped
            .iter()
            .map(|s| (s.path.clone(), s.reason.starts_with("a memory snapshot")))
            .collect();
        assert_eq!(
            skipped,
            [
                (dir.path().join("notes.md").display().to_string(), false),
                (
                    dir.path().join("snap.pickle.gz").display().to_string(),
                    true
                ),
            ]
        );
    }
}
