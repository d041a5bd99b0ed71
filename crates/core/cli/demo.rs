//! `memprints demo`: the whole job on the embedded sample tree, step by step
//! ([`memprints_codemod::demo`]), each step's result printed as the command it stands for prints it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::bail;
use clap::Args;

use super::{ExitStatus, Output};
use memprints_codemod::demo::{self, MODEL, MODEL_FILE};
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
    writeln!(
        out,
        "{}== every file of the sample is back, byte for byte",
        if verbose { "\n" } else { "" }
    )?;
    Ok(ExitStatus::Success)
}
