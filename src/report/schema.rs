//! The report's data: the types `memprints report --format json` serialises, as documented by
//! `schema/report.schema.json`.
//!
//! Contract: these are plain data. [`super::builder`] fills them from the log and
//! [`super::summary`] adds peaks, breakdowns and the cross-rank summary; the renderers only read
//! them. Sizes are bytes; a figure the log did not print is `None` (JSON `null`), except in a
//! [`Breakdown`], whose weights and optimizer state are 0 when their print is missing. Field
//! order is the JSON's key order: a change here is a change of the schema, and bumps
//! [`SCHEMA_VERSION`] when it is incompatible.

use serde::Serialize;
use serde::ser::SerializeStruct;

use super::parse::PipelineKind;

/// Bumped whenever the JSON changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole report: what was read, what the run did, and per rank where the memory went.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The files read, in order (directories expanded).
    pub inputs: Vec<String>,
    /// How many lines and prints were read, and how many did not parse.
    pub stats: Stats,
    /// PithTrain's rank-0 step lines; `None` when the log holds none.
    pub training: Option<Training>,
    /// Set when the log holds a CUDA out-of-memory error.
    pub oom: Option<Oom>,
    /// Peaks across ranks and the imbalance between pipeline stages.
    pub summary: Summary,
    /// One entry per rank that printed (or the `--rank` selection), by rank.
    pub ranks: Vec<RankReport>,
}

/// Counts over everything read, whatever `--rank` says.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    /// Physical lines in all inputs; a last line without a newline counts.
    pub lines_read: u64,
    /// Memory prints: `[rank=` tags (two prints run together on one line count twice).
    pub memory_lines: u64,
    /// Tagged prints that matched no known format (garbage, cut-off).
    pub unparsed_memory_lines: u64,
    /// The first few unparsed prints, cut to 200 characters.
    pub unparsed_examples: Vec<String>,
}

/// Aggregate of PithTrain's rank-0 step lines.
#[derive(Debug, Clone, Serialize)]
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
}

/// The run died of a CUDA out-of-memory error.
#[derive(Debug, Clone, Serialize)]
pub struct Oom {
    /// Lines holding `CUDA out of memory`.
    pub lines: u64,
    /// Ranks named by a launcher prefix on an OOM line.
    pub ranks: Vec<u32>,
    /// The first OOM line's `Tried to allocate` amount.
    pub tried_to_allocate: Option<i64>,
    /// The first OOM line from `torch.OutOfMemoryError` on, cut to 200 characters.
    pub message: String,
}

/// Across ranks: each rank's pipeline peak, the peaks per pipeline stage, the imbalance.
#[derive(Debug, Clone, Default, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
    /// Device memory outside PyTorch (CUDA context, NCCL) at the peak.
    pub non_pytorch: i64,
}

/// The pipeline peaks of one stage's ranks.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Default, Serialize)]
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
    /// One entry per `[rank=R pp=P]` print.
    pub pipeline: Vec<PipelineEntry>,
    /// The highest pipeline entry.
    pub peak: Option<Peak>,
    /// Where the device memory went at [`Self::peak`].
    pub breakdown: Option<Breakdown>,
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

/// Which setup step printed a [`SetupEntry`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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

/// One `[rank=R pp=P]` print. Serialises with a derived `label` and `step`.
#[derive(Debug, Clone)]
pub struct PipelineEntry {
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
        let mut st = s.serialize_struct("PipelineEntry", 10)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("step", &self.kind.step())?;
        st.serialize_field("label", &self.label())?;
        st.serialize_field("i", &self.i)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("allocated", &self.allocated)?;
        st.serialize_field("cached", &self.cached)?;
        st.serialize_field("non_pytorch", &self.non_pytorch)?;
        st.serialize_field("delta", &self.delta)?;
        st.serialize_field("change", &self.change)?;
        st.end()
    }
}

/// A rank's highest pipeline entry: the first of equal maxima, the moment it was reached.
#[derive(Debug, Clone, Serialize)]
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

/// Where the device memory went at the pipeline peak; the parts add up to `total`.
#[derive(Debug, Clone, Serialize)]
pub struct Breakdown {
    /// Allocated at the end of setup (sharded weights and buffers), capped at `Before pipeline`.
    pub weights: i64,
    /// Optimizer state loaded from the checkpoint, when one was loaded.
    pub optimizer_state: i64,
    /// The rest of what was allocated before the pipeline started.
    pub other_static: i64,
    /// Peak allocated minus `Before pipeline` allocated: activations and gradients in flight.
    pub activations: i64,
    /// Cached by PyTorch's allocator (reserved, free) at the peak.
    pub cached: i64,
    /// Device memory outside PyTorch (CUDA context, NCCL) at the peak.
    pub non_pytorch: i64,
    /// The sum of the parts: what the device held at the peak.
    pub total: i64,
}

/// One detail-layer probe (`_lmem`) other than the experts internals.
#[derive(Debug, Clone, Serialize)]
pub struct LayerProbe {
    /// Pipeline prints of this rank before this probe: the probe ran during the schedule
    /// operation that ends at `pipeline[pipeline_position]`.
    pub pipeline_position: usize,
    /// The probe's label, trimmed.
    pub label: String,
    /// 0 for `layer_forward`'s stage probes and prolog/epilog, 1 inside the model's layer.
    pub depth: u8,
    /// `N` of `layerN` in the label.
    pub layer: Option<u32>,
    /// `N` of `stageN` in the label.
    pub stage: Option<u32>,
    /// The name of a trailing `name=(shape)`.
    pub tensor: Option<String>,
    /// The shape of a trailing `name=(shape)`; `None` when it is not a tuple of integers.
    pub shape: Option<Vec<u64>>,
    /// Allocated.
    pub allocated: i64,
    /// Allocated minus the previous probe's in the same forward pass (experts probes included).
    pub change: Option<i64>,
}

/// One experts-internals probe (`experts: …`).
#[derive(Debug, Clone, Serialize)]
pub struct ExpertProbe {
    /// As [`LayerProbe::pipeline_position`].
    pub pipeline_position: usize,
    /// `input`, `after gate_proj`, `after clamped_swiglu`, …
    pub step: String,
    /// The name of a trailing `name=(shape)`.
    pub tensor: Option<String>,
    /// The shape of a trailing `name=(shape)`.
    pub shape: Option<Vec<u64>>,
    /// Allocated.
    pub allocated: i64,
    /// As [`LayerProbe::change`].
    pub change: Option<i64>,
}

/// The tensors one layer stage saved for backward.
#[derive(Debug, Clone, Serialize)]
pub struct SavedGroup {
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
    /// Each saved tensor, in log order.
    pub tensors: Vec<SavedTensor>,
}

/// One saved tensor.
#[derive(Debug, Clone, Serialize)]
pub struct SavedTensor {
    /// A weight (`saved (weight)`) rather than an activation.
    pub weight: bool,
    /// Its shape; `None` when the printed one is not a tuple of integers.
    pub shape: Option<Vec<u64>>,
    /// Its dtype without the `torch.` prefix.
    pub dtype: String,
    /// Its size as printed.
    pub size: i64,
}

/// A memory snapshot file a rank said it wrote.
#[derive(Debug, Clone, Serialize)]
pub struct SnapshotFile {
    /// The path as printed.
    pub path: String,
    /// Written by the OOM handler (`..._rankN.pickle`) rather than after step 0.
    pub after_oom: bool,
}

/// The last memory figure a rank printed: where it was when the log ends (or the OOM hit).
#[derive(Debug, Clone, Serialize)]
pub struct LastPoint {
    /// The kind of print it came from.
    pub source: PointSource,
    /// That print's label.
    pub label: String,
    /// Allocated.
    pub allocated: i64,
}

/// The kind of print a [`LastPoint`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
