//! `memprints report`: read the logs of an instrumented PithTrain run and say where the memory
//! went.
//!
//! The flow, one module each: [`inputs`] (which files, binary ones kept out) → [`lines`]
//! (decompress, scan, cut prints at `[rank=`, fold step lines; [`chunked`] for one big file on
//! all cores, [`many`] for many files at once, [`marks`] for print-dense regions) → [`parse`]
//! (one print → one [`parse::Event`])
//! and [`step_and_oom`] (PithTrain's step line, the CUDA OOM line) → [`builder`] (the fold into
//! runs, [`runs`] telling launches apart, and per rank into the types of [`schema`]; [`saved`]
//! gives saved tensors their exact bytes) → [`summary`] (peaks, the breakdown at the peak, the
//! cross-rank imbalance) → [`joined`] (the prints beside PithTrain's step peaks and the memory
//! snapshots) → [`estimate`] (PithTrain's estimator beside the prints, with `--estimate`) →
//! [`render`] (text, markdown, JSON, HTML). [`run_report`] is the library entry
//! point; the subcommand's arguments live in `crate::cli::report`.

pub mod builder;
pub mod chunked;
pub mod crash;
pub mod estimate;
pub mod headroom;
pub mod inputs;
pub mod joined;
pub mod lines;
pub mod many;
pub mod mapped;
pub mod marks;
pub mod parse;
pub mod passes;
pub mod rank_map;
pub mod runs;
pub mod saved;
pub mod schema;
pub mod step_and_oom;
pub mod summary;

use std::collections::BTreeSet;
use std::path::PathBuf;

pub use builder::ReportBuilder;
pub use schema::Report;

use schema::SkippedInput;

/// What to report on.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Keep only these ranks (all when empty). Stats still count every rank.
    pub ranks: Vec<u32>,
    /// Memory snapshot files or directories to set beside the prints (`--snapshots`), on top
    /// of those the logs name.
    pub snapshots: Vec<PathBuf>,
    /// Run PithTrain's memory estimator and set it beside the prints (`--estimate`).
    pub estimate: Option<estimate::EstimateOptions>,
    /// Every rank's GPU capacity in bytes (`--gpu-memory GIB`), over what the logs say.
    pub gpu_memory: Option<i64>,
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

/// Reads every input (a file, or each log directly inside a directory, in name order) as one
/// stream cut into runs ([`runs`]; several files are scanned on all cores by [`many`] and folded
/// in that order), then finds each run's memory snapshots ([`joined`]) and,
/// when asked, runs PithTrain's estimator beside it ([`estimate`]). Binary files are skipped
/// with a note, never scanned.
pub fn run_report(inputs: &[PathBuf], opts: &ReportOptions) -> Result<Report, ReportError> {
    let (files, mut skipped) = inputs::expand_inputs(inputs)?;
    let only =
        (!opts.ranks.is_empty()).then(|| opts.ranks.iter().copied().collect::<BTreeSet<_>>());
    let mut builder = ReportBuilder::new(only);
    let mut read = Vec::new();
    let mut notes = Vec::new();
    let mut fold = |index: usize, outcome: many::Scanned| -> Result<(), ReportError> {
        let file = &files[index];
        let read_err = |source| ReportError::Read {
            path: file.clone(),
            source,
        };
        let Some(collected) = outcome.map_err(read_err)? else {
            skipped.push(SkippedInput {
                path: file.display().to_string(),
                reason: inputs::binary_reason(file),
            });
            return Ok(());
        };
        builder.begin_source_launching(read.len(), collected.launches);
        collected.replay(|item| builder.item(item));
        builder.end_source(&collected.tail);
        builder.count_scan(collected.counts);
        notes.extend(collected.nuls.note(&file.display().to_string()));
        read.push(file.display().to_string());
        Ok(())
    };
    if let [file] = &files[..] {
        // One file: folded as it is scanned; a big plain one by chunks on all cores, any other
        // on two threads.
        let read_err = |source| ReportError::Read {
            path: file.clone(),
            source,
        };
        // `None` for binary data, else the NUL bytes read around.
        let scan =
            |builder: &mut ReportBuilder| -> Result<Option<inputs::NulSkipped>, ReportError> {
                if let Some(plain) = inputs::big_plain_file(file).map_err(read_err)? {
                    let name = file.display().to_string();
                    let map =
                        std::sync::Arc::new(mapped::Mapped::new(&plain, &name).map_err(read_err)?);
                    if !inputs::has_nul(map.bytes()) {
                        builder.begin_mapped(0, std::sync::Arc::clone(&map));
                        let counts = chunked::scan_map(&map, lines::Mode::FoldSteps, |item| {
                            builder.item(item)
                        })
                        .map_err(read_err)?;
                        let bytes = map.bytes();
                        builder.end_source(&bytes[bytes.len().saturating_sub(crash::TAIL_BYTES)..]);
                        builder.count_scan(counts);
                        return Ok(Some(inputs::NulSkipped::default()));
                    }
                }
                let Some((reader, nuls)) = inputs::open_text(file).map_err(read_err)? else {
                    return Ok(None);
                };
                let mut reader = crash::TailKeeper::new(reader);
                let counts = lines::scan(&mut reader, lines::Mode::FoldSteps, |item| {
                    builder.item(item)
                })
                .map_err(read_err)?;
                builder.end_source(reader.tail());
                builder.count_scan(counts);
                Ok(Some(nuls.get()))
            };
        builder.begin_source(0);
        if let Some(nuls) = scan(&mut builder)? {
            notes.extend(nuls.note(&file.display().to_string()));
            read.push(file.display().to_string());
        } else {
            skipped.push(SkippedInput {
                path: file.display().to_string(),
                reason: inputs::binary_reason(file),
            });
        }
    } else {
        many::scan_files(&files, &mut fold)?;
    }
    let mut report = builder.finish(read);
    report.skipped = skipped;
    report.notes = notes;
    headroom::attach(&mut report, opts.gpu_memory);
    joined::attach_snapshots(&mut report, &opts.snapshots);
    if let Some(estimate) = &opts.estimate {
        estimate::attach(&mut report, estimate);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_is_read_in_name_order_and_its_binary_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.log", "a.log", ".hidden"] {
            std::fs::write(dir.path().join(name), "[rank=0] x\n").unwrap();
        }
        std::fs::write(dir.path().join("c.log"), b"\x80\x04[rank=0] x\x00\n").unwrap();
        let input = [dir.path().to_path_buf()];
        let report = run_report(&input, &ReportOptions::default()).unwrap();
        assert_eq!((report.stats.lines_read, report.stats.memory_lines), (2, 2));
        assert_eq!(report.inputs.len(), 2);
        assert_eq!(report.skipped.len(), 1);
        assert_eq!(report.skipped[0].reason, "binary data, not a log");
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
