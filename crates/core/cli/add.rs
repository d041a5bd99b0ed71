//! `memprints add MODEL`: plans every group's prints in memory, checks them, and writes the six
//! files at once (or, with `--dry-run`, shows the diff).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use clap::{Args, ValueEnum};

use super::args::{ParallelArgs, RepoArg, index_list, lock_and_recover};
use super::{ExitStatus, Output, print_diffs};
use memprints_codemod::instrument::status::{self, State};
use memprints_codemod::params::{self, Params};
use memprints_codemod::printing::{self, DetailPrints};
use memprints_codemod::ruff;
use memprints_codemod::summary::{AddAction, AddSummary, describe_existing, layer_choice_note};

/// What `add` does on an instrumented tree.
#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum OnExisting {
    /// Ask on the terminal (the default when stdin is one).
    Ask,
    /// Change only the ranks, detail layers and snapshot folder.
    Update,
    /// Leave the tree as it is.
    Skip,
    /// Stop with an error (the default without a terminal).
    Abort,
}

/// `add`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct AddArgs {
    /// Model name: pithtrain/models/<model with - as _>.py, e.g. qwen3-moe.
    pub model: String,
    /// Global ranks that print, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "0")]
    pub ranks: String,
    /// Layers with per-stage detail [default: the first MoE layer and the next, read from the
    /// model's MoE rule and its config].
    #[arg(long, value_name = "LIST")]
    pub detail_layers: Option<String>,
    /// Hugging Face config.json for the MoE rule [default: the examples/pretrain_lm/*/config.json
    /// of the model's model_type].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Folder the memory snapshot pickles are written to.
    #[arg(long, value_name = "DIR", default_value = "/tmp")]
    pub snapshot_dir: String,
    /// What to do when the tree is already instrumented.
    #[arg(long, value_enum)]
    pub on_existing: Option<OnExisting>,
    /// Print the unified diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Skip the skill's last step (`ruff check --fix` and `ruff format` on the changed files,
    /// kept only where they change inserted lines; what ruff reports on your own lines is named
    /// and left to you); memprints has already checked in-process that they are ruff-formatted.
    #[arg(long)]
    pub no_ruff: bool,
    /// Print what was written as JSON (see the README's "JSON output"); notes go to stderr.
    #[arg(long)]
    pub json: bool,
    /// Print no summary or notes; warnings and errors still go to stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub parallel: ParallelArgs,
}

/// Runs `add`.
pub fn run(args: AddArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    memprints_commit::ignore_sigxfsz();
    let started = Instant::now();
    // Arguments first: a refused one leaves no trace in the tree, not even the lock.
    let ranks = params::parse_index_list("--ranks", &args.ranks)?;
    let snapshot_dir = params::validate_snapshot_dir(&args.snapshot_dir)?;
    let explicit = index_list(args.detail_layers.as_deref(), "--detail-layers")?;
    let parallel = args.parallel.resolve()?;
    let repo = args.repo.open()?;
    if let Err(invalid @ memprints_codemod::Error::InvalidArgument { .. }) =
        repo.model_file(&args.model)
    {
        return Err(invalid.into());
    }
    let lock = lock_and_recover(&repo.root, "add", out)?;
    memprints_codemod::check_version(&repo)?;
    let (detail_layers, choice, moe) =
        memprints_codemod::detail_layers(&repo, &args.model, explicit, args.config.clone())?;
    let params = Params {
        ranks,
        detail_layers,
        snapshot_dir,
    };

    let existing = status::scan(&repo)?;
    let (mut plan, action) = if existing.state == State::Absent {
        (
            memprints_codemod::plan_add(&repo, &args.model, &params)?,
            AddAction::Added,
        )
    } else {
        let what = describe_existing(&existing);
        let choice = match args.on_existing {
            Some(choice) => choice,
            None if std::io::stdin().is_terminal() => OnExisting::Ask,
            None => OnExisting::Abort,
        };
        match resolve_existing(choice, &what, out)? {
            OnExisting::Skip => {
                if args.json {
                    let summary = AddSummary::skipped(repo.root.clone(), &args.model, &params);
                    writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
                } else if !args.quiet {
                    writeln!(out, "memprints: {what}; skipped, nothing changed")?;
                }
                return Ok(ExitStatus::Success);
            }
            OnExisting::Update => (
                memprints_codemod::plan_update(&repo, &args.model, &params)?,
                AddAction::Updated,
            ),
            _ => bail!(
                "{what}; pass --on-existing update (new ranks/layers/snapshot folder) or --on-existing skip, or run `memprints remove`"
            ),
        }
    };

    if let Some(note) = layer_choice_note(&choice, &params).filter(|_| !args.quiet) {
        if args.json {
            out.note(note);
        } else {
            writeln!(out, "{note}")?;
        }
    }
    let layout = printing::layout(
        &repo,
        &args.model,
        parallel,
        args.parallel.script.as_deref(),
        args.parallel.world,
    );
    let prints = DetailPrints::new(
        layout,
        moe.as_ref().map(|m| m.num_layers),
        &params.detail_layers,
        &params.ranks,
    )?;
    if prints.has_silent_layer() {
        out.warning(&prints);
    } else if args.json {
        out.note(&prints);
    } else if !args.quiet {
        writeln!(out, "{prints}")?;
    }

    if args.dry_run {
        let replacements = plan.replacements();
        let mut summary =
            AddSummary::of_plan(repo.root.clone(), &plan, action, false, started.elapsed());
        summary.detail_prints = Some(prints);
        if args.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
        } else {
            print_diffs(&replacements, out)?;
            if !args.quiet {
                writeln!(
                    out,
                    "memprints: dry run, {} files would change; nothing written",
                    replacements.len()
                )?;
            }
        }
        return Ok(ExitStatus::Success);
    }
    let ruff = (!args.no_ruff).then(|| ruff::before_write(&repo, &mut plan));
    let replacements = plan.replacements();
    memprints_commit::write_all(&lock, &replacements, &memprints_commit::Options::default())?;
    out.wrote_files(replacements.len());
    let mut summary =
        AddSummary::of_plan(repo.root.clone(), &plan, action, true, started.elapsed());
    summary.detail_prints = Some(prints);
    summary.ruff = ruff;
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
    } else if !args.quiet {
        write!(out, "{summary}")?;
    } else if let Some(ruff) = summary.ruff.as_ref().filter(|r| r.has_warnings()) {
        out.stderr(ruff);
    }
    Ok(ExitStatus::Success)
}

/// `choice`, or for `ask` the user's answer on the terminal.
fn resolve_existing(
    choice: OnExisting,
    what: &str,
    out: &mut Output,
) -> anyhow::Result<OnExisting> {
    if choice != OnExisting::Ask {
        return Ok(choice);
    }
    write!(
        out,
        "memprints: {what}.\nUpdate ranks/layers/snapshot folder [u], skip [s] or abort [a]? "
    )?;
    out.flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(match answer.trim().to_lowercase().as_str() {
        "u" | "update" => OnExisting::Update,
        "s" | "skip" => OnExisting::Skip,
        _ => OnExisting::Abort,
    })
}
