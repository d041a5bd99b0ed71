//! The report's data: the types `memprints report --format json` serialises;
//! `schema/report.schema.json` is generated from them (their doc comments are its descriptions).
//!
//! Contract: these are plain data. the fold (`fold::builder`) fills them from the log, `fold::summary`
//! adds peaks, breakdowns and the cross-rank summary, `joined` the one view of a run's
//! memory and `estimate` PithTrain's estimator beside the prints; the renderers only
//! read them. Sizes are bytes; a figure nobody measured is `None` (JSON `null`), never 0. Field
//! order is the JSON's key order: a change here is a change of the schema, and bumps
//! [`SCHEMA_VERSION`] when it is incompatible.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;

use super::parse::PipelineKind;
use memprints_estimate::compare::RankComparison;
use memprints_estimate::settings::RunSettings;

/// Bumped whenever the JSON changes incompatibly (2: one entry per run under `runs`; 3: a
/// rank's detail holds the passes kept in detail, every pass is summarised under `passes`).
pub const SCHEMA_VERSION: u32 = 3;

/// A whole report: what was read, and per run what it did and where the memory went.
///
/// `R` is what stands for a rank: [`RankReport`], or for a renderer that prepares ranks ahead
/// (e.g. each rank's JSON, made on all cores) that form instead ([`Report::try_map_ranks`]).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Report<R = RankReport> {
    /// The version of this schema ([`SCHEMA_VERSION`]).
    #[schemars(extend("const" = SCHEMA_VERSION))]
    pub schema_version: u32,
    /// The files read, in order (directories expanded).
    pub inputs: Vec<String>,
    /// Files of a directory that were not read, and why.
    pub skipped: Vec<SkippedInput>,
    /// Files whose step lines repeat those of a run already read (a launcher's or driver's copy
    /// of rank 0's log): read, but their step lines are not counted again.
    pub repeated: Vec<RepeatedInput>,
    /// How many lines and prints were read over all inputs, and how many did not parse.
    pub stats: Stats,
    /// One entry per run (see `fold::runs` for what makes a run), in the order they began.
    pub runs: Vec<Run<R>>,
    /// Notes for stderr about how inputs were read (NUL bytes read around), one line each; not
    /// part of the JSON.
    #[serde(skip)]
    pub notes: Vec<crate::scan::inputs::InputNote>,
}

impl<R> Report<R> {
    /// The same report with each run's ranks turned into `T` by `f` (which sees a run's ranks
    /// at once, so it may work on them in parallel); every other field is cloned.
    pub fn try_map_ranks<T, E>(
        &self,
        mut f: impl FnMut(&[R]) -> Result<Vec<T>, E>,
    ) -> Result<Report<T>, E> {
        let runs = self
            .runs
            .iter()
            .map(|run| {
                Ok(Run {
                    name: run.name.clone(),
                    sources: run.sources.clone(),
                    stats: run.stats.clone(),
                    training: run.training.clone(),
                    oom: run.oom.clone(),
                    crash: run.crash.clone(),
                    summary: run.summary.clone(),
                    memory: run.memory.clone(),
                    ranks: f(&run.ranks)?,
                    estimate: run.estimate.clone(),
                    what_if: run.what_if.clone(),
                    what_to_change: run.what_to_change.clone(),
                })
            })
            .collect::<Result<_, E>>()?;
        Ok(Report {
            schema_version: self.schema_version,
            inputs: self.inputs.clone(),
            skipped: self.skipped.clone(),
            repeated: self.repeated.clone(),
            stats: self.stats.clone(),
            runs,
            notes: self.notes.clone(),
        })
    }
}

/// A file of a directory that `report` did not read as a log.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SkippedInput {
    /// The file.
    pub path: String,
    /// Why, in a few words.
    pub reason: String,
}

/// A file whose step lines are the same steps (the same step numbers and figures) as those of
/// a run already read: they are not counted again.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RepeatedInput {
    /// The file.
    pub path: String,
    /// The name of the run whose step lines it repeats.
    pub repeats: String,
    /// How many step lines it repeats.
    pub steps: u64,
    /// The first step repeated.
    pub first_step: u64,
    /// The last step repeated.
    pub last_step: u64,
    /// Its memory prints repeat that run's too, so nothing of it is counted: a copy of that
    /// run's log.
    pub prints_too: bool,
}

/// One run: one launch of the training, from one file or several (one per node). `R` stands for
/// a rank, as in [`Report`].
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Run<R = RankReport> {
    /// Named after its sources (`node0.log + node1.log`, `run.log, launch 2`).
    pub name: String,
    /// The files this run's lines came from, in input order.
    pub sources: Vec<String>,
    /// The run's prints and how many did not parse.
    pub stats: RunStats,
    /// PithTrain's rank-0 step lines; `None` when the run logged none.
    pub training: Option<Training>,
    /// Set when the run logged a CUDA out-of-memory error.
    pub oom: Option<Oom>,
    /// Set when the run ended in an exception (an OOM or any other): what it was, and where
    /// the run stopped.
    pub crash: Option<Crash>,
    /// Peaks across ranks and the imbalance between pipeline stages.
    pub summary: Summary,
    /// The prints' peak beside PithTrain's step peaks and the step-0 memory snapshots.
    pub memory: MemoryView,
    /// One entry per rank that printed (or the `--rank` selection), by rank.
    pub ranks: Vec<R>,
    /// PithTrain's memory estimator beside the prints; `None` unless `--estimate` was given.
    pub estimate: Option<EstimateSection>,
    /// The peak predicted at other settings (`--what-if`); absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub what_if: Option<WhatIfSection>,
    /// What to change to lower the steady-state peak, ranked by the GiB saved on the worst
    /// rank; `None` when the run has no pipeline peak to start from.
    pub what_to_change: Option<WhatToChange>,
}

/// The memory prints of one run.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct RunStats {
    /// `[rank=` tags of this run (every rank, whatever `--rank` says).
    pub memory_lines: u64,
    /// Of which matched no known format.
    pub unparsed_memory_lines: u64,
    /// The first few unparsed prints, cut to 200 characters.
    pub unparsed_examples: Vec<String>,
    /// Detail prints of passes not kept in detail (see [`PassSummary`]): counted, not read;
    /// absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub detail_prints_not_read: u64,
}

/// Counts over everything read, whatever `--rank` says.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Stats {
    /// Physical lines in all inputs; a last line without a newline counts.
    pub lines_read: u64,
    /// Memory prints: `[rank=` tags (two prints run together on one line count twice).
    pub memory_lines: u64,
    /// Tagged prints that matched no known format (garbage, cut-off).
    pub unparsed_memory_lines: u64,
    /// The first few unparsed prints, cut to 200 characters (detail prints in the order
    /// their passes were read).
    pub unparsed_examples: Vec<String>,
    /// Detail prints of passes not kept in detail, and of ranks left out by `--rank`: counted,
    /// not read; absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub detail_prints_not_read: u64,
    /// Lines longer than the 64 KiB kept of a line (the scanner's `LINE_CAP`); absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub long_lines: u64,
    /// Bytes past the kept 64 KiB of those lines, not read; absent when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub cut_bytes: u64,
}

// serde's `skip_serializing_if` hands the field by reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Aggregate of PithTrain's rank-0 step lines.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Training {
    /// Step lines read.
    pub steps_logged: u64,
    /// The step number of the first step line.
    pub first_step: u64,
    /// The step number of the last step line.
    pub last_step: u64,
    /// `M` of `step N/M`, when printed.
    pub max_steps: Option<u64>,
    /// The first step line's `step-time`, in seconds.
    pub first_step_time_s: Option<f64>,
    /// The first step line's `peak-gpu-memory`.
    pub first_step_peak_gpu_memory: Option<i64>,
    /// The highest `peak-gpu-memory` of all step lines.
    pub peak_gpu_memory: Option<i64>,
    /// The first step whose line printed that highest `peak-gpu-memory`.
    pub peak_step: Option<u64>,
    /// The highest `peak-gpu-memory` of steps ≥ 2: the steady state, with optimizer state
    /// (step 1 has none yet); `None` when no such step was logged.
    pub steady_peak_gpu_memory: Option<i64>,
    /// The date the first step line begins with (`2026-12-01 22:17:50`, the logging machine's
    /// clock); `None` when it has none.
    pub first_logged_at: Option<String>,
    /// The date of the last dated step line.
    pub last_logged_at: Option<String>,
    /// `first_logged_at` as seconds since 1970-01-01 00:00:00 of the logging machine's clock.
    #[serde(skip)]
    #[schemars(skip)]
    pub first_time: Option<i64>,
    /// `last_logged_at` likewise.
    #[serde(skip)]
    #[schemars(skip)]
    pub last_time: Option<i64>,
}

/// The run died of a CUDA out-of-memory error.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Oom {
    /// Lines holding `CUDA out of memory`.
    pub lines: u64,
    /// Ranks named by a launcher prefix on an OOM line.
    pub ranks: Vec<u32>,
    /// The first OOM line's `Tried to allocate` amount.
    pub tried_to_allocate: Option<i64>,
    /// The first OOM line from `torch.OutOfMemoryError` on, whole (PyTorch's hint included).
    pub message: String,
    /// The device of `GPU N has a total capacity of …` (its index on the node).
    pub gpu: Option<u32>,
    /// `total capacity of C`: all the device holds.
    pub capacity: Option<i64>,
    /// `of which F is free` when the allocation failed.
    pub free: Option<i64>,
    /// `this process has U memory in use`: PyTorch's reserve and everything else the process
    /// holds on the device.
    pub process_in_use: Option<i64>,
    /// `A is allocated by PyTorch`.
    pub allocated_by_pytorch: Option<i64>,
    /// `R is reserved by PyTorch but unallocated`: the caching allocator's unused reserve.
    pub reserved_unallocated: Option<i64>,
}

/// The exception that ended a run (see [`super::crash`]): its figures are those of a run
/// cut short, so every peak it shows is a lower bound of what the whole run would have needed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Crash {
    /// The exception line: `RuntimeError: Dataset is too small`,
    /// `torch.OutOfMemoryError: CUDA out of memory. …` (whole).
    pub exception: String,
    /// Its type: `RuntimeError`, `torch.OutOfMemoryError`.
    pub kind: String,
    /// It was a CUDA out-of-memory error.
    pub out_of_memory: bool,
    /// The rank of the launcher's prefix on its lines.
    pub rank: Option<u32>,
    /// The traceback lines before it, innermost last (at most 8, each cut to 240
    /// characters); empty when only the OOM line was seen (no traceback at the end of the log).
    pub frames: Vec<String>,
    /// Always true: the run's peaks are lower bounds, the run stopped before it was done.
    pub peak_is_lower_bound: bool,
    /// Where the run stopped.
    pub stopped_at: StoppedAt,
}

/// The last step line and the last memory print before a run stopped.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StoppedAt {
    /// The last step PithTrain logged; `None` when it logged none.
    pub last_step: Option<u64>,
    /// The rank whose last print is given: the crashing rank when known and printing, else the
    /// first printing rank.
    pub rank: Option<u32>,
    /// That rank's last memory print.
    pub last_print: Option<String>,
}

/// Across ranks: each rank's pipeline peak, the peaks per pipeline stage, the imbalance.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct Summary {
    /// The rank with the highest pipeline peak (the lowest such rank on a tie).
    pub peak_rank: Option<u32>,
    /// The pipeline peak of every rank that has one, by rank.
    pub peaks: Vec<RankPeak>,
    /// Peaks grouped by pipeline stage, by stage.
    pub stages: Vec<StagePeak>,
    /// Highest against lowest stage peak; `None` with fewer than two stages.
    pub imbalance: Option<Imbalance>,
}

/// One rank's pipeline peak.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RankPeak {
    /// The global rank.
    pub rank: u32,
    /// Its pipeline stage.
    pub pp: Option<u32>,
    /// The pipeline print at the peak.
    pub label: String,
    /// Allocated at the peak.
    pub allocated: i64,
    /// Cached (reserved but free) at the peak.
    pub cached: i64,
    /// Device memory outside PyTorch's allocator at the peak.
    pub non_pytorch: i64,
}

/// The pipeline peaks of one stage's ranks.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StagePeak {
    /// The pipeline stage.
    pub pp: u32,
    /// Its ranks that printed, by rank.
    pub ranks: Vec<u32>,
    /// The highest peak allocated among them.
    pub max_allocated: i64,
    /// The lowest peak allocated among them.
    pub min_allocated: i64,
}

/// How far apart the busiest and the lightest pipeline stage peak.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Imbalance {
    /// The stage with the highest peak.
    pub highest_pp: u32,
    /// Its peak allocated.
    pub highest: i64,
    /// The stage with the lowest peak.
    pub lowest_pp: u32,
    /// Its peak allocated.
    pub lowest: i64,
    /// `highest - lowest`.
    pub spread: i64,
    /// `spread / highest`.
    pub ratio: f64,
}

/// Everything one rank printed, in log order, with its peak and the breakdown at the peak.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct RankReport {
    /// The global rank.
    pub rank: u32,
    /// The pipeline stage, from the first `[rank=R pp=P]` print.
    pub pp: Option<u32>,
    /// This rank's tagged prints.
    pub memory_lines: u64,
    /// This rank's tagged prints that matched no known format.
    pub unparsed_memory_lines: u64,
    /// Distributed init and `setup_model` prints.
    pub setup: Vec<SetupEntry>,
    /// The checkpoint load, when the run resumed from one.
    pub checkpoint: Option<Checkpoint>,
    /// Every pipeline pass of this rank (one per profiled step), in one line each.
    pub passes: Vec<PassSummary>,
    /// One entry per `[rank=R pp=P]` print of the passes kept in detail, in log order: the
    /// first, the one with the highest peak and the last (one pass when one step was
    /// profiled).
    pub pipeline: Vec<PipelineEntry>,
    /// The highest pipeline entry.
    pub peak: Option<Peak>,
    /// Where the device memory went at [`Self::peak`].
    pub breakdown: Option<Breakdown>,
    /// Who owns every byte at [`Self::peak`], each figure with where it came from (the prints,
    /// the rank's memory snapshot, or arithmetic on them); see `owners`.
    pub owners: Option<PeakOwners>,
    /// The GPU's total memory as this rank's `init_process_group` print records it
    /// (`torch.cuda.mem_get_info()`'s total, exact); `None` when its prints do not (logs of
    /// earlier prints).
    pub gpu_total: Option<i64>,
    /// The GPU's capacity and where it was read ([`super::headroom`]); `None` when not known
    /// (pass `--gpu-memory GIB`).
    pub capacity: Option<Capacity>,
    /// `capacity.bytes` minus the device total at the peak (`breakdown.total`); `None` without
    /// either.
    pub headroom_bytes: Option<i64>,
    /// Whether the peak fits the GPU; `None` without a capacity (unless the run went out of
    /// memory on this rank).
    pub status: Option<FitStatus>,
    /// How memory outside PyTorch's allocator changed over the pipeline prints.
    pub non_pytorch_growth: Option<NonPytorchGrowth>,
    /// Detail-layer probes other than experts internals.
    pub layers: Vec<LayerProbe>,
    /// Experts-internals probes.
    pub experts: Vec<ExpertProbe>,
    /// Tensors saved for backward, per layer and stage.
    pub saved_tensors: Vec<SavedGroup>,
    /// Memory snapshot files this rank wrote.
    pub snapshots: Vec<SnapshotFile>,
    /// The last memory figure this rank printed.
    pub last_point: Option<LastPoint>,
}

/// A GPU's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Capacity {
    /// All the device holds, in bytes.
    pub bytes: i64,
    /// Where the figure was read.
    pub from: CapacityFrom,
}

/// Where a [`Capacity`] was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CapacityFrom {
    /// PyTorch's OOM message: `GPU N has a total capacity of C`.
    OomMessage,
    /// `memprints report --gpu-memory GIB`.
    Flag,
    /// The GPU's total memory the `init_process_group` print records (`gpu_total=`,
    /// `torch.cuda.mem_get_info()`'s total): the rank's own, else the smallest any rank of the
    /// run printed.
    Prints,
}

/// Whether a rank's peak fits its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FitStatus {
    /// Headroom of at least 5 % of the capacity.
    Fits,
    /// Headroom under 5 % of the capacity.
    Tight,
    /// The run went out of memory on this rank, or the peak exceeds the capacity.
    OutOfMemory,
}

/// Which setup step printed a [`SetupEntry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SetupPhase {
    /// `init_process_group`: the CUDA context and the NCCL world.
    InitProcessGroup,
    /// `init_device_mesh`.
    InitDeviceMesh,
    /// `setup_model`: building, sharding and placing the model.
    SetupModel,
}

/// One setup print.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SetupEntry {
    /// The setup step that printed it.
    pub phase: SetupPhase,
    /// `setup_model`'s label; `CUDA context`, `after NCCL world`, `after device mesh` for the
    /// distributed prints.
    pub label: String,
    /// Allocated, when printed (the distributed prints print only non-PyTorch memory).
    pub allocated: Option<i64>,
    /// Cached, when printed.
    pub cached: Option<i64>,
    /// Device memory outside PyTorch, when printed.
    pub non_pytorch: Option<i64>,
    /// `setup_model`: allocated minus the previous `setup_model` print's; distributed prints:
    /// the printed non-PyTorch cost (NCCL world, device mesh).
    pub change: Option<i64>,
}

/// The `load_ckpt` print.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Checkpoint {
    /// The optimizer state loaded.
    pub optimizer_state: i64,
    /// The optimizer's param entries.
    pub param_entries: u64,
    /// Allocated after the load.
    pub allocated: i64,
    /// Cached after the load.
    pub cached: i64,
    /// Device memory outside PyTorch after the load.
    pub non_pytorch: i64,
}

/// One pipeline pass of a rank: its prints from one `Before pipeline` to the next (see
/// `fold::passes`). `None` where the pass printed no such figure.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PassSummary {
    /// The pass's number, from 0.
    pub pass: u32,
    /// Its prints are in the rank's `pipeline`, `layers`, `experts` and `saved_tensors`; the
    /// detail prints of a pass that is not were counted, not read.
    pub detail: bool,
    /// Its pipeline prints.
    pub pipeline_prints: u64,
    /// Its detail prints (probes, saved tensors).
    pub detail_prints: u64,
    /// Allocated at its `Before pipeline`.
    pub before_pipeline: Option<i64>,
    /// Its highest pipeline print (the first of equal maxima).
    pub peak_label: Option<String>,
    /// That print's allocated.
    pub peak_allocated: Option<i64>,
    /// That print's cached.
    pub peak_cached: Option<i64>,
    /// That print's non-PyTorch memory.
    pub peak_non_pytorch: Option<i64>,
    /// Allocated at its last pipeline print.
    pub end_allocated: Option<i64>,
}

/// One `[rank=R pp=P]` print. Serialises with a derived `label` and `step`.
#[derive(Debug, Clone)]
pub struct PipelineEntry {
    /// The pipeline pass it belongs to ([`PassSummary::pass`]).
    pub pass: u32,
    /// Where in DualPipeV's schedule the print sits.
    pub kind: PipelineKind,
    /// The loop index `i=I`, for prints inside a loop.
    pub i: Option<u32>,
    /// `N` of `After StepK (N …)`.
    pub count: Option<u32>,
    /// Allocated.
    pub allocated: i64,
    /// Cached.
    pub cached: i64,
    /// Device memory outside PyTorch.
    pub non_pytorch: i64,
    /// As printed: `(+D)` against `Before pipeline`, `(delta=±D)` against `before B1`.
    pub delta: Option<i64>,
    /// Allocated minus the previous pipeline print's of this rank.
    pub change: Option<i64>,
}

impl PipelineEntry {
    /// The print's label, as the instrumentation wrote it.
    pub fn label(&self) -> String {
        use PipelineKind::*;
        let i = self.i.unwrap_or(0);
        let n = self.count.unwrap_or(0);
        match self.kind {
            BeforePipeline => "Before pipeline".to_owned(),
            Step1F0 => format!("Step1 F0 i={i}"),
            AfterStep1 => format!("After Step1 ({n} F0)"),
            Step2ForwardChunk0 => format!("Step2 i={i} forward_chunk(0)"),
            Step2ForwardChunk1 => format!("Step2 i={i} forward_chunk(1)"),
            AfterStep2 => format!("After Step2 ({n} F0F1)"),
            Step3BeforeB1 => format!("Step3 i={i} before B1"),
            Step3AfterB1 => format!("Step3 i={i} after B1"),
            Step3AfterW1 => format!("Step3 i={i} after W1"),
            Step3AfterF1 => format!("Step3 i={i} after F1"),
            AfterStep3 => format!("After Step3 ({n} B1W1F1)"),
            Step4 => format!("Step4 i={i}"),
            AfterStep4 => format!("After Step4 ({n} F0B1F1B0)"),
            AfterStep8 => "After Step8 (end of pipeline)".to_owned(),
        }
    }
}

impl Serialize for PipelineEntry {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PipelineEntryJson {
            pass: self.pass,
            kind: self.kind,
            step: self.kind.step(),
            label: self.label(),
            i: self.i,
            count: self.count,
            allocated: self.allocated,
            cached: self.cached,
            non_pytorch: self.non_pytorch,
            delta: self.delta,
            change: self.change,
        }
        .serialize(s)
    }
}

impl JsonSchema for PipelineEntry {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PipelineEntry".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        PipelineEntryJson::json_schema(generator)
    }
}

/// A [`PipelineEntry`] as JSON: its fields with the derived `step` and `label` after `kind`.
#[derive(Serialize, JsonSchema)]
struct PipelineEntryJson {
    /// The pipeline pass it belongs to (`passes[].pass`).
    pass: u32,
    /// Where in DualPipeV's schedule the print sits.
    kind: PipelineKind,
    /// 0 before the pipeline, else the schedule step (1-8) of `kind`.
    step: u8,
    /// The print's label, as the instrumentation wrote it.
    label: String,
    /// The loop index `i=I`, for prints inside a loop.
    i: Option<u32>,
    /// `N` of `After StepK (N …)`.
    count: Option<u32>,
    /// Allocated.
    allocated: i64,
    /// Cached.
    cached: i64,
    /// Device memory outside PyTorch.
    non_pytorch: i64,
    /// As printed: `(+D)` against `Before pipeline`, `(delta=±D)` against `before B1`.
    delta: Option<i64>,
    /// Allocated minus the previous pipeline print's of this rank.
    change: Option<i64>,
}

/// Memory outside PyTorch's allocator (`non-pt=`: the device's used memory minus what the
/// allocator reserved) from the first pipeline print to the highest: CUDA context and NCCL
/// buffers, but also what kernels and libraries allocate on their own while the step runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NonPytorchGrowth {
    /// The first pipeline print (`Before pipeline`).
    pub from_label: String,
    /// Its `non-pt=`.
    pub from: i64,
    /// The first pipeline print with the highest `non-pt=`.
    pub to_label: String,
    /// Its `non-pt=`.
    pub to: i64,
    /// `to - from`.
    pub growth: i64,
}

/// A rank's highest pipeline entry: the first of equal maxima, the moment it was reached.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Peak {
    /// Index into `pipeline`.
    pub index: usize,
    /// The entry's label.
    pub label: String,
    /// Allocated at the peak.
    pub allocated: i64,
    /// Cached at the peak.
    pub cached: i64,
    /// Device memory outside PyTorch at the peak.
    pub non_pytorch: i64,
}

/// Where the device memory went at the pipeline peak; the parts that were measured and
/// `other_static` add up to `total`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Breakdown {
    /// Allocated at the last setup print (sharded weights and buffers), capped at
    /// `Before pipeline`; `None` when no setup print printed it.
    pub weights: Option<i64>,
    /// Optimizer state loaded from the checkpoint; `None` when no checkpoint load printed it
    /// (group 6 prints only after a load).
    pub optimizer_state: Option<i64>,
    /// The rest of what was allocated before the pipeline started (all of it, when neither
    /// part above was measured).
    pub other_static: i64,
    /// Peak allocated minus `Before pipeline` allocated: activations and gradients in flight.
    pub activations: i64,
    /// Cached by PyTorch's allocator (reserved, free) at the peak.
    pub cached: i64,
    /// Device memory outside PyTorch's allocator at the peak.
    pub non_pytorch: i64,
    /// The sum of the parts: what the device held at the peak.
    pub total: i64,
}

/// One detail-layer probe (`_lmem`) other than the experts internals.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LayerProbe {
    /// The pipeline pass it belongs to.
    pub pass: u32,
    /// Pipeline prints of this rank before this probe: the probe ran during the schedule
    /// operation that ends at `pipeline[pipeline_position]`.
    pub pipeline_position: usize,
    /// The probe's label, trimmed.
    pub label: Arc<str>,
    /// 0 for `layer_forward`'s stage probes and prolog/epilog, 1 inside the model's layer.
    pub depth: u8,
    /// `N` of `layerN` in the label.
    pub layer: Option<u32>,
    /// `N` of `stageN` in the label.
    pub stage: Option<u32>,
    /// The name of a trailing `name=(shape)`.
    pub tensor: Option<Arc<str>>,
    /// The shape of a trailing `name=(shape)`; `None` when it is not a tuple of integers.
    pub shape: Option<Arc<[u64]>>,
    /// Allocated.
    pub allocated: i64,
    /// Allocated minus the previous probe's in the same forward pass (experts probes included).
    pub change: Option<i64>,
}

/// One experts-internals probe (`experts: …`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ExpertProbe {
    /// The pipeline pass it belongs to.
    pub pass: u32,
    /// As [`LayerProbe::pipeline_position`].
    pub pipeline_position: usize,
    /// `input`, `after gate_proj`, `after clamped_swiglu`, …
    pub step: Arc<str>,
    /// The name of a trailing `name=(shape)`.
    pub tensor: Option<Arc<str>>,
    /// The shape of a trailing `name=(shape)`.
    pub shape: Option<Arc<[u64]>>,
    /// Allocated.
    pub allocated: i64,
    /// As [`LayerProbe::change`].
    pub change: Option<i64>,
}

/// The tensors one layer stage saved for backward.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SavedGroup {
    /// The pipeline pass it belongs to.
    pub pass: u32,
    /// `N` of `layerN` in the header.
    pub layer: Option<u32>,
    /// The stage named in the header (`stage1`, …).
    pub stage: String,
    /// From the summary line when there is one, else summed over `tensors`.
    pub activations: i64,
    /// Saved weights, likewise.
    pub weights: i64,
    /// Saved tensors, likewise.
    pub count: u64,
    /// False when the summary line never came (cut-off log).
    pub complete: bool,
    /// Where `activations` and `weights` come from.
    pub size_from: GroupSizeFrom,
    /// They are exact byte counts (not read back from rounded MB).
    pub bytes_exact: bool,
    /// Each saved tensor, in log order.
    pub tensors: Vec<SavedTensor>,
}

/// One saved tensor.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SavedTensor {
    /// A weight (`saved (weight)`) rather than an activation.
    pub weight: bool,
    /// Its shape; `None` when the printed one is not a tuple of integers.
    pub shape: Option<Arc<[u64]>>,
    /// Its dtype without the `torch.` prefix.
    pub dtype: Arc<str>,
    /// Its size in bytes.
    pub size: i64,
    /// Where `size` comes from.
    pub size_from: SizeFrom,
    /// `size` is exact (not read back from rounded MB).
    pub bytes_exact: bool,
}

/// Where a saved tensor's size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SizeFrom {
    /// The print's `B bytes`.
    PrintedBytes,
    /// Its shape × its dtype's element size: what the print computes (`nelement() ×
    /// element_size()`) before rounding it to 0.1 MB.
    ShapeAndDtype,
    /// The printed MB (one decimal), × 1024²: up to 0.05 MiB off.
    RoundedMb,
}

/// Where a saved-tensor group's sizes come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupSizeFrom {
    /// The summary line's `(B bytes)`.
    PrintedBytes,
    /// The sum of the group's exact tensor sizes (which the summary's count and rounded MB
    /// agree with, when the summary came).
    TensorSum,
    /// The summary's MB (one decimal), × 1024²; or, without a summary, the sum of tensors not
    /// all of which are exact.
    RoundedMb,
}

/// A memory snapshot file a rank said it wrote.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotFile {
    /// The path as printed.
    pub path: String,
    /// Written by the OOM handler (`..._rankN.pickle`) rather than after step 0.
    pub after_oom: bool,
    /// Index into [`Report::inputs`] of the log that printed it (where to look for the file).
    #[serde(skip)]
    pub source: usize,
}

/// One run's memory seen three ways: the step-0 prints, PithTrain's own per-step peak, and the
/// step-0 memory snapshots (see `joined`).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct MemoryView {
    /// The highest pipeline print over all ranks.
    pub prints_peak: Option<PrintsPeak>,
    /// PithTrain's `peak-gpu-memory` against the prints' peak; `None` without step lines.
    pub steps: Option<StepsView>,
    /// The step-0 snapshots found from the log or given with `--snapshots`.
    pub snapshots: Vec<SnapshotView>,
}

/// The highest pipeline print of a run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PrintsPeak {
    /// The rank that printed it (the lowest on a tie).
    pub rank: u32,
    /// Its pipeline stage.
    pub pp: Option<u32>,
    /// The print.
    pub label: String,
    /// Its `alloc=`.
    pub allocated: i64,
}

/// PithTrain's step lines against the prints. `peak-gpu-memory` is
/// `torch.cuda.max_memory_allocated()` over a whole `train_step` (pipeline, gradient clipping,
/// optimizer step), the highest of all ranks; the prints sample allocated memory at the
/// schedule points of the first step only.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StepsView {
    /// The first step line's step: the step the prints measured.
    pub profiled_step: u64,
    /// Its `peak-gpu-memory`.
    pub profiled_step_peak: Option<i64>,
    /// `profiled_step_peak` minus the prints' peak: what the prints could not see in that step
    /// (between prints and outside the pipeline).
    pub unseen_by_prints: Option<i64>,
    /// The step with the highest `peak-gpu-memory` (the first of equals).
    pub peak_step: Option<u64>,
    /// That `peak-gpu-memory`.
    pub peak: Option<i64>,
    /// `peak` minus `profiled_step_peak`: how much higher a later step went.
    pub later_steps_above: Option<i64>,
}

/// A step-0 memory snapshot set beside the prints of its rank.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub struct SnapshotView {
    /// The rank it belongs to (the printing rank, or `rank(\d+)` of a given file's name).
    pub rank: Option<u32>,
    /// The path the log printed; `None` for a file given with `--snapshots`.
    pub printed_path: Option<String>,
    /// Written by the OOM handler rather than after the first step.
    pub after_oom: bool,
    /// The file read; `None` when none was found.
    pub path: Option<String>,
    /// Why it could not be read (not found, not a snapshot); `None` when it was.
    pub error: Option<String>,
    /// The peak of allocated memory over the snapshot's trace (the whole `model.step()`).
    pub peak_allocated: Option<i64>,
    /// Allocated when the snapshot was taken, after the step.
    pub allocated_at_end: Option<i64>,
    /// `peak_allocated` minus `allocated_at_end`: live at the peak, freed again by the end.
    pub freed_after_peak: Option<i64>,
    /// The snapshot's peak minus the rank's highest pipeline print: transient allocations
    /// between two prints, which the prints cannot see.
    pub gap_to_prints: Option<i64>,
    /// The rank's highest pipeline print, for the gap.
    pub prints_peak: Option<i64>,
    /// What held memory at the snapshot's peak, largest first (at most five groups).
    pub top_stacks: Vec<HeldBy>,
    /// Reserved by the caching allocator at the snapshot's peak.
    pub peak_reserved: Option<i64>,
    /// Every owner's bytes at the snapshot's peak (over all its blocks), largest first.
    pub owners: Vec<SnapshotOwner>,
    /// How the snapshot was set beside this run: by the time of its events, or by its name
    /// alone; `None` when no file was read for it.
    pub paired_by: Option<PairedBy>,
    /// Why, in a sentence: the span of its events within the run's (the dates as the log
    /// prints them), or why the time could not decide.
    pub pairing: Option<String>,
}

/// How a snapshot was set beside a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PairedBy {
    /// Its events fall within the run's time span (from its first step's start to its last
    /// step line) and no other run's.
    Time,
    /// By the path the run printed or the name given: the logs or the snapshot give no time
    /// to decide by.
    Name,
}

/// One group of blocks live at a snapshot's peak.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HeldBy {
    /// Who owns the blocks, read off their whole stack: a library's buffer named by what it is
    /// (`cuBLAS/cuBLASLt workspace`, `FSDP reduce-scatter buffers`, …) or the model file.
    pub owner: String,
    /// The group's key frame (`path:line function`): the model line that asked for the blocks.
    pub frame: String,
    /// The group's bytes.
    pub bytes: i64,
    /// Its blocks.
    pub count: u64,
}

/// One owner's bytes at a snapshot's peak.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotOwner {
    /// The owner, as [`HeldBy::owner`].
    pub owner: String,
    /// What its bytes are.
    pub kind: memprints_snapshot::owner::Kind,
    /// Its bytes.
    pub bytes: i64,
    /// Its blocks.
    pub count: u64,
    /// The key frame of its largest group: the line that asked for the most of it.
    pub asked_by: String,
}

/// Who owns every byte of a rank's device memory at its peak (the highest pipeline print).
/// The rows without `within` add up to `total`; those with it split the row they name.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeakOwners {
    /// The peak's print.
    pub label: String,
    /// The device total at the peak (`breakdown.total`).
    pub total: i64,
    /// The snapshot whose owners name the buffers (its path); `None` without one.
    pub snapshot: Option<String>,
    /// The owners, in the report's order.
    pub owners: Vec<PeakOwner>,
}

/// One owner of memory at a rank's peak.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PeakOwner {
    /// What it is, as the report names it (`weights`, `cuBLAS/cuBLASLt workspace`, …).
    pub owner: std::borrow::Cow<'static, str>,
    /// What its bytes are.
    pub kind: OwnerKind,
    /// Its bytes; `None` when nothing measured them (they stay in another row, said in `how`).
    pub bytes: Option<i64>,
    /// Where the figure came from.
    pub from: FigureFrom,
    /// How it was measured or worked out, in a few words.
    pub how: std::borrow::Cow<'static, str>,
    /// The row this one is a part of (`activations`); `None` for a part of the total.
    pub within: Option<OwnerKind>,
    /// The layer of saved activations.
    pub layer: Option<u32>,
    /// The stage of saved activations.
    pub stage: Option<String>,
    /// The line that asked for a buffer (`path:line function` of the snapshot's largest group).
    pub asked_by: Option<String>,
}

/// What a [`PeakOwner`]'s bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OwnerKind {
    /// The sharded weights and buffers after setup.
    Weights,
    /// Gradients (FSDP's unsharded accumulation, from the snapshot).
    Gradients,
    /// The optimizer's state.
    OptimizerState,
    /// The rest of what was allocated before the pipeline.
    OtherStatic,
    /// Activations and their gradients in flight.
    Activations,
    /// A library's buffer, named by what it is (from the snapshot).
    Buffer,
    /// Reserved by the caching allocator, not allocated.
    UnusedReserve,
    /// Device memory outside PyTorch's allocator.
    OutsideAllocator,
}

/// Where a figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FigureFrom {
    /// A memory print, as printed.
    Prints,
    /// The rank's memory snapshot.
    Snapshot,
    /// Arithmetic on figures of the prints and the snapshot.
    Arithmetic,
}

/// The last memory figure a rank printed: where it was when the log ends (or the OOM hit).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LastPoint {
    /// The kind of print it came from.
    pub source: PointSource,
    /// That print's label.
    pub label: String,
    /// Allocated.
    pub allocated: i64,
}

/// The kind of print a [`LastPoint`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PointSource {
    /// A `setup_model` print.
    Setup,
    /// The checkpoint load.
    Checkpoint,
    /// A pipeline print.
    Pipeline,
    /// A detail-layer probe.
    Layer,
    /// An experts-internals probe.
    Experts,
}

/// A run's `estimate` section.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct EstimateSection {
    /// The PithTrain tree whose estimator ran (or was looked for); `None` when none was found.
    pub tree: Option<String>,
    /// What the estimator was run with; `None` when the settings could not be made.
    pub settings: Option<RunSettings>,
    /// One comparison per profiled pp rank, by pp rank.
    pub ranks: Vec<RankEstimate>,
    /// Why there is no comparison, in one line; `None` when the estimator ran.
    pub error: Option<String>,
}

/// One pp rank: the global rank whose prints stand for it, and the comparison.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RankEstimate {
    /// The global rank whose prints were compared.
    pub rank: u32,
    /// Events, components, peak, verdict and notes.
    #[serde(flatten)]
    pub comparison: RankComparison,
}

// The what-if section (`--what-if`) and the ranked changes: made by `crate::whatif`.

/// A setting `--what-if` can change, named as `KEY=VALUE` in kebab case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Key {
    /// `training.sequence_length`.
    SequenceLength,
    /// `training.micro_batch_size`.
    MicroBatchSize,
    /// `training.global_batch_size`.
    GlobalBatchSize,
    /// `distributed.pipeline_parallel_size`.
    PipelineParallelSize,
    /// `distributed.expert_parallel_size`.
    ExpertParallelSize,
    /// `distributed.context_parallel_size`.
    ContextParallelSize,
}

/// The settings a prediction depends on, as PithTrain's config line names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Settings {
    /// Tokens per sequence.
    pub sequence_length: u32,
    /// Sequences per micro-batch.
    pub micro_batch_size: u32,
    /// Sequences per optimizer step.
    pub global_batch_size: u32,
    /// Pipeline parallel size.
    pub pipeline_parallel_size: u32,
    /// Expert parallel size.
    pub expert_parallel_size: u32,
    /// Context parallel size.
    pub context_parallel_size: u32,
}

/// A measured figure beside its prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
pub struct Figure {
    /// At the run's own settings.
    pub measured_bytes: i64,
    /// At the other settings.
    pub predicted_bytes: i64,
}

/// One part of a rank's memory at the steady-state peak.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Component {
    /// `weights`, `other_static`, `gradients`, `optimizer_state`, `activations`,
    /// `unattributed`, `allocator_reserve`, `non_pytorch`.
    pub name: &'static str,
    /// At the run's own settings; `None` when the log does not measure it (the unattributed
    /// part holds its bytes).
    pub measured_bytes: Option<i64>,
    /// At the other settings; `None` when not measured.
    pub predicted_bytes: Option<i64>,
    /// How it scales.
    pub rule: String,
    /// Where the measured figure comes from.
    pub measured_from: String,
    /// Part of the peak (PyTorch's allocated memory); false for the reserve and the memory
    /// outside the allocator, which only the device total counts.
    pub in_peak: bool,
}

/// One rank's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct RankWhatIf {
    /// The global rank.
    pub rank: u32,
    /// Its pipeline stage.
    pub pp: Option<u32>,
    /// The steady-state peak of allocated memory (what `peak-gpu-memory` reports).
    pub peak: Figure,
    /// The peak plus the allocator's unused reserve and the memory outside the allocator.
    pub device: Figure,
    /// The parts; those `in_peak` add up to `peak`, all of them to `device`.
    pub components: Vec<Component>,
    /// The rank's GPU capacity (`capacity.bytes` of the rank), when known.
    pub capacity_bytes: Option<i64>,
    /// The capacity minus the predicted device total; `None` without a capacity.
    pub predicted_headroom_bytes: Option<i64>,
    /// Whether the predicted device total fits the GPU, by the report's own rule (tight under
    /// 5 % headroom); `None` without a capacity.
    pub predicted_status: Option<FitStatus>,
}

/// A run's `--what-if` section.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WhatIfSection {
    /// The settings the run had (`measured`) and those predicted for.
    pub settings: SettingsPair,
    /// How the prediction is made.
    pub method: String,
    /// One entry per rank with a pipeline peak.
    pub ranks: Vec<RankWhatIf>,
    /// Caveats, one sentence each.
    pub notes: Vec<String>,
    /// Why no prediction could be made; the other fields are then empty.
    pub error: Option<String>,
}

/// The measured settings and the predicted ones.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct SettingsPair {
    /// From the run's config line.
    pub measured: Option<Settings>,
    /// With the `--what-if` changes.
    pub predicted: Option<Settings>,
    /// The changes as given, `KEY=VALUE`.
    pub changes: Vec<String>,
}

/// One thing to change and what it saves.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Action {
    /// What to do, in a few words.
    pub action: String,
    /// The exact setting to change (`training.micro_batch_size=1`, an environment variable).
    pub setting: String,
    /// Device memory saved on the worst rank at the steady-state peak.
    pub saves_bytes: i64,
    /// The worst rank's predicted device total after the change.
    pub predicted_device_bytes: i64,
    /// What else it changes (the GPUs needed, what is trained).
    pub cost: String,
}

/// What to change, ranked by [`Action::saves_bytes`], largest first.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct WhatToChange {
    /// The rank with the highest device total at the steady-state peak.
    pub worst_rank: u32,
    /// Its device total there.
    pub worst_device_bytes: i64,
    /// Only actions that save something; empty when none would.
    pub actions: Vec<Action>,
    /// Actions left out and why, one sentence each.
    pub not_offered: Vec<String>,
}
