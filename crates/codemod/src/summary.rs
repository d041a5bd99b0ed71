//! What `add` and `remove` did, and what a tree already holds, in the two forms a command line
//! shows them: text a person reads (`Display`) and JSON a program reads (`--json`, serialised
//! with serde).
//!
//! The JSON shapes are a stable interface (README, "JSON output"): fields may be added, none is
//! renamed or removed. Paths in `files` are relative to `root`.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::printing::DetailPrints;
use super::{LayerChoice, Removal};
use crate::instrument::AddPlan;
use crate::instrument::status::{State, Status};
use crate::params::Params;
use crate::ruff::RuffStep;

/// What `add` did or, with `--dry-run`, would do.
#[derive(Debug, Clone, Serialize)]
pub struct AddSummary {
    /// The model, as the user typed it.
    pub model: String,
    /// The checkout.
    pub root: PathBuf,
    /// `added` (a clean tree), `updated` (`--on-existing update`) or `skipped`
    /// (`--on-existing skip`: nothing planned).
    pub action: AddAction,
    /// Whether the files were written (false for `--dry-run` and `skipped`).
    pub written: bool,
    /// The printing ranks.
    pub ranks: Vec<u32>,
    /// The detail layers.
    pub detail_layers: Vec<u32>,
    /// Where the memory snapshots go.
    pub snapshot_dir: String,
    /// The six target files, in the skill's order, with the groups placed in each.
    pub files: Vec<FileSummary>,
    /// The log labels the run will print.
    pub labels: Vec<String>,
    /// The skill's ruff step on the written files; `null` when it did not run (`--no-ruff`,
    /// `--dry-run`, `skipped`).
    pub ruff: Option<RuffStep>,
    /// Which ranks will print each detail layer under the layout `add` knows (its one line,
    /// as facts); `null` when `add` skipped the tree.
    pub detail_prints: Option<DetailPrints>,
    /// How long planning, checking and writing took (text only: not part of the JSON).
    #[serde(skip)]
    pub elapsed: Duration,
}

/// How `add` treated the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AddAction {
    /// Instrumented a clean tree.
    Added,
    /// Re-instrumented an instrumented tree with new ranks, layers or snapshot folder.
    Updated,
    /// Left an instrumented tree as it was.
    Skipped,
}

/// One target file of an `add`.
#[derive(Debug, Clone, Serialize)]
pub struct FileSummary {
    /// Path relative to the root.
    pub path: String,
    /// Whether its bytes change.
    pub changed: bool,
    /// The groups placed in it, in the skill's order.
    pub groups: Vec<GroupSummary>,
}

/// One group placed in a file.
#[derive(Debug, Clone, Serialize)]
pub struct GroupSummary {
    /// The skill's id: `1A` … `7`.
    pub id: &'static str,
    /// Where its code went, in a few words.
    pub what: String,
}

impl AddSummary {
    /// The summary of `plan`, written (`written`) or not.
    pub fn of_plan(
        root: PathBuf,
        plan: &AddPlan,
        action: AddAction,
        written: bool,
        elapsed: Duration,
    ) -> Self {
        let files = plan
            .files
            .iter()
            .map(|f| FileSummary {
                path: f.rel.clone(),
                changed: f.updated != f.original,
                groups: f
                    .placed
                    .iter()
                    .map(|p| GroupSummary {
                        id: p.group,
                        what: p.what.clone(),
                    })
                    .collect(),
            })
            .collect();
        let labels = plan
            .files
            .iter()
            .flat_map(|f| f.placed.iter().flat_map(|p| p.labels.iter().cloned()))
            .collect();
        AddSummary {
            model: plan.model.clone(),
            root,
            action,
            written,
            ranks: plan.params.ranks.clone(),
            detail_layers: plan.params.detail_layers.clone(),
            snapshot_dir: plan.params.snapshot_dir.clone(),
            files,
            labels,
            ruff: None,
            detail_prints: None,
            elapsed,
        }
    }

    /// The summary of an `add` that left an instrumented tree alone.
    pub fn skipped(root: PathBuf, model: &str, params: &Params) -> Self {
        AddSummary {
            model: model.to_string(),
            root,
            action: AddAction::Skipped,
            written: false,
            ranks: params.ranks.clone(),
            detail_layers: params.detail_layers.clone(),
            snapshot_dir: params.snapshot_dir.clone(),
            files: Vec::new(),
            labels: Vec::new(),
            ruff: None,
            detail_prints: None,
            elapsed: Duration::ZERO,
        }
    }

    fn params(&self) -> Params {
        Params {
            ranks: self.ranks.clone(),
            detail_layers: self.detail_layers.clone(),
            snapshot_dir: self.snapshot_dir.clone(),
        }
    }
}

/// The summary a written `add` prints: the parameters, each file with its groups, the log
/// labels, how to take it out, and the ruff step's lines.
impl fmt::Display for AddSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params = self.params();
        writeln!(
            f,
            "memprints: instrumented {} in {} ({} files, {:.1} ms): ranks {}, detail layers {}, snapshots in {}",
            self.model,
            self.root.display(),
            self.files.iter().filter(|file| file.changed).count(),
            self.elapsed.as_secs_f64() * 1e3,
            params.ranks_literal(),
            params.layers_literal(),
            self.snapshot_dir,
        )?;
        for file in &self.files {
            writeln!(f, "  {}", file.path)?;
            for group in &file.groups {
                writeln!(f, "    group {:<6} {}", group.id, group.what)?;
            }
        }
        writeln!(f, "log labels you will see:")?;
        for label in &self.labels {
            writeln!(f, "    {label}")?;
        }
        writeln!(f, "take it out again with: memprints remove")?;
        match &self.ruff {
            Some(ruff) => write!(f, "{ruff}"),
            None => Ok(()),
        }
    }
}

/// What a written `add` prints without `--verbose`, in the manner of ruff and uv: one line of
/// what changed, one of the next steps (the launch and the `memprints report` command for the
/// log PithTrain will write), and the ruff step's line only when it has something to say. Where
/// the detail layers print is the caller's line ([`DetailPrints`]).
pub struct AddShort<'a> {
    /// What was written.
    pub summary: &'a AddSummary,
    /// The example variant the run launches (`qwen3-30b-a3b`), when one is known.
    pub variant: Option<&'a str>,
}

impl AddShort<'_> {
    /// The log `examples/pretrain_lm/launch.sh <variant>` tees node 0's output into.
    pub fn log_path(&self) -> String {
        format!(
            "logging/pretrain_lm/{}_node0.log",
            self.variant.unwrap_or("<variant>")
        )
    }

    /// `Next: launch …, then `memprints report …`; `memprints remove` takes the prints out`.
    pub fn next_line(&self) -> String {
        format!(
            "Next: launch {}, then `memprints report {}`; `memprints remove` takes the prints out",
            self.launch(),
            self.log_path(),
        )
    }

    /// The launch command: `launch.sh` when the checkout has it.
    fn launch(&self) -> String {
        let launch = format!("{}/launch.sh", crate::pithtrain::EXAMPLES_DIR);
        match self.variant {
            Some(variant) if self.summary.root.join(&launch).is_file() => {
                format!("`bash {launch} {variant}`")
            }
            _ => "the training".into(),
        }
    }
}

impl fmt::Display for AddShort<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let summary = self.summary;
        let params = summary.params();
        let files = summary.files.iter().filter(|file| file.changed).count();
        writeln!(
            f,
            "{} memory prints for {} to {files} file{} in {:.1} s: ranks {}, detail layers {}, snapshots in {}",
            match summary.action {
                AddAction::Updated => "Updated",
                _ => "Added",
            },
            summary.model,
            if files == 1 { "" } else { "s" },
            summary.elapsed.as_secs_f64(),
            params.ranks_literal(),
            params.layers_literal(),
            summary.snapshot_dir,
        )?;
        writeln!(f, "{} (--verbose: files and log labels)", self.next_line())?;
        match &summary.ruff {
            Some(ruff) if ruff.says_something() => write!(f, "{ruff}"),
            _ => Ok(()),
        }
    }
}

/// The line saying how `add` chose the detail layers, when it chose them itself.
pub fn layer_choice_note(choice: &LayerChoice, params: &Params) -> Option<String> {
    match choice {
        LayerChoice::Explicit => None,
        LayerChoice::AllMoe => Some(
            "detail layers (0, 1): the model has no MoE-vs-dense rule, so every layer is MoE (no config found to count them)"
                .into(),
        ),
        LayerChoice::Auto(moe) => {
            let rule = match &moe.rule {
                Some(rule) => format!("MoE where `{rule}`"),
                None => "every layer is MoE".to_string(),
            };
            Some(format!(
                "detail layers {}: the first MoE layer and the next ({rule}; {}, {} layers)",
                params.layers_literal(),
                moe.config.display(),
                moe.num_layers
            ))
        }
    }
}

/// What `remove` did or, with `--dry-run`, would do.
#[derive(Debug, Clone, Serialize)]
pub struct RemoveSummary {
    /// The checkout.
    pub root: PathBuf,
    /// The instrumented model; `null` when the tree held no memory prints, or when no model
    /// file (or more than one) holds any.
    pub model: Option<String>,
    /// Whether files were written (false for `--dry-run` and for a clean tree).
    pub written: bool,
    /// Every target file that held instrumentation, in the skill's order.
    pub files: Vec<RemovedFile>,
}

/// One instrumented file of a `remove`.
#[derive(Debug, Clone, Serialize)]
pub struct RemovedFile {
    /// Path relative to the root.
    pub path: String,
    /// The groups whose code it held.
    pub groups: Vec<&'static str>,
    /// Whether it is (or, with `--dry-run`, would be) restored.
    pub restored: bool,
    /// Why it stays as it is, when it does.
    pub left_alone: Option<String>,
    /// With `--force`: why it would have stayed as it is, when it would have (it is restored
    /// all the same, the user's edits inside inserted code going with the inserted code).
    pub forced: Option<String>,
}

impl RemoveSummary {
    /// The summary of a `remove` of a tree that held no memory prints.
    pub fn nothing(root: PathBuf) -> Self {
        RemoveSummary {
            root,
            model: None,
            written: false,
            files: Vec::new(),
        }
    }

    /// The summary of `removal`, written (`written`) or not.
    pub fn of_removal(root: PathBuf, removal: &Removal, written: bool) -> Self {
        let files = removal
            .files
            .iter()
            .filter_map(|file| {
                let groups: Vec<&'static str> = removal
                    .status
                    .files
                    .iter()
                    .filter(|s| s.path == file.rel)
                    .flat_map(|s| s.groups.iter().filter(|g| g.found > 0).map(|g| g.group))
                    .collect();
                let changes = file.restored != file.current;
                (changes || file.left_alone.is_some() || !groups.is_empty()).then(|| RemovedFile {
                    path: file.rel.clone(),
                    groups,
                    restored: file.left_alone.is_none() && changes,
                    left_alone: file.left_alone.as_ref().map(ToString::to_string),
                    forced: file.forced.as_ref().map(ToString::to_string),
                })
            })
            .collect();
        RemoveSummary {
            root,
            model: removal.model.clone(),
            written,
            files,
        }
    }

    /// True when some file stays instrumented.
    pub fn is_partial(&self) -> bool {
        self.files.iter().any(|f| f.left_alone.is_some())
    }
}

/// One line per restored file (`memprints: restored …`, or `would restore` for a dry run).
/// The files left alone are the caller's to report (on stderr).
impl fmt::Display for RemoveSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.model.is_none() && self.files.is_empty() {
            return writeln!(
                f,
                "memprints: the tree holds no memory prints; nothing to remove"
            );
        }
        let verb = if self.written {
            "restored"
        } else {
            "would restore"
        };
        for file in self.files.iter().filter(|file| file.restored) {
            match &file.forced {
                Some(why) => writeln!(
                    f,
                    "memprints: {verb} {} (--force: {why}; those edits go too)",
                    file.path
                )?,
                None => writeln!(f, "memprints: {verb} {}", file.path)?,
            }
        }
        Ok(())
    }
}

/// One line naming what an instrumented tree holds: state, model, ranks, detail layers and
/// snapshot folder (`?` for what cannot be read back).
pub fn describe_existing(status: &Status) -> String {
    let model = if status.models.is_empty() {
        "an unknown model".into()
    } else {
        status.models.join(", ")
    };
    let list = |values: &Option<Vec<u32>>| {
        values.as_ref().map_or("?".into(), |v| {
            v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        })
    };
    format!(
        "the tree is already instrumented ({}: model {model}, ranks {}, detail layers {}, snapshots in {})",
        match status.state {
            State::Complete => "complete",
            _ => "partial",
        },
        list(&status.ranks),
        list(&status.detail_layers),
        status.snapshot_dir.as_deref().unwrap_or("?")
    )
}

/// `status`'s text: the pending note, the tree's state, and per file and group what is found.
pub struct StatusText<'a> {
    /// The checkout.
    pub root: &'a std::path::Path,
    /// What it holds.
    pub status: &'a Status,
    /// What an interrupted run left there, if anything.
    pub pending: Option<&'a memprints_commit::Pending>,
}

impl fmt::Display for StatusText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(pending) = self.pending {
            writeln!(f, "memprints: {pending}")?;
        }
        let state = match self.status.state {
            State::Complete => "instrumented",
            State::Partial | State::Edited => "partially instrumented",
            State::Absent if self.pending.is_some() => {
                "clean files, but an interrupted run is pending"
            }
            State::Absent => "clean",
        };
        writeln!(f, "{}: {state}", self.root.display())?;
        if self.status.state != State::Absent {
            writeln!(f, "{}", describe_existing(self.status))?;
            for file in &self.status.files {
                for g in &file.groups {
                    writeln!(
                        f,
                        "  {:<36} group {:<6} {:?} ({}/{})",
                        file.path, g.group, g.state, g.found, g.expected
                    )?;
                }
            }
        }
        for line in &self.status.inconsistent {
            writeln!(
                f,
                "  {line}; `memprints add MODEL --on-existing update` makes them one"
            )?;
        }
        for file in &self.status.files {
            if file.missing && !file.path.contains('<') {
                writeln!(f, "  {}: missing", file.path)?;
            }
            match &file.edited {
                Some(lines) if lines.is_empty() => writeln!(
                    f,
                    "  {}: edited: inserted lines were deleted (`memprints remove` leaves it; `remove --force` takes the rest out)",
                    file.path
                )?,
                Some(lines) => {
                    for &(a, b) in lines {
                        let at = if a == b {
                            a.to_string()
                        } else {
                            format!("{a}-{b}")
                        };
                        writeln!(
                            f,
                            "  {}:{at}: edited: differs from what memprints inserted",
                            file.path
                        )?;
                    }
                }
                None => {}
            }
            if let Some(reason) = &file.unverifiable {
                writeln!(
                    f,
                    "  {}: cannot be checked against `add`: {reason}",
                    file.path
                )?;
            }
        }
        Ok(())
    }
}
