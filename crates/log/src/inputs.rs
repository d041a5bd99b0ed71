//! Which files `report` reads, and the check that keeps binary files out of the line scanner.
//!
//! Contract:
//! - [`expand_inputs`]: a file is taken as given; a directory contributes its regular,
//!   non-hidden files with a log's name (`.log`, `.txt`, `.out`, `.err`, also `.gz`/`.zst`) in
//!   name order, and lists every other file in it as skipped, saying why (memory snapshots by
//!   name, anything else as not a log).
//! - [`open_text`]: opens a file through [`super::lines::open`] (so compressed logs are read
//!   decompressed) and returns `None` when the first [`SNIFF_BYTES`] bytes of what it reads hold
//!   a NUL byte: no log has one, every pickle and archive does. The bytes read to decide are
//!   handed back in front of the rest.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::ReportError;
use super::schema::SkippedInput;

/// How much of a file's decompressed start is checked for a NUL byte.
pub const SNIFF_BYTES: usize = 8192;

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
            .map(|e| e.path())
            .filter(|p| p.is_file() && !is_hidden(p))
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

/// `path` opened for the line scanner, or `None` when it holds binary data.
pub fn open_text(path: &Path) -> io::Result<Option<Box<dyn Read>>> {
    Ok(open_text_head(path)?.map(|(reader, _)| reader))
}

/// PithTrain's line at the start of every launch, logged once by rank 0:
/// `<date> <time> | INFO | launch(cfg=PretrainLMCfg(…))`.
pub const LAUNCH_NEEDLE: &[u8] = b"| launch(cfg=";

/// How far into a file (decompressed) its launch line is looked for: the torchrun banner,
/// NCCL's lines and the setup prints come before it.
pub const LAUNCH_HEAD_BYTES: usize = 64 * 1024;

/// [`open_text`], and whether the file's first [`LAUNCH_HEAD_BYTES`] hold a launch line
/// ([`LAUNCH_NEEDLE`]): a file that launches training, not one that goes on with another's.
pub fn open_text_head(path: &Path) -> io::Result<Option<(Box<dyn Read>, bool)>> {
    let mut reader = super::lines::open(path)?;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut reader)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    if memchr::memchr(0, &head).is_some() {
        return Ok(None);
    }
    if head.len() == SNIFF_BYTES {
        (&mut reader)
            .take((LAUNCH_HEAD_BYTES - SNIFF_BYTES) as u64)
            .read_to_end(&mut head)?;
    }
    let launches = memchr::memmem::find(&head, LAUNCH_NEEDLE).is_some();
    Ok(Some((
        Box::new(io::Cursor::new(head).chain(reader)),
        launches,
    )))
}

/// `path` opened for [`super::chunked`], when it is a regular file of at least
/// [`super::chunked::MIN_SIZE`] bytes that is neither compressed nor binary (no NUL byte in its
/// first [`SNIFF_BYTES`]); `None` for anything else, to be read through [`open_text`].
pub fn big_plain_file(path: &Path) -> io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() < super::chunked::MIN_SIZE {
        return Ok(None);
    }
    let mut head = [0u8; SNIFF_BYTES];
    file.read_exact_at(&mut head, 0)?;
    let compressed = head.starts_with(&[0x1f, 0x8b]) || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    if compressed || memchr::memchr(0, &head).is_some() {
        return Ok(None);
    }
    Ok(Some(file))
}

/// Why a binary file named on the command line is not read.
pub fn binary_reason(path: &Path) -> String {
    if is_snapshot_name(path) {
        "a memory snapshot, not a log: pass it with --snapshots".to_owned()
    } else {
        "binary data, not a log".to_owned()
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
        let (files, skipped) = expand_inputs(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(files, [dir.path().join("a.log"), dir.path().join("b.log")]);
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

    #[test]
    fn binary_data_is_not_opened_as_text_even_compressed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("a.log");
        std::fs::write(&text, "[rank=0] x\n".repeat(2000)).unwrap();
        let mut all = String::new();
        open_text(&text)
            .unwrap()
            .expect("text")
            .read_to_string(&mut all)
            .unwrap();
        assert_eq!(all.len(), 11 * 2000, "the sniffed bytes are handed back");
        let pickle = dir.path().join("s.pickle.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"\x80\x04\x95\x00\x00\x00\x00").unwrap();
        std::fs::write(&pickle, gz.finish().unwrap()).unwrap();
        assert!(open_text(&pickle).unwrap().is_none());
    }
}
