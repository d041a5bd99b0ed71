//! `memprints report`: its arguments and [`run`], which reads the logs through
//! [`memprints_log::run_report`], renders the report and writes it to `--out` or through the
//! one [`Output`].
//!
//! Contract: exit 0 on success (also when the logs hold no memory prints, which is noted on
//! stderr); exit 2 when `--estimate` could not run the estimator: the report is written all the
//! same, with the reason inside it and as a `warning:` on stderr; a `--rank` the logs have no
//! prints of is an error naming the ranks they have (a warning when other ranks given are
//! there); inputs that are all memory snapshots are an error pointing to `snapshot`; unreadable inputs, an `--out` that is, links to or lies inside anything read (logs, snapshots
//! given or found beside the log, the estimator's model config) and unwritable outputs are
//! errors.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::ValueEnum;

use super::args::{check_out_not_input, refuse_snapshots_as_logs, size};
use super::{ColorChoice, ExitStatus, Output};
use memprints_estimate::{Overrides, Tolerance};
use memprints_log::diff::Side;
use memprints_log::estimate_section::EstimateOptions;
use memprints_log::whatif::Change;
use memprints_log::{ReportOptions, run_report};
use memprints_present::report::{self as present, render, render_text, write_json};

/// The width of the text report when stdout is not a terminal (a file, a pipe).
const DEFAULT_WIDTH: usize = 80;

/// An output format of `memprints report` (the command line's face of
/// [`memprints_present::report::Format`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned tables for a terminal.
    Text,
    /// GitHub-flavoured markdown.
    Markdown,
    /// Stable JSON (schema/report.schema.json); sizes in bytes.
    Json,
    /// One self-contained HTML file with SVG charts.
    Html,
}

impl From<Format> for present::Format {
    fn from(format: Format) -> Self {
        match format {
            Format::Text => present::Format::Text,
            Format::Markdown => present::Format::Markdown,
            Format::Json => present::Format::Json,
            Format::Html => present::Format::Html,
        }
    }
}

/// Read the logs of an instrumented run and report where the GPU memory went.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Read the logs of an instrumented run and report where the GPU memory went",
    long_about = "Read the logs of a PithTrain run instrumented with memory prints and report, \
                  per rank, the setup phase, the checkpoint load, the pipeline timeline with its \
                  peak, the detail layers (stage deltas, saved tensors, experts internals), and, \
                  across ranks, the peaks and the imbalance between pipeline stages.\n\n\
                  Logs may be one file per node with all ranks interleaved, carry srun/torchrun \
                  prefixes, ANSI colours or CRLF, be gzip- or zstd-compressed, and hold runs of \
                  NUL bytes (a copytruncate rotation, a preallocation), which are read around \
                  with a note.",
    after_help = "Examples:\n  memprints report logging/pretrain_lm/qwen3-30b-a3b_node0.log\n  \
                  memprints report logging/pretrain_lm/ --rank 0 --rank 8\n  \
                  memprints report run.log.zst --format html --out report.html\n  \
                  memprints report run.log --estimate --repo ~/pith-train --world 64\n  \
                  memprints report run.log --what-if micro-batch-size=2 --what-if pp=4"
)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ReportArgs {
    // `diff A B` instead of inputs; a log named `diff` is `./diff`.
    #[command(subcommand)]
    pub(crate) command: Option<ReportCommand>,

    /// Log files, or directories whose files are all read (gzip and zstd are detected).
    #[arg(required = true, value_name = "LOG|DIR")]
    pub inputs: Vec<PathBuf>,

    /// Report only this global rank; repeat for several (default: every rank found).
    #[arg(long = "rank", value_name = "N")]
    pub ranks: Vec<u32>,

    /// Output format. `json` follows schema/report.schema.json (indented at a terminal, one
    /// line into a file or a pipe); `html` is one self-contained file.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Write the report to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,

    /// Memory snapshot pickles (or directories of them) to set beside the prints, besides those
    /// the logs name in their "Memory snapshot saved to" lines.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub snapshots: Vec<PathBuf>,

    /// How much memory reading each snapshot may take.
    #[command(flatten)]
    pub memory: super::snapshot::MemoryArgs,

    /// Text: let prose and tables be as wide as they come. Without it the text report is
    /// wrapped to the terminal's width, or to 80 columns into a file or a pipe.
    #[arg(long)]
    pub wide: bool,

    /// Predict each rank's steady-state peak at another setting, KEY=VALUE; repeat for several.
    /// KEY: sequence-length, micro-batch-size, global-batch-size, pipeline-parallel-size (pp),
    /// expert-parallel-size (ep), context-parallel-size (cp). The other settings are the log's.
    #[arg(long = "what-if", value_name = "KEY=VALUE", value_parser = parse_what_if)]
    pub what_if: Vec<Change>,
    /// Each GPU's memory in GiB (e.g. 139.81 for an H200, as PyTorch's OOM message says): the
    /// report shows every rank's headroom and whether it fits (tight under 5 %). Without it the
    /// capacity comes from the prints (the GPU's total, `gpu_total=` of `init_process_group`),
    /// else from the run's OOM message, when there is one.
    #[arg(long, value_name = "GIB", value_parser = parse_gib)]
    pub gpu_memory: Option<i64>,

    /// Run PithTrain's memory estimator (tools/memory_estimator, no torch) for each profiled pp
    /// rank and set it beside the prints, event by event and component by component. It runs
    /// Python from `--repo` or the checkout at or above the current directory only.
    #[arg(long)]
    pub estimate: bool,

    /// The PithTrain checkout whose estimator runs (default: the checkout at or above the
    /// current directory). Code runs only from this checkout or the one you stand in, never
    /// from a folder a log names.
    #[arg(long, value_name = "DIR", requires = "estimate")]
    pub repo: Option<PathBuf>,

    /// The model's config.json (default: the log's `model=` setting, relative to the tree).
    #[arg(long, value_name = "PATH", requires = "estimate")]
    pub config: Option<PathBuf>,

    /// Sequence length (default: the log's config line).
    #[arg(long, value_name = "N", requires = "estimate")]
    pub seq_len: Option<u32>,

    /// Micro-batch size (default: the log's config line).
    #[arg(long, value_name = "N", requires = "estimate")]
    pub micro_batch_size: Option<u32>,

    /// Global batch size (default: the log's config line).
    #[arg(long, value_name = "N", requires = "estimate")]
    pub global_batch_size: Option<u32>,

    /// Pipeline parallel size (default: the log's config line).
    #[arg(long, value_name = "N", requires = "estimate", value_parser = size())]
    pub pp: Option<u32>,

    /// Expert parallel size (default: the log's config line).
    #[arg(long, value_name = "N", requires = "estimate", value_parser = size())]
    pub ep: Option<u32>,

    /// Context parallel size (default: the log's config line).
    #[arg(long, value_name = "N", requires = "estimate", value_parser = size())]
    pub cp: Option<u32>,

    /// GPUs in the run (default: pp × ep × cp, no data parallelism; the log does not say).
    #[arg(long, value_name = "N", requires = "estimate", value_parser = size())]
    pub world: Option<u32>,

    /// The Python 3 that runs the estimator.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "python3",
        requires = "estimate"
    )]
    pub python: OsString,

    /// Seconds the estimator may run before it is stopped.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 120,
        requires = "estimate"
    )]
    pub estimate_timeout: u64,

    /// When a figure counts as off: PCT percent of the measured figure, or MIB MiB if larger.
    #[arg(
        long,
        value_name = "PCT[,MIB]",
        default_value = "10,128",
        value_parser = parse_tolerance,
        requires = "estimate"
    )]
    pub tolerance: Tolerance,
}

/// The subcommands of `report`.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ReportCommand {
    /// Set two runs side by side: per rank, per component, per layer, the step lines' peaks and
    /// the snapshots' owners, with B − A
    #[command(
        after_help = "Examples:\n  memprints report diff before.log after.log\n  \
                  memprints report diff run1/ run2/ --format html --out diff.html\n  \
                  memprints report diff a.log b.log --format json | jq .ranks"
    )]
    Diff(DiffArgs),
}

/// `report diff A B`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    /// The run compared from: a log, or a directory of one run's logs.
    #[arg(value_name = "A")]
    pub a: PathBuf,
    /// The run compared with A.
    #[arg(value_name = "B")]
    pub b: PathBuf,
    /// Which run of an input that holds several (from 1; default: the last).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub run: Option<u32>,
    /// Memory snapshot pickles of run A, besides those its log names.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub snapshots_a: Vec<PathBuf>,
    /// Memory snapshot pickles of run B, besides those its log names.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    pub snapshots_b: Vec<PathBuf>,
    /// Output format. `json` is the diff's own schema (README, "report diff").
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the diff to this file instead of stdout.
    #[arg(long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Text: let the tables be as wide as they come.
    #[arg(long)]
    pub wide: bool,
}

fn parse_what_if(text: &str) -> Result<Change, String> {
    text.parse()
        .map_err(|e: memprints_log::whatif::ChangeError| e.to_string())
}

/// `10`, `10%`, `10,128` or `10%,128MiB`: percent, then an optional floor in MiB.
fn parse_tolerance(text: &str) -> Result<Tolerance, String> {
    let (pct, mib) = match text.split_once(',') {
        Some((pct, mib)) => (pct, Some(mib)),
        None => (text, None),
    };
    let pct: f64 = pct
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("`{text}`: expected a percentage such as 10 or 10,128"))?;
    let floor = match mib {
        Some(mib) => mib
            .trim()
            .trim_end_matches("MiB")
            .parse::<u32>()
            .map_err(|_| format!("`{text}`: expected a whole number of MiB after the comma"))?,
        None => 128,
    };
    if !(0.0..=1000.0).contains(&pct) {
        return Err(format!(
            "`{text}`: the percentage must be between 0 and 1000"
        ));
    }
    Ok(Tolerance {
        relative: pct / 100.0,
        absolute_bytes: i64::from(floor) << 20,
    })
}

/// Every file the report read: the logs, the snapshots found for them, the model configs the
/// estimator was given.
fn files_read(report: &memprints_log::Report) -> Vec<PathBuf> {
    let logs = report.inputs.iter().map(PathBuf::from);
    let snapshots = report
        .runs
        .iter()
        .flat_map(|run| &run.memory.snapshots)
        .filter_map(|s| s.path.as_ref().map(PathBuf::from));
    let configs = report
        .runs
        .iter()
        .filter_map(|run| run.estimate.as_ref()?.settings.as_ref())
        .map(|s| s.model_config.clone());
    logs.chain(snapshots).chain(configs).collect()
}

/// Runs `report` or `report diff`.
pub fn run(args: ReportArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    if let Some(ReportCommand::Diff(diff)) = &args.command {
        return run_diff(diff, out);
    }
    refuse_snapshots_as_logs(&args.inputs)?;
    if let Some(path) = &args.out {
        let named = args
            .inputs
            .iter()
            .chain(&args.snapshots)
            .chain(&args.config);
        check_out_not_input(path, &named.cloned().collect::<Vec<_>>())?;
    }
    let estimate = args.estimate.then(|| EstimateOptions {
        repo: args.repo.clone(),
        python: Some(args.python.clone()),
        timeout: Duration::from_secs(args.estimate_timeout),
        tolerance: args.tolerance,
        overrides: Overrides {
            config: args.config.clone(),
            sequence_length: args.seq_len,
            micro_batch_size: args.micro_batch_size,
            global_batch_size: args.global_batch_size,
            pp: args.pp,
            ep: args.ep,
            cp: args.cp,
            world: args.world,
        },
    });
    let opts = ReportOptions {
        ranks: args.ranks.clone(),
        snapshots: args.snapshots.clone(),
        estimate,
        max_memory: args.memory.max_memory,
        what_if: args.what_if.clone(),
        gpu_memory: args.gpu_memory,
    };
    let report = run_report(&args.inputs, &opts)?;
    for note in &report.notes {
        out.note(present::input_note(note));
    }
    if let Some(path) = &args.out {
        // The logs name snapshots and a model config of their own: none may be written over.
        check_out_not_input(path, &files_read(&report))?;
    }
    if report.stats.memory_lines == 0 {
        out.note(format_args!(
            "no memory prints ([rank=…]) found in {} line(s); was the run instrumented?",
            report.stats.lines_read
        ));
    } else {
        check_ranks_found(&args, &report, out)?;
    }
    let estimate_failed = report
        .runs
        .iter()
        .filter_map(|run| run.estimate.as_ref()?.error.as_ref())
        .inspect(|why| out.warning(format_args!("--estimate: {why}")))
        .count()
        > 0;
    // The global --color: `always` colours an --out file too.
    let color = match ColorChoice::current() {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => args.out.is_none() && out.stdout_color(),
    };
    // Indented JSON for a person at a terminal; one line for a file or a pipe (`jq .`
    // indents it).
    let pretty = args.out.is_none() && out.stdout_is_terminal();
    let width = text_width(args.wide, args.out.is_some(), out);
    let write = |sink: &mut dyn Write| -> std::io::Result<()> {
        if args.format == Format::Json {
            write_json(&report, pretty, sink)
        } else if args.format == Format::Text {
            sink.write_all(render_text(&report, color, width).as_bytes())?;
            sink.flush()
        } else {
            sink.write_all(render(&report, args.format.into(), color).as_bytes())?;
            sink.flush()
        }
    };
    match &args.out {
        Some(path) => std::fs::File::create(path)
            .and_then(|mut file| write(&mut file))
            .with_context(|| format!("cannot write the report to {}", path.display()))?,
        None => write(out)?,
    }
    // Freeing a report of thousands of ranks piece by piece takes milliseconds that the
    // command's caller waits for; on a thread of its own it does not hold up the exit, when
    // the process's memory goes back at once.
    std::thread::spawn(move || drop(report));
    Ok(if estimate_failed {
        ExitStatus::Partial
    } else {
        ExitStatus::Success
    })
}

/// A `--rank` the logs have no prints of: an error naming the ranks they have when none of the
/// ranks given is there, else a warning.
fn check_ranks_found(
    args: &ReportArgs,
    report: &memprints_log::Report,
    out: &mut Output,
) -> anyhow::Result<()> {
    let found: std::collections::BTreeSet<u32> = report
        .runs
        .iter()
        .flat_map(|run| run.ranks.iter().map(|r| r.rank))
        .collect();
    let absent: Vec<String> = args
        .ranks
        .iter()
        .filter(|r| !found.contains(r))
        .map(u32::to_string)
        .collect();
    if absent.is_empty() {
        return Ok(());
    }
    // The ranks the logs have: read again without the filter (only on this error's path).
    let all = run_report(&args.inputs, &ReportOptions::default())?;
    let there: std::collections::BTreeSet<u32> = all
        .runs
        .iter()
        .flat_map(|run| run.ranks.iter().map(|r| r.rank))
        .collect();
    let there = there
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let message = format!(
        "--rank {}: the logs hold no memory prints of {}",
        absent.join(","),
        if absent.len() == 1 {
            "that rank"
        } else {
            "those ranks"
        }
    );
    if found.is_empty() {
        return Err(super::exit::hinted(
            message,
            format!("the logs hold prints of ranks {there}; pass one of them, or leave --rank out"),
        ));
    }
    out.warning(format_args!("{message}; they hold ranks {there}"));
    Ok(())
}

/// The columns of the terminal on stdout, if it is one and says.
pub fn terminal_width() -> Option<usize> {
    terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
}

/// The text width: none with `--wide`, the terminal's on a terminal, else [`DEFAULT_WIDTH`].
pub(crate) fn text_width(wide: bool, to_file: bool, out: &Output) -> Option<usize> {
    (!wide).then(|| {
        if !to_file && out.stdout_is_terminal() {
            terminal_width().unwrap_or(DEFAULT_WIDTH)
        } else {
            DEFAULT_WIDTH
        }
    })
}

/// Reads one side of a diff: the run `--run` names, or the input's last, and which it is.
fn diff_side(
    path: &std::path::Path,
    snapshots: &[PathBuf],
    run: Option<u32>,
    out: &mut Output,
) -> anyhow::Result<(memprints_log::schema::Run, Side)> {
    let opts = ReportOptions {
        ranks: Vec::new(),
        snapshots: snapshots.to_vec(),
        estimate: None,
        max_memory: None,
        what_if: Vec::new(),
        gpu_memory: None,
    };
    let report = run_report(std::slice::from_ref(&path.to_path_buf()), &opts)?;
    let runs = report.runs.len();
    if runs == 0 {
        anyhow::bail!("{} holds no run to compare", path.display());
    }
    let n = match run {
        Some(n) if n as usize > runs => {
            anyhow::bail!("--run {n}: {} holds {runs} run(s)", path.display())
        }
        Some(n) => n as usize,
        None => runs,
    };
    if runs > 1 && run.is_none() {
        out.note(format_args!(
            "note: {} holds {runs} runs; comparing the last (--run N picks another)",
            path.display()
        ));
    }
    let picked = report
        .runs
        .into_iter()
        .nth(n - 1)
        .expect("n is within the runs");
    let side = Side {
        name: picked.name.clone(),
        sources: picked.sources.clone(),
        run: n,
        runs,
    };
    Ok((picked, side))
}

/// Runs `report diff A B`.
fn run_diff(args: &DiffArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    if let Some(path) = &args.out {
        check_out_not_input(path, &[args.a.clone(), args.b.clone()])?;
    }
    let (a, a_side) = diff_side(&args.a, &args.snapshots_a, args.run, out)?;
    let (b, b_side) = diff_side(&args.b, &args.snapshots_b, args.run, out)?;
    let d = memprints_log::diff::diff(&a, a_side, &b, b_side);
    let to_file = args.out.is_some();
    let text = match args.format {
        Format::Json => present::diff::json(&d, !to_file && out.stdout_is_terminal()),
        Format::Html => present::diff::html(&d),
        Format::Markdown => present::markdown::render(&present::diff::build(&d)),
        Format::Text => present::text::render(
            &present::diff::build(&d),
            false,
            text_width(args.wide, to_file, out),
        ),
    };
    match &args.out {
        Some(path) => std::fs::write(path, text)
            .with_context(|| format!("cannot write the diff to {}", path.display()))?,
        None => {
            out.write_all(text.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(ExitStatus::Success)
}

/// `--gpu-memory`: a positive number of GiB, in bytes.
fn parse_gib(text: &str) -> Result<i64, String> {
    let gib: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of GiB (e.g. 139.81)"))?;
    if !(gib > 0.0 && gib < 1e6) {
        return Err(format!(
            "{text} GiB is not a GPU's memory (0 < GIB < 1000000)"
        ));
    }
    Ok((gib * (1u64 << 30) as f64).round() as i64)
}
