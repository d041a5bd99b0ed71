//! `memprints snapshot` and its `diff` subcommand: the arguments and [`run`], which reads the
//! pickles through [`memprints_snapshot`] and writes the report to `--out` or through the one
//! [`Output`].
//!
//! Exit codes: 0 when every input was reported; 1 when some inputs failed and the others were
//! reported (each failure is one `error:` line on stderr and an entry of `errors` in JSON);
//! an error (one line) when nothing could be reported or `--out` is one of the inputs.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};

use super::args::{check_out_not_input, refuse_logs_as_snapshots};
use super::{ExitStatus, Output};
use memprints_present::snapshot as render;
use memprints_snapshot::{
    FailedInput, LoadOptions, SnapshotReport, diff, expand_inputs, load_all, load_with,
};

/// Read memory snapshot pickles and report what held memory at the peak.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SnapshotArgs {
    // `diff A B` instead of inputs.
    #[command(subcommand)]
    pub(crate) command: Option<SnapshotCommand>,
    /// Snapshot pickles, or folders of them (one per rank, rank read from `rank(\d+)`)
    #[arg(value_name = "PICKLE|DIR")]
    pub inputs: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) output: OutputArgs,
    #[command(flatten)]
    pub(crate) memory: MemoryArgs,
}

/// How much memory reading may take: shared by `snapshot`, `snapshot diff` and `report`.
#[derive(Debug, Clone, Args)]
pub struct MemoryArgs {
    /// Most memory reading snapshots may take, all files together (e.g. 512M, 1G, 1GiB or
    /// bytes); a file that needs more is refused [default: 1GiB, and for each file at most 256
    /// times its compressed size (32 times a plain one) or 192 MiB, whichever is more: a small
    /// file that would need gigabytes is hostile. Give --max-memory to lift that]
    #[arg(long, value_name = "SIZE", value_parser = parse_max_memory)]
    pub max_memory: Option<u64>,
}

impl MemoryArgs {
    /// The budget and whether each file is also held to its size cap (when not given).
    pub fn budget(&self) -> (u64, bool) {
        match self.max_memory {
            Some(bytes) => (bytes, false),
            None => (memprints_snapshot::budget::DEFAULT_MAX_MEMORY, true),
        }
    }
}

fn parse_max_memory(text: &str) -> Result<u64, String> {
    memprints_snapshot::budget::parse_size(text)
}

/// The subcommands of `snapshot`.
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
        /// What to print and where.
        #[command(flatten)]
        output: OutputArgs,
        /// How much memory reading may take.
        #[command(flatten)]
        memory: MemoryArgs,
    },
}

/// What to print and where: shared by `snapshot` and `snapshot diff`.
#[derive(Debug, Args)]
pub struct OutputArgs {
    /// How many stack groups to list
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Output format
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub(crate) format: Format,
    /// Write the report here instead of stdout
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
}

/// The output formats of `snapshot`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Plain text for a terminal.
    Text,
    /// JSON following schema/snapshot.schema.json.
    Json,
    /// One self-contained HTML page with the interactive timeline.
    Html,
}

/// Runs `snapshot` or `snapshot diff`.
pub fn run(args: SnapshotArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    match &args.command {
        Some(SnapshotCommand::Diff { a, b, output, .. }) => {
            refuse_logs_as_snapshots("A", std::slice::from_ref(a))?;
            refuse_logs_as_snapshots("B", std::slice::from_ref(b))?;
            if let Some(path) = &output.out {
                check_out_not_input(path, &[a.clone(), b.clone()])?;
            }
        }
        None => {
            refuse_logs_as_snapshots("PICKLE", &args.inputs)?;
            if let Some(path) = &args.output.out {
                check_out_not_input(path, &args.inputs)?;
            }
        }
    }
    execute(args, out)
}

fn execute(args: SnapshotArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    if let Some(SnapshotCommand::Diff {
        a,
        b,
        output,
        memory,
    }) = args.command
    {
        return execute_diff(&a, &b, &output, &memory, out);
    }
    if args.inputs.is_empty() {
        bail!("no snapshot given: pass one or more PICKLE files or folders");
    }
    let paths = expand_inputs(&args.inputs).context("listing the inputs")?;
    if paths.is_empty() {
        bail!("no *.pickle or *.pkl files in the given folders");
    }
    let (max_memory, size_cap) = args.memory.budget();
    let options = LoadOptions {
        progress: true,
        timeline: args.output.format == Format::Html,
        max_memory,
        size_cap,
        // The renderers show the largest `top` stack groups of each device: a folder of
        // thousands of snapshots keeps no more.
        keep_stacks: Some(args.output.top),
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
        out.error(&e.error);
    }
    let wanted = &args.output;
    let text = match wanted.format {
        Format::Text => render::text::report(&reports, wanted.top),
        Format::Json => render::json::report(&reports, &errors, wanted.top),
        Format::Html => render::html::report(&reports, &errors, wanted.top),
    };
    write_out(wanted, &text, out)?;
    Ok(if errors.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

fn execute_diff(
    a: &Path,
    b: &Path,
    wanted: &OutputArgs,
    memory: &MemoryArgs,
    out: &mut Output,
) -> anyhow::Result<ExitStatus> {
    // One after the other, each within the budget.
    let (max_memory, size_cap) = memory.budget();
    let options = LoadOptions {
        progress: true,
        max_memory,
        size_cap,
        ..LoadOptions::default()
    };
    let ra: SnapshotReport = load_with(a, options)?;
    let rb: SnapshotReport = load_with(b, options)?;
    let d = diff::diff(&ra.path, ra.primary(), &rb.path, rb.primary());
    let text = match wanted.format {
        Format::Text => render::text::diff(&d, wanted.top),
        Format::Json => render::json::diff(&d, wanted.top),
        Format::Html => render::html::diff(&d, wanted.top),
    };
    write_out(wanted, &text, out)?;
    Ok(ExitStatus::Success)
}

/// Writes `text` to `--out`, or to stdout through the one [`Output`].
fn write_out(wanted: &OutputArgs, text: &str, out: &mut Output) -> anyhow::Result<()> {
    match &wanted.out {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
        }
        None => {
            out.write_all(text.as_bytes())?;
            out.flush()?;
            Ok(())
        }
    }
}
