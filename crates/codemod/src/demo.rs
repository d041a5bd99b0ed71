//! `demo`'s steps on the embedded sample tree ([`crate::sample`]): write it, add the prints for
//! `tiny-moe` on ranks 0 and 1 with pp=2, show what went into the model file and what `status`
//! reads, remove them, check every byte is back, and report on a bundled log of such a run
//! ([`LOG`]). Each step is a library call the command
//! line prints the result of, so the demo shows exactly what the commands do.

use std::path::Path;
use std::time::Instant;

use super::printing::{DetailPrints, Layout, LayoutSource};
use super::summary::{AddAction, AddSummary, RemoveSummary, layer_choice_note};
use crate::error::{Error, Result};
use crate::instrument::status::{self, Status};
use crate::params::Params;
use crate::pithtrain::Repo;
use crate::pithtrain::placement::Parallel;
use crate::ruff;
use memprints_commit::{self as write, Lock};

/// The sample's model.
pub const MODEL: &str = "tiny-moe";
/// Its file.
pub const MODEL_FILE: &str = "pithtrain/models/tiny_moe.py";
/// The printing ranks.
pub const RANKS: [u32; 2] = [0, 1];
/// The pipeline-parallel size the placement is checked for.
pub const PP: u32 = 2;
/// The name the demo gives its bundled log.
pub const LOG_NAME: &str = "tiny-moe_pp2.log";
/// A log of the sample with its prints in, as a pp=2 run on ranks 0 and 1 prints it (setup,
/// pipeline and detail-layer prints of layers 0 and 1, PithTrain's step lines; no snapshot
/// line, so that the report reads no file outside the demo's), for `demo` to
/// end with the report of. The sample cannot train, so its figures are written by hand, in the
/// shape of a small MoE's run: every line parses.
pub const LOG: &str = include_str!("demo_run.log");

/// What the demo's `add` step did.
#[derive(Debug)]
pub struct Added {
    /// How the detail layers were chosen.
    pub layer_note: Option<String>,
    /// Which ranks print each detail layer with pp=2.
    pub prints: DetailPrints,
    /// What was written, and the skill's ruff step.
    pub summary: AddSummary,
}

/// Writes the sample tree under `root` and opens it.
pub fn write_sample(root: &Path) -> Result<Repo> {
    crate::sample::write(root)?;
    Repo::locate(Some(root))
}

/// Adds the prints as `memprints add tiny-moe --ranks 0,1 --pp 2` does.
pub fn add(repo: &Repo) -> Result<Added> {
    let started = Instant::now();
    let lock = Lock::acquire(&repo.root, "add")?;
    super::check_version(repo)?;
    let model = repo.resolve_model(MODEL)?;
    let (detail_layers, choice, moe) = super::detail_layers(repo, &model, None, None)?;
    let params = Params {
        ranks: RANKS.to_vec(),
        detail_layers,
        ..Params::defaults()
    };
    let mut plan = super::plan_add(repo, MODEL, &params)?;
    let parallel = Parallel {
        pp: PP,
        ep: 1,
        cp: 1,
        world: PP,
    };
    let prints = DetailPrints::new(
        Ok(Layout::new(parallel, LayoutSource::Arguments, None)),
        moe.as_ref().map(|m| m.num_layers),
        &params.detail_layers,
        &params.ranks,
    )?;
    let ruff = ruff::before_write(repo, &mut plan);
    write::write_all(&lock, &plan.replacements(), &write::Options::default())?;
    let mut summary = AddSummary::of_plan(
        repo.root.clone(),
        &plan,
        AddAction::Added,
        true,
        started.elapsed(),
    );
    summary.ruff = Some(ruff);
    Ok(Added {
        layer_note: layer_choice_note(&choice, &params),
        prints,
        summary,
    })
}

/// The unified diff of the model file against the sample's.
pub fn model_diff(repo: &Repo) -> Result<String> {
    let path = repo.root.join(MODEL_FILE);
    let now = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    Ok(crate::diff::unified(MODEL_FILE, original(MODEL_FILE), &now))
}

/// What `status` reads in the tree.
pub fn status(repo: &Repo) -> Result<Status> {
    status::scan(repo)
}

/// Removes the prints as `memprints remove` does.
pub fn remove(repo: &Repo) -> Result<RemoveSummary> {
    let lock = Lock::acquire(&repo.root, "remove")?;
    let Some(removal) = super::plan_remove(repo, false)? else {
        return Ok(RemoveSummary::nothing(repo.root.clone()));
    };
    write::write_all(&lock, &removal.replacements(), &write::Options::default())?;
    Ok(RemoveSummary::of_removal(repo.root.clone(), &removal, true))
}

/// True when every file of the sample holds its original bytes again.
pub fn is_original(root: &Path) -> bool {
    crate::sample::FILES
        .iter()
        .all(|(rel, text)| std::fs::read_to_string(root.join(rel)).is_ok_and(|now| now == *text))
}

fn original(rel: &str) -> &'static str {
    crate::sample::FILES
        .iter()
        .find(|(file, _)| *file == rel)
        .map(|(_, text)| *text)
        .unwrap_or_default()
}
