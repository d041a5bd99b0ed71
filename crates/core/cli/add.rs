//! `memprints add MODEL`: plans every group's prints in memory, checks them, and writes the six
//! files at once (or, with `--dry-run`, shows the diff).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::bail;
use clap::{Args, ValueEnum};

use super::args::{
    ParallelArgs, RepoArg, index_list, input_file, lock_and_recover, warn_missing_ranks,
};
use super::{ExitStatus, Output, print_diffs};
use memprints_codemod::instrument::status::{self, State};
use memprints_codemod::params::{self, Params, defaults};
use memprints_codemod::pithtrain::{ModelRef, Repo};
use memprints_codemod::printing::{self, DetailPrints};
use memprints_codemod::ruff;
use memprints_codemod::summary::{
    AddAction, AddShort, AddSummary, describe_existing, layer_choice_note,
};

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
    /// Model name: pithtrain/models/<model with - as _>.py, e.g. qwen3-moe; or an example
    /// variant, examples/pretrain_lm/<variant>/, e.g. qwen3-30b-a3b (its config.json's
    /// model_type names the model).
    pub model: String,
    /// Global ranks that print, comma-separated.
    #[arg(long, value_name = "LIST", default_value = defaults::RANKS)]
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
    #[arg(long, value_name = "DIR", default_value = defaults::SNAPSHOT_DIR)]
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
    /// Also list each file with its groups, the log labels the run will print, and how the
    /// detail layers were chosen.
    #[arg(long, short, conflicts_with = "quiet")]
    pub verbose: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub parallel: ParallelArgs,
}

/// `add`'s request: every argument checked and resolved once, the checkout opened once.
pub struct AddRequest {
    /// The checkout; each file is parsed once however many steps read it.
    pub repo: Repo,
    /// The model, resolved to its file (and example variant) once.
    pub model: ModelRef,
    /// `--ranks`.
    pub ranks: Vec<u32>,
    /// `--snapshot-dir`, checked.
    pub snapshot_dir: String,
    /// `--detail-layers`, when given.
    pub detail_layers: Option<Vec<u32>>,
    /// `--pp/--ep/--cp/--world` or `--script`, when given.
    pub parallel: Option<memprints_codemod::pithtrain::placement::Parallel>,
}

impl AddRequest {
    /// Checks every argument, before the tree is touched: a refused one leaves no trace in
    /// the tree, not even the lock.
    pub fn new(args: &AddArgs, out: &mut Output) -> anyhow::Result<Self> {
        let ranks = params::parse_index_list("--ranks", &args.ranks)?;
        let snapshot_dir = params::validate_snapshot_dir(&args.snapshot_dir)?;
        let detail_layers = index_list(args.detail_layers.as_deref(), "--detail-layers")?;
        if let Some(config) = &args.config {
            input_file("--config", config, CONFIG_HINT)?;
        }
        let parallel = args.parallel.resolve()?;
        let repo = args.repo.open()?;
        let model = repo.resolve_model(&args.model)?;
        if let Some((variant, model_type)) = &model.from_variant {
            out.note(format_args!(
                "{variant} is an example variant: its config.json says model_type \"{model_type}\", so the model is {} ({})",
                model.name, model.file
            ));
        }
        Ok(AddRequest {
            repo,
            model,
            ranks,
            snapshot_dir,
            detail_layers,
            parallel,
        })
    }
}

/// What to pass instead of a `--config` that is not a file.
pub const CONFIG_HINT: &str = "pass a Hugging Face config.json, e.g. examples/pretrain_lm/<variant>/config.json, or leave --config out to use the model's example config";

/// Runs `add`.
pub fn run(args: AddArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    memprints_commit::ignore_sigxfsz();
    let started = Instant::now();
    let request = AddRequest::new(&args, out)?;
    let AddRequest {
        repo,
        model,
        ranks,
        snapshot_dir,
        detail_layers: explicit,
        parallel,
    } = request;
    let lock = lock_and_recover(&repo.root, "add", out)?;
    memprints_codemod::check_version(&repo)?;
    let (detail_layers, choice, moe) =
        memprints_codemod::detail_layers(&repo, &model, explicit, args.config.clone())?;
    let params = Params {
        ranks,
        detail_layers,
        snapshot_dir,
    };

    let existing = status::scan(&repo)?;
    let (mut plan, action) = if existing.state == State::Absent {
        (
            memprints_codemod::plan_add(&repo, &model.name, &params)?,
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
                    let summary = AddSummary::skipped(repo.root.clone(), &model.name, &params);
                    writeln!(out, "{}", serde_json::to_string_pretty(&summary)?)?;
                } else if !args.quiet {
                    writeln!(out, "{what}; skipped, nothing changed")?;
                }
                return Ok(ExitStatus::Success);
            }
            OnExisting::Update => (
                memprints_codemod::plan_update(&repo, &model.name, &params)?,
                AddAction::Updated,
            ),
            _ => bail!(
                "{what}; pass --on-existing update (new ranks/layers/snapshot folder) or --on-existing skip, or run `memprints remove`"
            ),
        }
    };

    if let Some(note) = layer_choice_note(&choice, &params).filter(|_| args.verbose) {
        if args.json {
            out.note(note);
        } else {
            writeln!(out, "{note}")?;
        }
    }
    let layout = printing::layout(
        &repo,
        &model,
        parallel,
        args.parallel.script.as_deref(),
        args.parallel.world,
    );
    if let Ok(layout) = &layout {
        warn_missing_ranks(&params.ranks, Some(layout.world), out);
    }
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
                    "Dry run: {} files would change; nothing written",
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
    } else if args.verbose {
        write!(out, "{summary}")?;
        let variant = variant(&args, &model);
        let next = AddShort {
            summary: &summary,
            variant: variant.as_deref(),
        };
        writeln!(out, "{}", next.next_line())?;
    } else if !args.quiet {
        let variant = variant(&args, &model);
        let short = AddShort {
            summary: &summary,
            variant: variant.as_deref(),
        };
        write!(out, "{short}")?;
    } else if let Some(ruff) = summary.ruff.as_ref().filter(|r| r.has_warnings()) {
        out.stderr(ruff);
    }
    Ok(ExitStatus::Success)
}

/// The example variant the run launches: `--script`'s folder, else the model's example's.
fn variant(args: &AddArgs, model: &ModelRef) -> Option<String> {
    let from_script = args.parallel.script.as_deref().and_then(|script| {
        let folder = script.parent()?;
        let examples = folder.parent()?;
        (examples.file_name()? == "pretrain_lm")
            .then(|| folder.file_name()?.to_str().map(String::from))?
    });
    from_script.or_else(|| model.variant().map(String::from))
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
        "{what}.\nUpdate ranks/layers/snapshot folder [u], skip [s] or abort [a]? "
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
