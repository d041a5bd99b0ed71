//! Command-line arguments of `memprints snapshot` and its `diff` subcommand, and `execute`.
//!
//! Exit codes: 0 when every input was reported; 1 when some inputs failed and the others were
//! reported (each failure is one `error:` line on stderr and an entry of `errors` in JSON);
//! an `Err` (the binary prints it as one line) when nothing could be reported.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use super::render;
use super::{FailedInput, LoadOptions, SnapshotReport, diff, expand_inputs, load, load_all};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    pub command: Option<SnapshotCommand>,
    /// Snapshot pickles, or folders of them (one per rank, rank read from `rank(\d+)`)
    #[arg(value_name = "PICKLE|DIR")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Show which stacks grew or shrank between snapshot A and snapshot B
    Diff {
        /// The snapshot before (the baseline), e.g. an earlier step or run
        #[arg(value_name = "A")]
        a: PathBuf,
        /// The snapshot after, compared with A: stacks that grew or shrank from A to B
        #[arg(value_name = "B")]
        b: PathBuf,
        #[command(flatten)]
        output: OutputArgs,
    },
}

#[derive(Debug, Args)]
pub struct OutputArgs {
    /// How many stack groups to list
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report here instead of stdout
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Text,
    Json,
    Html,
}

/// Runs `memprints snapshot …`; returns the exit code.
pub fn execute(args: SnapshotArgs) -> anyhow::Result<i32> {
    if let Some(SnapshotCommand::Diff { a, b, output }) = args.command {
        return execute_diff(&a, &b, &output);
    }
    if args.inputs.is_empty() {
        bail!("no snapshot given: pass one or more PICKLE files or folders");
    }
    let paths = expand_inputs(&args.inputs).context("listing the inputs")?;
    if paths.is_empty() {
        bail!("no *.pickle or *.pkl files in the given folders");
    }
    let options = LoadOptions {
        progress: true,
        timeline: args.output.format == Format::Html,
    };
    let mut reports = Vec::new();
    let mut errors = Vec::new();
    for (path, result) in paths.iter().zip(load_all(&paths, options)) {
        match result {
            Ok(r) => reports.push(r),
            Err(e) => errors.push(FailedInput {
                path: path.display().to_string(),
                error: e.to_string(),
            }),
        }
    }
    if reports.is_empty() {
        let first = &errors[0].error;
        if errors.len() == 1 {
            bail!("{first}");
        }
        bail!(
            "none of {} snapshots could be read; first: {first}",
            errors.len()
        );
    }
    for e in &errors {
        eprintln!("error: {}", e.error);
    }
    let out = &args.output;
    let text = match out.format {
        Format::Text => render::text::report(&reports, out.top),
        Format::Json => render::json::report(&reports, &errors, out.top),
        Format::Html => render::html::report(&reports, &errors, out.top),
    };
    write_out(out, &text)?;
    Ok(if errors.is_empty() { 0 } else { 1 })
}

fn execute_diff(a: &std::path::Path, b: &std::path::Path, out: &OutputArgs) -> anyhow::Result<i32> {
    let ra: SnapshotReport = load(a, true)?;
    let rb: SnapshotReport = load(b, true)?;
    let d = diff::diff(&ra.path, ra.primary(), &rb.path, rb.primary());
    let text = match out.format {
        Format::Text => render::text::diff(&d, out.top),
        Format::Json => render::json::diff(&d, out.top),
        Format::Html => render::html::diff(&d, out.top),
    };
    write_out(out, &text)?;
    Ok(0)
}

fn write_out(out: &OutputArgs, text: &str) -> anyhow::Result<()> {
    match &out.out {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
        }
        None => {
            use std::io::Write;
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                // A closed pipe (`| head`) is not an error worth reporting.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                r => r.context("writing to stdout"),
            }
        }
    }
}
