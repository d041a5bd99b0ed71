//! `memprints demo`: the whole job on the embedded sample tree, step by step
//! ([`memprints_codemod::demo`]), each step's result printed as the command it stands for prints it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use super::{ExitStatus, Output};
use memprints_codemod::demo::{self, LOG, LOG_NAME, MODEL, MODEL_FILE};
use memprints_codemod::summary::StatusText;

/// `demo`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Write the sample tree here and keep it (instrumented) instead of using a temporary folder.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Print only the last line (and errors).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Runs `demo`.
pub fn run(args: DemoArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    memprints_commit::ignore_sigxfsz();
    let temp = tempfile::tempdir()?;
    let root = args
        .keep
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let repo = demo::write_sample(&root)?;
    let verbose = !args.quiet;
    if verbose {
        writeln!(
            out,
            "== sample PithTrain look-alike written to {}\n",
            root.display()
        )?;
        writeln!(
            out,
            "== memprints add {MODEL} --ranks 0,1 --pp {}",
            demo::PP
        )?;
    }
    let added = demo::add(&repo)?;
    if verbose {
        if let Some(note) = &added.layer_note {
            writeln!(out, "{note}")?;
        }
        if added.prints.has_silent_layer() {
            out.warning(&added.prints);
        } else {
            writeln!(out, "{}", added.prints)?;
        }
        write!(out, "{}", added.summary)?;
        writeln!(out, "\n== what went into {MODEL_FILE}:")?;
        write!(out, "{}", demo::model_diff(&repo)?)?;
        writeln!(out, "\n== memprints status")?;
        let status = demo::status(&repo)?;
        let text = StatusText {
            root: &repo.root,
            status: &status,
            pending: None,
        };
        write!(out, "{text}")?;
    }
    if args.keep.is_some() {
        writeln!(
            out,
            "{}== kept the instrumented tree in {}; `memprints remove --repo {1}` takes it out",
            if verbose { "\n" } else { "" },
            root.display()
        )?;
        return Ok(ExitStatus::Success);
    }
    let removed = demo::remove(&repo)?;
    if verbose {
        writeln!(out, "\n== memprints remove")?;
        write!(out, "{removed}")?;
    }
    if !demo::is_original(&root) {
        bail!("the sample tree differs from the original after remove");
    }
    if verbose {
        writeln!(out, "\n== every file of the sample is back, byte for byte")?;
    }
    let report = bundled_report(temp.path())?;
    if verbose {
        writeln!(
            out,
            "\n== memprints report {LOG_NAME}   (a bundled log of the sample's prints in a pp=2 run)\n"
        )?;
        let width = super::report::text_width(false, false, out);
        write!(
            out,
            "{}",
            memprints_present::report::render_text(&report, false, width)
        )?;
    }
    let read = &report.stats;
    if read.memory_lines == 0 || read.unparsed_memory_lines > 0 {
        bail!(
            "the bundled log read {} memory prints, {} unparsed",
            read.memory_lines,
            read.unparsed_memory_lines
        );
    }
    writeln!(
        out,
        "{}== every file of the sample is back, byte for byte; its bundled log reads {} memory \
         prints, 0 unparsed",
        if verbose { "\n" } else { "" },
        read.memory_lines
    )?;
    Ok(ExitStatus::Success)
}

/// The report of the bundled log, written into `dir` to be read and named as bundled. The log
/// names no memory snapshot, so nothing outside `dir` is read.
fn bundled_report(dir: &std::path::Path) -> anyhow::Result<memprints_log::Report> {
    let path = dir.join(LOG_NAME);
    std::fs::write(&path, LOG)?;
    let mut report = memprints_log::run_report(std::slice::from_ref(&path), &Default::default())?;
    let shown = path.display().to_string();
    let rename = |s: &mut String| *s = s.replace(&shown, LOG_NAME);
    report.inputs.iter_mut().for_each(rename);
    for run in &mut report.runs {
        rename(&mut run.name);
        run.sources.iter_mut().for_each(rename);
    }
    Ok(report)
}
