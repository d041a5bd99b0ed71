//! `memprints plan MODEL`: which pipeline stage, model chunk and global ranks host each layer,
//! and which detail layers will print on the printing ranks, under the sizes given, else the
//! model's example launch script's, else pp=1.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;

use super::args::{ParallelArgs, RepoArg, index_list, input_file, warn_missing_ranks};
use super::{ExitStatus, Output};
use memprints_codemod::params;
use memprints_codemod::pithtrain::placement::Parallel;
use memprints_codemod::printing::{self, Layout, LayoutSource, Placement};

/// `plan`'s arguments.
#[derive(Debug, Clone, Args)]
pub struct PlanArgs {
    /// Model name, e.g. deepseek-v2, or an example variant, e.g. deepseek-v2-lite.
    pub model: String,
    /// Detail layers to check [default: as `add` picks them].
    #[arg(long, value_name = "LIST")]
    pub detail_layers: Option<String>,
    /// Ranks to check.
    #[arg(long, value_name = "LIST", default_value = params::defaults::RANKS)]
    pub ranks: String,
    /// Hugging Face config.json [default: the example config of the model's model_type].
    #[arg(long, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub repo: RepoArg,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub parallel: ParallelArgs,
}

/// Runs `plan`.
pub fn run(args: PlanArgs, out: &mut Output) -> anyhow::Result<ExitStatus> {
    let ranks = params::parse_index_list("--ranks", &args.ranks)?;
    let explicit = index_list(args.detail_layers.as_deref(), "--detail-layers")?;
    if let Some(config) = &args.config {
        input_file("--config", config, super::add::CONFIG_HINT)?;
    }
    let repo = args.repo.open()?;
    let model = repo.resolve_model(&args.model)?;
    if let Some((variant, model_type)) = &model.from_variant {
        out.note(format_args!(
            "{variant} is an example variant: its config.json says model_type \"{model_type}\", so the model is {}",
            model.name
        ));
    }
    let (detail_layers, _, moe) =
        memprints_codemod::detail_layers(&repo, &model, explicit, args.config.clone())?;
    let moe = moe.context("no config found: pass --config PATH")?;
    let layout = printing::layout(
        &repo,
        &model,
        args.parallel.resolve()?,
        args.parallel.script.as_deref(),
        args.parallel.world,
    )
    .unwrap_or_else(|_| {
        let one = Parallel {
            pp: 1,
            ep: 1,
            cp: 1,
            world: 1,
        };
        Layout::new(one, LayoutSource::Assumed, None)
    });
    warn_missing_ranks(&ranks, Some(layout.world), out);
    let placement = Placement::new(&model.name, &moe, layout, &detail_layers, &ranks)?;
    if args.json {
        // Through a `Value`, so the keys come out sorted as they always have.
        let json = serde_json::to_value(&placement)?;
        writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
        return Ok(ExitStatus::Success);
    }
    writeln!(out, "{}", placement.heading())?;
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header(Placement::HEADER);
    for row in placement.rows() {
        table.add_row([
            row.pp_rank,
            row.phase,
            row.stage,
            row.layers,
            row.global_ranks,
            row.detail.to_string(),
        ]);
    }
    writeln!(out, "{table}")?;
    writeln!(out, "{}", placement.detail_prints)?;
    Ok(ExitStatus::Success)
}
