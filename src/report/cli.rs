//! The clap arguments of `memprints report` and the function that runs it.
//!
//! Contract: [`execute`] reads the logs, renders the report and writes it to `--out` or
//! stdout. It returns exit code 0 on success (also when the logs hold no memory prints, which
//! it notes on stderr); unreadable inputs and unwritable outputs come back as errors.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Context;

use super::render::{Format, render, write_json};
use super::{ReportOptions, run_report};

/// Read the logs of an instrumented run and report where the GPU memory went.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Read the logs of an instrumented run and report where the GPU memory went",
    long_about = "Read the logs of a PithTrain run instrumented with memory prints and report, \
                  per rank, the setup phase, the checkpoint load, the pipeline timeline with its \
                  peak, the detail layers (stage deltas, saved tensors, experts internals), and, \
                  across ranks, the peaks and the imbalance between pipeline stages.\n\n\
                  Logs may be one file per node with all ranks interleaved, carry srun/torchrun \
                  prefixes, ANSI colours or CRLF, and be gzip- or zstd-compressed.",
    after_help = "Examples:\n  memprints report logging/pretrain_lm/qwen3-30b-a3b_node0.log\n  \
                  memprints report logging/pretrain_lm/ --rank 0 --rank 8\n  \
                  memprints report run.log.zst --format html --out report.html"
)]
pub struct ReportArgs {
    /// Log files, or directories whose files are all read (gzip and zstd are detected).
    #[arg(required = true, value_name = "LOG|DIR")]
    pub inputs: Vec<PathBuf>,

    /// Report only this global rank; repeat for several (default: every rank found).
    #[arg(long = "rank", value_name = "N")]
    pub ranks: Vec<u32>,

    /// Output format. `json` follows schema/report.schema.json; `html` is one self-contained file.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Write the report to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Memory snapshot pickles (or directories of them) to set beside the prints, besides those
    /// the logs name in their "Memory snapshot saved to" lines.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub snapshots: Vec<PathBuf>,

    /// Colour the text report: auto (a terminal and no NO_COLOR), always, never.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
}

/// When the text report uses colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// Runs `memprints report`; returns the process exit code.
pub fn execute(args: ReportArgs) -> anyhow::Result<u8> {
    let opts = ReportOptions {
        ranks: args.ranks.clone(),
        snapshots: args.snapshots.clone(),
    };
    let report = run_report(&args.inputs, &opts)?;
    if report.stats.memory_lines == 0 {
        eprintln!(
            "memprints: no memory prints ([rank=…]) found in {} line(s); was the run instrumented?",
            report.stats.lines_read
        );
    }
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            args.out.is_none()
                && std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    let write = |out: &mut dyn Write| -> std::io::Result<()> {
        if args.format == Format::Json {
            write_json(&report, out)
        } else {
            out.write_all(render(&report, args.format, color).as_bytes())?;
            out.flush()
        }
    };
    match &args.out {
        Some(path) => std::fs::File::create(path)
            .and_then(|mut file| write(&mut file))
            .with_context(|| format!("cannot write the report to {}", path.display()))?,
        None => {
            write(&mut std::io::stdout().lock()).context("cannot write the report to stdout")?
        }
    }
    Ok(0)
}
