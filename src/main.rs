//! The `memprints` command line: parses arguments, asks when it must, prints. The work is done by
//! the library (`memprints::ops` and friends).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand, ValueEnum};
use memprints::codemod::{self as ops, LayerChoice};
use memprints::instrument::AddPlan as Plan;
use memprints::instrument::status::{self, State};
use memprints::params::{self, Params};
use memprints::pithtrain::Repo;
use memprints::pithtrain::placement::{self, Parallel};
use memprints::ruff::{self, RuffOutcome};
use memprints::write::{self, Replacement};

/// Memory prints for PithTrain, added exactly, taken out to the byte.
///
/// memprints applies PithTrain's add-memory-prints skill to a checkout: seven groups of prints in
/// six files, from CUDA context and NCCL set-up to per-layer saved tensors and a first-step memory
/// snapshot. Every edit is planned in memory and checked (parses, stable under the repository's
/// ruff format settings, reversible) before all files are written at once.
#[derive(Parser)]
#[command(name = "memprints", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Add the memory prints for a model.
    ///
    /// Example: memprints add qwen3-moe --ranks 3,14 --dry-run
    Add(AddArgs),
    /// Take every memory print out again, keeping the edits you made since.
    ///
    /// Needs nothing but the tree. A file where you edited inside inserted code is left as it is
    /// (exit code 2) and the lines are named; the other files are still cleaned.
    Remove(RemoveArgs),
    /// Show what instrumentation the tree holds.
    ///
    /// Exit code 0: fully instrumented; 1: clean; 2: partial or inconsistent, or an interrupted
    /// run left its journal or temp files.
    Status(StatusArgs),
    /// Show which pipeline stage, model chunk and global ranks host each layer, and which detail
    /// layers will print.
    Plan(PlanArgs),
    /// Show the whole job on an embedded sample tree (no PithTrain checkout needed): add the
    /// prints, show the diff and the status, take them out again and check every byte is back.
    Demo(DemoArgs),
    /// Summarise torch.cuda.memory._snapshot() pickles: the peak, the stacks live at the peak,
    /// OOMs; `snapshot diff A B` compares two.
    Snapshot(memprints::snapshot::cli::SnapshotArgs),
    /// Turn the prints in training logs into a memory breakdown per rank.
    Report(memprints::report::cli::ReportArgs),
}

#[derive(Args)]
struct RepoArg {
    /// The PithTrain checkout [default: the current folder or the nearest parent whose
    /// pyproject.toml names the project `pithtrain`].
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
}

#[derive(Args)]
struct ParallelArgs {
    /// Pipeline-parallel size, to check where detail layers print.
    #[arg(long)]
    pp: Option<u32>,
    /// Expert-parallel size.
    #[arg(long, default_value_t = 1)]
    ep: u32,
    /// Context-parallel size.
    #[arg(long, default_value_t = 1)]
    cp: u32,
    /// World size (number of GPUs) [default: pp * ep * cp].
    #[arg(long)]
    world: Option<u32>,
    /// Read the parallel sizes from a launch script, e.g. examples/pretrain_lm/<variant>/script.py.
    #[arg(long, value_name = "PATH", conflicts_with = "pp")]
    script: Option<PathBuf>,
}

impl ParallelArgs {
    fn resolve(&self) -> anyhow::Result<Option<Parallel>> {
        if let Some(script) = &self.script {
            let text =
                std::fs::read_to_string(script).with_context(|| format!("{}", script.display()))?;
            return Ok(Some(Parallel::from_script(&text, self.world)));
        }
        Ok(self.pp.map(|pp| Parallel {
            pp,
            ep: self.ep,
            cp: self.cp,
            world: self.world.unwrap_or(pp * self.ep * self.cp),
        }))
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum OnExisting {
    /// Ask on the terminal (the default when stdin is one).
    Ask,
    /// Change only the ranks, detail layers and snapshot folder.
    Update,
    /// Leave the tree as it is.
    Skip,
    /// Stop with an error (the default without a terminal).
    Abort,
}

#[derive(Args)]
struct AddArgs {
    /// Model name: pithtrain/models/<model with - as _>.py, e.g. qwen3-moe.
    model: String,
    /// Global ranks that print, comma-separated.
    #[arg(long, value_name = "LIST", default_value = "0")]
    ranks: String,
    /// Layers with per-stage detail [default: the first MoE layer and the next, read from the
    /// model's MoE rule and its config].
    #[arg(long, value_name = "LIST")]
    detail_layers: Option<String>,
    /// Hugging Face config.json for the MoE rule [default: the examples/pretrain_lm/*/config.json
    /// of the model's model_type].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Folder the memory snapshot pickles are written to.
    #[arg(long, value_name = "DIR", default_value = "/tmp")]
    snapshot_dir: String,
    /// What to do when the tree is already instrumented.
    #[arg(long, value_enum)]
    on_existing: Option<OnExisting>,
    /// Print the unified diff and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Skip the skill's last step (`ruff check --fix` and `ruff format` on the changed files);
    /// memprints has already checked in-process that they are ruff-formatted.
    #[arg(long)]
    no_ruff: bool,
    #[command(flatten)]
    repo: RepoArg,
    #[command(flatten)]
    parallel: ParallelArgs,
}

#[derive(Args)]
struct RemoveArgs {
    /// Print the unified diff and write nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    repo: RepoArg,
}

#[derive(Args)]
struct StatusArgs {
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    repo: RepoArg,
}

#[derive(Args)]
struct DemoArgs {
    /// Write the sample tree here and keep it (instrumented) instead of using a temporary folder.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
}

#[derive(Args)]
struct PlanArgs {
    /// Model name, e.g. deepseek-v2.
    model: String,
    /// Detail layers to check [default: as `add` picks them].
    #[arg(long, value_name = "LIST")]
    detail_layers: Option<String>,
    /// Ranks to check.
    #[arg(long, value_name = "LIST", default_value = "0")]
    ranks: String,
    /// Hugging Face config.json [default: the example config of the model's model_type].
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    repo: RepoArg,
    #[command(flatten)]
    parallel: ParallelArgs,
}

fn main() -> ExitCode {
    write::ignore_sigxfsz();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Add(args) => add(args),
        Command::Remove(args) => remove(args),
        Command::Status(args) => status_cmd(args),
        Command::Plan(args) => plan_cmd(args),
        Command::Demo(args) => demo(args),
        Command::Report(args) => memprints::report::cli::execute(args),
        Command::Snapshot(args) => memprints::snapshot::cli::execute(args).map(|code| code as u8),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("memprints: error: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn list(text: &Option<String>, what: &'static str) -> anyhow::Result<Option<Vec<u32>>> {
    Ok(match text {
        Some(t) => Some(params::parse_index_list(what, t)?),
        None => None,
    })
}

fn add(args: AddArgs) -> anyhow::Result<u8> {
    let started = Instant::now();
    let repo = Repo::locate(args.repo.repo.as_deref())?;
    let lock = lock_and_recover(&repo.root, "add")?;
    ops::check_version(&repo)?;
    let ranks = params::parse_index_list("--ranks", &args.ranks)?;
    let snapshot_dir = params::validate_snapshot_dir(&args.snapshot_dir)?;
    let explicit = list(&args.detail_layers, "--detail-layers")?;
    let (detail_layers, choice, moe) =
        ops::detail_layers(&repo, &args.model, explicit, args.config.clone())?;
    let params = Params {
        ranks,
        detail_layers,
        snapshot_dir,
    };

    let existing = status::scan(&repo)?;
    let plan = if existing.state == State::Absent {
        ops::plan_add(&repo, &args.model, &params)?
    } else {
        let what = describe_existing(&existing);
        let choice = match args.on_existing {
            Some(choice) => choice,
            None if std::io::stdin().is_terminal() => OnExisting::Ask,
            None => OnExisting::Abort,
        };
        match resolve_existing(choice, &what)? {
            OnExisting::Skip => {
                println!("memprints: {what}; skipped, nothing changed");
                return Ok(0);
            }
            OnExisting::Update => ops::plan_update(&repo, &args.model, &params)?,
            _ => bail!(
                "{what}; pass --on-existing update (new ranks/layers/snapshot folder) or --on-existing skip, or run `memprints remove`"
            ),
        }
    };

    if let LayerChoice::AllMoe = &choice {
        println!(
            "detail layers (0, 1): the model has no MoE-vs-dense rule, so every layer is MoE (no config found to count them)"
        );
    }
    if let LayerChoice::Auto(moe) = &choice {
        let rule = match &moe.rule {
            Some(rule) => format!("MoE where `{rule}`"),
            None => "every layer is MoE".to_string(),
        };
        println!(
            "detail layers {}: the first MoE layer and the next ({rule}; {}, {} layers)",
            params.layers_literal(),
            moe.config.display(),
            moe.num_layers
        );
    }
    if let (Some(parallel), Some(moe)) = (args.parallel.resolve()?, &moe) {
        warn_silent_layers(moe.num_layers, &parallel, &params)?;
    }

    let replacements = plan.replacements();
    if args.dry_run {
        print_diffs(&replacements);
        println!(
            "memprints: dry run, {} files would change; nothing written",
            replacements.len()
        );
        return Ok(0);
    }
    write::write_all(&lock, &replacements, &write::Options::default())?;
    let elapsed = started.elapsed();
    print_summary(&repo, &plan, elapsed);
    if args.no_ruff {
        return Ok(0);
    }
    let changed: Vec<_> = plan
        .files
        .iter()
        .filter(|f| f.updated != f.original)
        .collect();
    let rels: Vec<String> = changed
        .iter()
        .filter(|f| f.was_formatted)
        .map(|f| f.rel.clone())
        .collect();
    for file in changed.iter().filter(|f| !f.was_formatted) {
        println!(
            "note: {} was not ruff-formatted before; skipped the ruff step on it so your own lines stay as they were",
            file.rel
        );
    }
    report_ruff(&repo, &rels);
    Ok(0)
}

/// Takes the tree's lock for the whole command and rolls back what an interrupted run left,
/// saying so in one line.
fn lock_and_recover(root: &Path, command: &str) -> anyhow::Result<write::Lock> {
    let lock = write::Lock::acquire(root, command)?;
    if let Some(note) = lock.took_over() {
        eprintln!("memprints: note: {note}");
    }
    if let Some(recovered) = write::recover(&lock)? {
        println!("memprints: {recovered}");
    }
    Ok(lock)
}

fn print_diffs(replacements: &[Replacement]) {
    for r in replacements {
        print!("{}", memprints::diff::unified(r.rel, r.expected, r.updated));
    }
}

fn describe_existing(status: &status::Status) -> String {
    let model = if status.models.is_empty() {
        "an unknown model".into()
    } else {
        status.models.join(", ")
    };
    let fmt = |v: &Option<Vec<u32>>| {
        v.as_ref().map_or("?".into(), |v| {
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        })
    };
    format!(
        "the tree is already instrumented ({}: model {model}, ranks {}, detail layers {}, snapshots in {})",
        match status.state {
            State::Complete => "complete",
            _ => "partial",
        },
        fmt(&status.ranks),
        fmt(&status.detail_layers),
        status.snapshot_dir.as_deref().unwrap_or("?")
    )
}

fn resolve_existing(choice: OnExisting, what: &str) -> anyhow::Result<OnExisting> {
    if choice != OnExisting::Ask {
        return Ok(choice);
    }
    print!("memprints: {what}.\nUpdate ranks/layers/snapshot folder [u], skip [s] or abort [a]? ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(match answer.trim().to_lowercase().as_str() {
        "u" | "update" => OnExisting::Update,
        "s" | "skip" => OnExisting::Skip,
        _ => OnExisting::Abort,
    })
}

fn warn_silent_layers(num_layers: u32, parallel: &Parallel, params: &Params) -> anyhow::Result<()> {
    let chunks = placement::chunks(num_layers, parallel)?;
    for (layer, printers) in
        placement::detail_printers(&chunks, &params.detail_layers, &params.ranks)
    {
        if printers.is_empty() {
            let mut host_layers: Vec<u32> = chunks
                .iter()
                .filter(|c| c.profiled && params.ranks.iter().any(|r| c.global_ranks.contains(r)))
                .flat_map(|c| c.layers.iter().copied())
                .collect();
            host_layers.sort_unstable();
            host_layers.dedup();
            let hosts: Vec<String> = host_layers.iter().map(u32::to_string).collect();
            let ranks_for_layer: Vec<String> = chunks
                .iter()
                .filter(|c| c.profiled && c.layers.contains(&layer))
                .map(|c| c.global_ranks[0].to_string())
                .collect();
            eprintln!(
                "memprints: warning: detail layer {layer} will print nowhere with pp={} ep={} cp={} world={} and ranks {}: \
                 its chunk is not profiled on those ranks. Layers that print on them: {}; ranks where layer {layer} prints: {}",
                parallel.pp,
                parallel.ep,
                parallel.cp,
                parallel.world,
                params.ranks_literal(),
                if hosts.is_empty() {
                    "none".into()
                } else {
                    hosts.join(",")
                },
                if ranks_for_layer.is_empty() {
                    "none".into()
                } else {
                    ranks_for_layer.join(",")
                },
            );
        }
    }
    Ok(())
}

fn print_summary(repo: &Repo, plan: &Plan, elapsed: std::time::Duration) {
    println!(
        "memprints: instrumented {} in {} ({} files, {:.1} ms): ranks {}, detail layers {}, snapshots in {}",
        plan.model,
        repo.root.display(),
        plan.files
            .iter()
            .filter(|f| f.updated != f.original)
            .count(),
        elapsed.as_secs_f64() * 1e3,
        plan.params.ranks_literal(),
        plan.params.layers_literal(),
        plan.params.snapshot_dir,
    );
    let mut labels = Vec::new();
    for file in &plan.files {
        println!("  {}", file.rel);
        for placed in &file.placed {
            println!("    group {:<6} {}", placed.group, placed.what);
            labels.extend(placed.labels.iter().cloned());
        }
    }
    println!("log labels you will see:");
    for label in labels {
        println!("    {label}");
    }
    println!("take it out again with: memprints remove");
}

fn report_ruff(repo: &Repo, files: &[String]) {
    match ruff::run(&repo.root, files) {
        RuffOutcome::Missing => {
            println!("note: ruff is not on PATH; skipped `ruff check --fix` and `ruff format`")
        }
        RuffOutcome::Ran { changed, failures } => {
            if changed.is_empty() && failures.is_empty() {
                println!("ruff check --fix and ruff format: no changes");
            }
            for file in changed {
                println!(
                    "warning: ruff changed {file} after memprints wrote it (please report this)"
                );
            }
            for failure in failures {
                println!("warning: {failure}");
            }
        }
    }
}

fn remove(args: RemoveArgs) -> anyhow::Result<u8> {
    let repo = Repo::locate(args.repo.repo.as_deref())?;
    let lock = lock_and_recover(&repo.root, "remove")?;
    let Some(plan) = ops::plan_remove(&repo)? else {
        println!("memprints: the tree holds no memory prints; nothing to remove");
        return Ok(0);
    };
    let replacements = plan.replacements();
    if args.dry_run {
        print_diffs(&replacements);
    } else {
        write::write_all(&lock, &replacements, &write::Options::default())?;
    }
    let verb = if args.dry_run {
        "would restore"
    } else {
        "restored"
    };
    for file in &replacements {
        println!("memprints: {verb} {}", file.rel);
    }
    for file in plan.files.iter().filter(|f| f.left_alone.is_some()) {
        eprintln!(
            "memprints: left {} as it is: {}",
            file.rel,
            file.left_alone
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }
    Ok(if plan.is_partial() { 2 } else { 0 })
}

fn status_cmd(args: StatusArgs) -> anyhow::Result<u8> {
    let repo = Repo::locate(args.repo.repo.as_deref())?;
    let status = status::scan(&repo)?;
    let pending = write::pending(&repo.root);
    if args.json {
        let mut json = serde_json::to_value(&status)?;
        if let Some(pending) = &pending {
            json["interrupted"] = pending.to_string().into();
        }
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        if let Some(pending) = &pending {
            println!("memprints: {pending}");
        }
        let state = match status.state {
            State::Complete => "instrumented",
            State::Partial => "partially instrumented",
            State::Absent if pending.is_some() => "clean files, but an interrupted run is pending",
            State::Absent => "clean",
        };
        println!("{}: {state}", repo.root.display());
        if status.state != State::Absent {
            println!("{}", describe_existing(&status));
            for file in &status.files {
                for g in &file.groups {
                    println!(
                        "  {:<36} group {:<6} {:?} ({}/{})",
                        file.path, g.group, g.state, g.found, g.expected
                    );
                }
            }
        }
    }
    Ok(match status.state {
        _ if pending.is_some() => 2,
        State::Complete => 0,
        State::Absent => 1,
        State::Partial => 2,
    })
}

fn plan_cmd(args: PlanArgs) -> anyhow::Result<u8> {
    let repo = Repo::locate(args.repo.repo.as_deref())?;
    let ranks = params::parse_index_list("--ranks", &args.ranks)?;
    let explicit = list(&args.detail_layers, "--detail-layers")?;
    let (detail_layers, _, moe) =
        ops::detail_layers(&repo, &args.model, explicit, args.config.clone())?;
    let moe = moe.context("no config found: pass --config PATH")?;
    let parallel = args.parallel.resolve()?.unwrap_or(Parallel {
        pp: 1,
        ep: 1,
        cp: 1,
        world: 1,
    });
    let chunks = placement::chunks(moe.num_layers, &parallel)?;
    let printers = placement::detail_printers(&chunks, &detail_layers, &ranks);
    if args.json {
        let json = serde_json::json!({
            "model": args.model, "num_layers": moe.num_layers, "moe_layers": moe.moe, "rule": moe.rule,
            "config": moe.config, "pp": parallel.pp, "ep": parallel.ep, "cp": parallel.cp, "world": parallel.world,
            "chunks": chunks,
            "detail_layers": printers.iter().map(|(l, r)| serde_json::json!({"layer": l, "printing_ranks": r})).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
        return Ok(0);
    }
    println!(
        "{}: {} layers ({}), MoE rule `{}`; pp={} ep={} cp={} world={}",
        args.model,
        moe.num_layers,
        moe.config.display(),
        moe.rule.as_deref().unwrap_or("every layer is MoE"),
        parallel.pp,
        parallel.ep,
        parallel.cp,
        parallel.world
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "pp rank",
        "phase",
        "stage",
        "layers",
        "global ranks",
        "per-layer detail",
    ]);
    for c in &chunks {
        let layers = match (c.layers.first(), c.layers.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            _ => "-".into(),
        };
        let ranks = match (c.global_ranks.first(), c.global_ranks.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            _ => "-".into(),
        };
        let detail = if c.profiled {
            "profiled"
        } else {
            "not profiled (no Step 1 i=1 on the last pp rank)"
        };
        table.add_row([
            c.pp_rank.to_string(),
            c.phase.to_string(),
            c.stage.to_string(),
            layers,
            ranks,
            detail.to_string(),
        ]);
    }
    println!("{table}");
    for (layer, ranks_printing) in printers {
        if ranks_printing.is_empty() {
            let ranks: Vec<String> = ranks.iter().map(u32::to_string).collect();
            println!(
                "detail layer {layer}: prints on none of ranks {}",
                ranks.join(",")
            );
        } else {
            println!("detail layer {layer}: prints on ranks {:?}", ranks_printing);
        }
    }
    Ok(0)
}

fn demo(args: DemoArgs) -> anyhow::Result<u8> {
    let temp = tempfile::tempdir()?;
    let root = args
        .keep
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    memprints::sample::write(&root)?;
    println!(
        "== sample PithTrain look-alike written to {}\n",
        root.display()
    );
    let repo_arg = || RepoArg {
        repo: Some(root.clone()),
    };
    let parallel = ParallelArgs {
        pp: Some(2),
        ep: 1,
        cp: 1,
        world: None,
        script: None,
    };
    println!("== memprints add tiny-moe --ranks 0,1 --pp 2");
    add(AddArgs {
        model: "tiny-moe".into(),
        ranks: "0,1".into(),
        detail_layers: None,
        config: None,
        snapshot_dir: "/tmp".into(),
        on_existing: None,
        dry_run: false,
        no_ruff: false,
        repo: repo_arg(),
        parallel,
    })?;
    let model = "pithtrain/models/tiny_moe.py";
    let original = memprints::sample::FILES
        .iter()
        .find(|(rel, _)| *rel == model)
        .map(|(_, t)| *t)
        .unwrap_or_default();
    let now = std::fs::read_to_string(root.join(model))?;
    println!("\n== what went into {model}:");
    print!("{}", memprints::diff::unified(model, original, &now));
    println!("\n== memprints status");
    status_cmd(StatusArgs {
        json: false,
        repo: repo_arg(),
    })?;
    if args.keep.is_some() {
        println!(
            "\n== kept the instrumented tree in {}; `memprints remove --repo {0}` takes it out",
            root.display()
        );
        return Ok(0);
    }
    println!("\n== memprints remove");
    remove(RemoveArgs {
        dry_run: false,
        repo: repo_arg(),
    })?;
    let identical = memprints::sample::FILES
        .iter()
        .all(|(rel, text)| std::fs::read_to_string(root.join(rel)).is_ok_and(|now| now == *text));
    if !identical {
        bail!("the sample tree differs from the original after remove");
    }
    println!("\n== every file of the sample is back, byte for byte");
    Ok(0)
}
