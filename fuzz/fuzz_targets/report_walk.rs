//! The folder walk of `memprints report DIR` (`memprints_log::walk::expand_inputs`) and the
//! report of what it finds, over directories the input describes.
//!
//! The input is a list of entries, each `kind name-length name… content-length content…`:
//! kind 0 a file, 1 a sub-directory, 2 a symbolic link to an earlier entry, 3 a dangling
//! link, 4 an empty file; names are cut to what a file system takes (no `/`, no NUL, not `.`
//! or `..`). What must hold: the walk never panics; it lists each file once, in name order,
//! only regular, visible files with a log's name directly in the folder, and names every other
//! visible file as skipped; the report of the folder (all cores, `many`) never panics and reads
//! or skips every file listed.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use libfuzzer_sys::fuzz_target;
use memprints_log::walk::expand_inputs;
use memprints_log::{ReportError, ReportOptions, run_report};

/// A fresh directory per input, removed after it.
fn scratch() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("report_walk.{}.{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn name(bytes: &[u8]) -> Option<String> {
    let name: String = String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| *c != '/' && *c != '\0')
        .take(60)
        .collect();
    (!name.is_empty() && name != "." && name != "..").then_some(name)
}

/// Builds the directory the input describes; returns the names made.
fn build(dir: &Path, mut data: &[u8]) -> Vec<PathBuf> {
    let mut made = Vec::new();
    while let [kind, len, rest @ ..] = data {
        let (raw, rest) = rest.split_at((*len as usize).min(rest.len()));
        let (content, rest) = match rest {
            [n, more @ ..] => more.split_at((*n as usize * 64).min(more.len())),
            [] => (&[][..], rest),
        };
        data = rest;
        let Some(name) = name(raw) else { continue };
        let path = dir.join(&name);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        let ok = match kind % 5 {
            0 => std::fs::write(&path, content).is_ok(),
            1 => std::fs::create_dir(&path).is_ok(),
            2 => match made.last() {
                Some(target) => std::os::unix::fs::symlink(target, &path).is_ok(),
                None => false,
            },
            3 => std::os::unix::fs::symlink(dir.join("no such file"), &path).is_ok(),
            _ => std::fs::write(&path, b"").is_ok(),
        };
        if ok {
            made.push(path);
        }
        if made.len() >= 64 {
            break;
        }
    }
    made
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    build(&dir, data);
    match expand_inputs(std::slice::from_ref(&dir)) {
        Ok((files, skipped)) => {
            assert!(!files.is_empty());
            assert!(
                files.windows(2).all(|w| w[0] < w[1]),
                "in name order, once each"
            );
            for file in &files {
                assert_eq!(file.parent(), Some(dir.as_path()));
                assert!(file.is_file(), "{file:?}");
                let name = file.file_name().unwrap().to_string_lossy();
                assert!(!name.starts_with('.'), "{file:?}");
            }
            for s in &skipped {
                assert!(!files.iter().any(|f| f.display().to_string() == s.path));
            }
            let report = run_report(std::slice::from_ref(&dir), &ReportOptions::default());
            match report {
                Ok(report) => assert_eq!(
                    report.inputs.len() + report.skipped.len(),
                    files.len() + skipped.len(),
                    "every file read or skipped"
                ),
                // A file the walk listed may not be readable (a link to a directory entry
                // that is not a file is not listed; one to a file read without permission is).
                Err(ReportError::Read { .. }) => {}
                Err(e) => panic!("{e}"),
            }
        }
        Err(ReportError::EmptyDirectory { .. }) => {}
        Err(e) => panic!("{e}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
});
