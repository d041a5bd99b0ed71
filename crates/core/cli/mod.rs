//! The `memprints` command line: the clap definitions ([`Cli`]), one module per command (its
//! `…Args` and a `run(args, &mut Output) -> Result<ExitStatus>`), and [`run`], which dispatches.
//! Commands print only through [`Output`] and end with an [`ExitStatus`]; the binary
//! (`src/main.rs`) turns errors and panics into one line and the status into the exit code.
//!
//! The work itself is the library's ([`memprints_codemod`] and friends); a command parses, calls,
//! and prints.

pub mod add;
pub mod args;
pub mod check;
pub mod completions;
pub mod demo;
pub mod exit;
pub mod man;
pub mod output;
pub mod plan;
pub mod remove;
pub mod report;
pub mod skill;
pub mod snapshot;
pub mod status;

use clap::{Parser, Subcommand};

pub use exit::ExitStatus;
pub use output::{ColorChoice, Output};

/// Memory prints for PithTrain, added exactly, taken out to the byte.
///
/// memprints applies PithTrain's add-memory-prints skill to a checkout: seven groups of prints in
/// six files, from CUDA context and NCCL set-up to per-layer saved tensors and a first-step memory
/// snapshot. Every edit is planned in memory and checked (parses, stable under the repository's
/// ruff format settings, reversible) before all files are written at once.
#[derive(Debug, Parser)]
#[command(name = "memprints", version, about, long_about)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
    /// Colour: auto (a terminal, and NO_COLOR unset), always, never.
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN")]
    pub color: ColorChoice,
    /// Never page a long answer (a --dry-run diff), even at a terminal.
    #[arg(long, global = true)]
    pub no_pager: bool,
}

/// Every command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add the memory prints for a model.
    ///
    /// Exit code 0: written (or, with --dry-run, shown); 1: an error, nothing changed; 3: the
    /// files were written but the summary could not be (stdout failed, e.g. a full disk): stderr
    /// says how many files were written.
    #[command(after_help = "Examples:
  memprints add qwen3-moe --ranks 3,14 --dry-run
  memprints add qwen3-moe --ranks 0,8 --detail-layers 5,6 --snapshot-dir /scratch/snaps
  memprints add deepseek-v2 --script examples/pretrain_lm/deepseek-v2-lite/script.py --json")]
    Add(add::AddArgs),
    /// Take every memory print out again, keeping the edits you made since.
    ///
    /// Needs nothing but the tree. A file where you edited inside inserted code is left as it is
    /// (exit code 2) and the lines are named; the other files are still cleaned. Exit code 3: the
    /// files were restored but the summary could not be written (stdout failed, e.g. a full
    /// disk): stderr says how many files were written.
    #[command(after_help = "Examples:
  memprints remove --dry-run
  memprints remove
  memprints remove --repo ../pith-train --json")]
    Remove(remove::RemoveArgs),
    /// Show what instrumentation the tree holds.
    ///
    /// Exit code 0: fully instrumented; 1: clean; 2: partial or inconsistent, or an interrupted
    /// run left its journal or temp files; 75: another memprints (`add` or `remove`, pid named)
    /// is changing the tree right now, so what it shows is that run's work in progress: run
    /// `status` again once it has finished (`--json`: its pid and command under "busy").
    #[command(after_help = "Examples:
  memprints status
  memprints status --json
  memprints status --repo ../pith-train")]
    Status(status::StatusArgs),
    /// Show which pipeline stage, model chunk and global ranks host each layer, and which detail
    /// layers will print.
    #[command(after_help = "Examples:
  memprints plan deepseek-v2 --script examples/pretrain_lm/deepseek-v2-lite/script.py
  memprints plan qwen3-moe --ranks 0,8 --pp 2 --ep 4 --world 16
  memprints plan qwen3-moe --detail-layers 5,6 --pp 4 --json")]
    Plan(plan::PlanArgs),
    /// Show the whole job on an embedded sample tree (no PithTrain checkout needed): add the
    /// prints, show the diff and the status, take them out again and check every byte is back.
    #[command(after_help = "Examples:
  memprints demo
  memprints demo --keep /tmp/sample
  memprints demo --quiet")]
    Demo(demo::DemoArgs),
    /// Summarise torch.cuda.memory._snapshot() pickles: the peak, the stacks live at the peak,
    /// OOMs; `snapshot diff A B` compares two.
    #[command(after_help = "Examples:
  memprints snapshot /tmp/memory_snapshot_rank0_step0.pickle
  memprints snapshot /tmp --top 20 --format html --out snapshots.html
  memprints snapshot diff before.pickle after.pickle")]
    Snapshot(snapshot::SnapshotArgs),
    /// Turn the prints in training logs into a memory breakdown per rank.
    Report(Box<report::ReportArgs>),
    /// Fail when memory prints are in the given files (or the tree): a guard before committing.
    ///
    /// Exit code 0: none; 1: some, each file named with its groups. The pre-commit hook
    /// `memprints-check` (this repository's .pre-commit-hooks.yaml) runs it on staged Python files.
    #[command(after_help = "Examples:
  memprints check
  memprints check pithtrain/modules/training.py pithtrain/models/qwen3_moe.py
  pre-commit run memprints-check --all-files")]
    Check(check::CheckArgs),
    /// Print the add-memory-prints agent skill that calls memprints, or write it into the tree.
    #[command(after_help = "Examples:
  memprints skill
  memprints skill --write
  memprints skill --write --force --repo ../pith-train")]
    Skill(skill::SkillArgs),
    /// Print a shell completion script.
    #[command(after_help = "Examples:
  memprints completions bash > ~/.local/share/bash-completion/completions/memprints
  memprints completions zsh > ~/.zfunc/_memprints
  memprints completions fish > ~/.config/fish/completions/memprints.fish")]
    Completions(completions::CompletionsArgs),
    /// Print the man page, or write one per command into a folder.
    #[command(after_help = "Examples:
  memprints man | man -l -
  memprints man --out /usr/local/share/man/man1")]
    Man(man::ManArgs),
}

/// Runs one command.
pub fn run(cli: Cli, out: &mut Output) -> anyhow::Result<ExitStatus> {
    match cli.command {
        Command::Add(args) => add::run(args, out),
        Command::Remove(args) => remove::run(args, out),
        Command::Status(args) => status::run(args, out),
        Command::Plan(args) => plan::run(args, out),
        Command::Demo(args) => demo::run(args, out),
        Command::Snapshot(args) => snapshot::run(args, out),
        Command::Report(args) => report::run(*args, out),
        Command::Check(args) => check::run(args, out),
        Command::Skill(args) => skill::run(args, out),
        Command::Completions(args) => completions::run(args, out),
        Command::Man(args) => man::run(args, out),
    }
}

/// Prints the unified diff of each replacement (`--dry-run`), coloured at a terminal and
/// through the pager there.
fn print_diffs(
    replacements: &[memprints_commit::Replacement],
    out: &mut Output,
) -> std::io::Result<()> {
    use output::style;
    use std::io::Write;
    out.start_pager();
    for r in replacements {
        let diff = memprints_codemod::diff::unified(r.rel, r.expected, r.updated);
        if !out.stdout_color() {
            write!(out, "{diff}")?;
            continue;
        }
        for line in diff.split_inclusive('\n') {
            let (text, end) = match line.strip_suffix('\n') {
                Some(text) => (text, "\n"),
                None => (line, ""),
            };
            let style = if text.starts_with("+++") || text.starts_with("---") {
                style::HEADER
            } else if text.starts_with('+') {
                style::ADDED
            } else if text.starts_with('-') {
                style::REMOVED
            } else if text.starts_with("@@") {
                style::HUNK
            } else {
                anstyle::Style::new()
            };
            let painted = out.paint(style, text);
            write!(out, "{painted}{end}")?;
        }
    }
    Ok(())
}
