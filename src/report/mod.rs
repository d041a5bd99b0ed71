//! `memprints report`: read the logs of an instrumented PithTrain run and say where the memory
//! went.
//!
//! The flow, one module each: logs → [`lines`] (decompress, scan, cut prints at `[rank=`) →
//! [`parse`] (one print → one [`parse::Event`]) and [`step_and_oom`] (PithTrain's step line, the
//! CUDA OOM line) → [`builder`] (the per-rank fold into the types of [`schema`]) → [`summary`]
//! (peaks, the breakdown at the peak, the cross-rank imbalance) → [`render`] (text, markdown,
//! JSON, HTML). [`run_report`] is the library entry point; [`cli`] holds the clap arguments of
//! the subcommand.

pub mod builder;
// A doc comment on a clap item is `--help` text: documenting the rest of `cli` changes the
// help, which is for the CLI layer to decide.
#[allow(missing_docs)]
pub mod cli;
pub mod lines;
pub mod parse;
pub mod render;
pub mod schema;
pub mod step_and_oom;
pub mod summary;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use builder::ReportBuilder;
pub use schema::Report;

/// What to report on.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Keep only these ranks (all when empty). Stats still count every rank.
    pub ranks: Vec<u32>,
}

/// Why a report could not be made. Each prints as one line naming the path.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// No input was given.
    #[error("no log given: pass one or more log files or directories")]
    NoInputs,
    /// An input could not be opened, listed or read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A directory holds no file with a log's name.
    #[error("directory {dir} holds no log files")]
    EmptyDirectory {
        /// The directory.
        dir: PathBuf,
    },
}

/// Reads every input (a file, or each regular non-hidden file directly inside a directory, in
/// name order), all ranks of all files into one report.
pub fn run_report(inputs: &[PathBuf], opts: &ReportOptions) -> Result<Report, ReportError> {
    let files = expand_inputs(inputs)?;
    let only =
        (!opts.ranks.is_empty()).then(|| opts.ranks.iter().copied().collect::<BTreeSet<_>>());
    let mut builder = ReportBuilder::new(only);
    for file in &files {
        let read_err = |source| ReportError::Read {
            path: file.clone(),
            source,
        };
        let reader = lines::open(file).map_err(read_err)?;
        let n =
            lines::scan(reader, |line, found| builder.line_with(line, found)).map_err(read_err)?;
        builder.count_lines(n);
    }
    let names = files.iter().map(|f| f.display().to_string()).collect();
    Ok(builder.finish(names))
}

fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let mut files = Vec::new();
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
            .filter(|p| p.is_file() && !is_hidden(p) && is_log_name(p))
            .collect();
        if found.is_empty() {
            return Err(ReportError::EmptyDirectory { dir: input.clone() });
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

/// Files a folder contributes: logs (`.log`, `.txt`, `.out`, `.err`), also gzip'd or zstd'd.
/// Archives and other files sitting next to the logs are left out; a file named on the command
/// line is always read.
fn is_log_name(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let bare = name
        .strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(name);
    [".log", ".txt", ".out", ".err"]
        .iter()
        .any(|ext| bare.ends_with(ext))
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
    fn a_directory_expands_to_its_visible_files_in_name_order() {
        let dir = std::env::temp_dir().join(format!("memprints-report-dir-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for name in ["b.log", "a.log", ".hidden"] {
            std::fs::write(dir.join(name), "[rank=0] x\n").unwrap();
        }
        let files = expand_inputs(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(files, [dir.join("a.log"), dir.join("b.log")]);
        let report = run_report(std::slice::from_ref(&dir), &ReportOptions::default()).unwrap();
        assert_eq!((report.stats.lines_read, report.stats.memory_lines), (2, 2));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_missing_input_is_an_error_naming_it() {
        let err =
            run_report(&[PathBuf::from("/no/such/log")], &ReportOptions::default()).unwrap_err();
        assert!(
            err.to_string().starts_with("cannot read /no/such/log: "),
            "{err}"
        );
    }

    #[test]
    fn no_inputs_is_an_error() {
        assert!(matches!(
            run_report(&[], &ReportOptions::default()),
            Err(ReportError::NoInputs)
        ));
    }
}
