//! `memprints report`: read the logs of an instrumented PithTrain run and say where the memory
//! went.
//!
//! The layers, each knowing only those below it: [`schema`] (the model: plain data) ←
//! [`parse`] and [`step_and_oom`] (one print or one line → what it says) ← [`scan`] (the
//! engine: a [`scan::Scanner`] finds the lines worth reading and hands them to a
//! [`scan::Sink`]) ← [`fold`] (the sink that folds them into runs and ranks) ← [`joined`] (the
//! prints beside PithTrain's step peaks and the memory snapshots), [`estimate_section`] (PithTrain's
//! estimator beside the prints, with `--estimate`). [`walk`] says which files an input names;
//! [`folder`] folds a folder's files each alone, on all cores, and merges them.
//! [`run_report`] is the library entry point; rendering is `memprints-present`'s.

pub mod crash;
pub mod diff;
pub mod error;
pub mod estimate_section;
pub mod fold;
pub mod folder;
pub mod headroom;
pub mod joined;
pub mod launch;
pub mod owners;
pub mod parse;
pub mod scan;
pub mod schema;
pub mod step_and_oom;
pub mod walk;
pub mod whatif;

use std::collections::BTreeSet;
use std::path::PathBuf;

pub use error::ReportError;
pub use fold::ReportBuilder;
pub use schema::Report;

use scan::{Input, Mode, Scanner, inputs, mapped};

/// What to report on.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Keep only these ranks (all when empty). Stats still count every rank.
    pub ranks: Vec<u32>,
    /// Memory snapshot files or directories to set beside the prints (`--snapshots`), on top
    /// of those the logs name.
    pub snapshots: Vec<PathBuf>,
    /// Run PithTrain's memory estimator and set it beside the prints (`--estimate`).
    pub estimate: Option<estimate_section::EstimateOptions>,
    /// The memory budget of reading each snapshot (`--max-memory`); 1 GiB when `None`.
    pub max_memory: Option<u64>,
    /// Predict each rank's steady-state peak at these settings (`--what-if`).
    pub what_if: Vec<whatif::Change>,
    /// Every rank's GPU capacity in bytes (`--gpu-memory GIB`), over what the logs say (the
    /// prints' `gpu_total=`, an OOM message: [`headroom`]).
    pub gpu_memory: Option<i64>,
}

/// Reads every input (a file, or each log directly inside a directory, in name order) as one
/// stream cut into runs ([`fold::runs`]; several files are each folded on all cores and merged
/// in that order, [`folder`]), then finds each run's memory snapshots ([`joined`]) and,
/// when asked, runs PithTrain's estimator beside it ([`estimate_section`]). Binary files are skipped
/// with a note, never scanned.
pub fn run_report(inputs: &[PathBuf], opts: &ReportOptions) -> Result<Report, ReportError> {
    report(inputs, opts, Folding::PerFile)
}

/// [`run_report`] with the files of a folder folded one after the other, as they are scanned
/// ([`folder::fold_in_order`]), never each alone: the report the per-file fold must give, which
/// tests hold it to.
#[doc(hidden)]
pub fn run_report_in_order(
    inputs: &[PathBuf],
    opts: &ReportOptions,
) -> Result<Report, ReportError> {
    report(inputs, opts, Folding::InOrder)
}

/// How several files are folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Folding {
    /// Each alone, merged ([`folder::fold_files`]), or in order where they overlap.
    PerFile,
    /// In order ([`folder::fold_in_order`]).
    InOrder,
}

fn report(
    inputs: &[PathBuf],
    opts: &ReportOptions,
    folding: Folding,
) -> Result<Report, ReportError> {
    // Once the passes are read (or the report given up), this thread's shared copies of their
    // text go: those in the report stay with it ([`fold::intern::text`]).
    let _copies = fold::intern::ReleaseOnDrop;
    let (files, mut skipped) = walk::expand_inputs(inputs)?;
    let only =
        (!opts.ranks.is_empty()).then(|| opts.ranks.iter().copied().collect::<BTreeSet<_>>());
    let mut builder = ReportBuilder::new(only.clone());
    let mut read = Vec::new();
    let mut notes = Vec::new();
    // Each file's config lines, found by the worker that scanned it.
    let mut configs = Vec::new();
    if let [file] = &files[..] {
        // One file: folded as it is scanned; a big plain one mapped, by chunks on all cores,
        // any other streamed on two threads.
        let read_err = |source| ReportError::Read {
            path: file.clone(),
            source,
        };
        let name = file.display().to_string();
        builder.begin_source(0);
        // A big plain file without NUL bytes is mapped and read by chunks on all cores; any
        // other is streamed, its NUL runs read around ([`scan::inputs::open_text`]).
        let mut mapped_clean = None;
        if let Some(plain) = inputs::big_plain_file(file).map_err(read_err)? {
            let map = mapped::Mapped::new(&plain, &name).map_err(read_err)?;
            if !inputs::map_has_nul(&map) {
                mapped_clean = Some(plain);
            }
        }
        let scanned = if let Some(plain) = mapped_clean {
            let input = Input::File(&plain, &name);
            let counts = scan::Chunked.scan(input, Mode::FoldSteps, &mut builder);
            builder.end_source(&crash::file_tail(&plain).map_err(read_err)?);
            Some((counts, inputs::NulSkipped::default()))
        } else {
            inputs::open_text(file)
                .map_err(read_err)?
                .map(|(reader, nuls)| {
                    let mut reader = crash::TailKeeper::new(reader);
                    let counts = scan::Streamed.scan(
                        Input::Reader(&mut reader),
                        Mode::FoldSteps,
                        &mut builder,
                    );
                    builder.end_source(reader.tail());
                    (counts, nuls.get())
                })
        };
        match scanned {
            Some((counts, nuls)) => {
                builder.count_scan(counts.map_err(read_err)?);
                notes.extend(nuls.note(&name));
                read.push(name);
            }
            None => skipped.push(walk::skipped_binary(file)),
        }
    } else {
        // Each file folded alone on all cores and merged ([`folder`]); when a file goes on
        // with another's rank, all of them are folded one after the other, as they are
        // scanned ([`folder::fold_in_order`]).
        let mut gathered = folder::Gathered::default();
        let alone = match folding {
            Folding::PerFile => folder::fold_files(&files, &only, &mut builder, &mut gathered),
            Folding::InOrder => Err(folder::Stop::Overlap),
        };
        match alone {
            Ok(()) => {}
            Err(folder::Stop::Error(e)) => return Err(e),
            Err(folder::Stop::Overlap) => {
                builder = ReportBuilder::new(only.clone());
                gathered = folder::Gathered::default();
                folder::fold_in_order(&files, &mut builder, &mut gathered)?;
            }
        }
        skipped.extend(gathered.skipped);
        read = gathered.read;
        notes = gathered.notes;
        configs = gathered.configs;
    }
    let configs = (files.len() > 1).then_some(configs);
    let mut report = builder.finish(read);
    report.skipped = skipped;
    report.notes = notes;
    headroom::attach(&mut report, opts.gpu_memory);
    joined::attach_snapshots_within(&mut report, &opts.snapshots, opts.max_memory);
    owners::attach(&mut report);
    if let Some(estimate) = &opts.estimate {
        estimate_section::attach(&mut report, estimate);
    }
    whatif::attach(&mut report, &opts.what_if, configs);
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
