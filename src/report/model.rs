//! The report: per-rank aggregation of parsed prints, and the cross-rank summary.
//!
//! Contract: [`ReportBuilder::line`] takes physical lines in file order (as [`super::lines`]
//! hands them over) and never fails: a print that matches no format is counted in
//! `unparsed_memory_lines` (globally and, when its tag has a readable rank, on that rank) and
//! skipped. Every `[rank=` tag counts once in `memory_lines`. The builder keeps one compact entry
//! per recognised print, so its memory grows with the number of prints, never with the noise
//! around them. [`ReportBuilder::finish`] computes peaks, the breakdown at the peak and the
//! imbalance between pipeline stages. These types serialise to the JSON of
//! `schema/report.schema.json` (sizes are bytes).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde::ser::SerializeStruct;

use super::lines::{self, Needles};
use super::other::{parse_oom_line, parse_step_line};
use super::parse::{Detail, Event, PipelineKind, PipelinePoint, parse_print, tag_rank};

/// Bumped whenever the JSON changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;
const UNPARSED_EXAMPLES: usize = 5;
const EXAMPLE_CHARS: usize = 200;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub inputs: Vec<String>,
    pub stats: Stats,
    pub training: Option<Training>,
    pub oom: Option<Oom>,
    pub summary: Summary,
    pub ranks: Vec<RankReport>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub lines_read: u64,
    pub memory_lines: u64,
    pub unparsed_memory_lines: u64,
    /// The first few unparsed prints, cut to 200 characters.
    pub unparsed_examples: Vec<String>,
}

/// Aggregate of PithTrain's rank-0 step lines.
#[derive(Debug, Clone, Serialize)]
pub struct Training {
    pub steps_logged: u64,
    pub first_step: u64,
    pub last_step: u64,
    pub max_steps: Option<u64>,
    pub first_step_time_s: Option<f64>,
    pub first_step_peak_gpu_memory: Option<i64>,
    pub peak_gpu_memory: Option<i64>,
}

/// The run died of a CUDA out-of-memory error.
#[derive(Debug, Clone, Serialize)]
pub struct Oom {
    pub lines: u64,
    /// Ranks named by a launcher prefix on an OOM line.
    pub ranks: Vec<u32>,
    pub tried_to_allocate: Option<i64>,
    pub message: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub peak_rank: Option<u32>,
    pub peaks: Vec<RankPeak>,
    pub stages: Vec<StagePeak>,
    pub imbalance: Option<Imbalance>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RankPeak {
    pub rank: u32,
    pub pp: Option<u32>,
    pub label: String,
    pub allocated: i64,
    pub cached: i64,
    pub non_pytorch: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StagePeak {
    pub pp: u32,
    pub ranks: Vec<u32>,
    pub max_allocated: i64,
    pub min_allocated: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Imbalance {
    pub highest_pp: u32,
    pub highest: i64,
    pub lowest_pp: u32,
    pub lowest: i64,
    pub spread: i64,
    /// `spread / highest`.
    pub ratio: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RankReport {
    pub rank: u32,
    pub pp: Option<u32>,
    pub memory_lines: u64,
    pub unparsed_memory_lines: u64,
    pub setup: Vec<SetupEntry>,
    pub checkpoint: Option<Checkpoint>,
    pub pipeline: Vec<PipelineEntry>,
    pub peak: Option<Peak>,
    pub breakdown: Option<Breakdown>,
    pub layers: Vec<LayerProbe>,
    pub experts: Vec<ExpertProbe>,
    pub saved_tensors: Vec<SavedGroup>,
    pub snapshots: Vec<Snapshot>,
    pub last_point: Option<LastPoint>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SetupPhase {
    InitProcessGroup,
    InitDeviceMesh,
    SetupModel,
}

#[derive(Debug, Clone, Serialize)]
pub struct SetupEntry {
    pub phase: SetupPhase,
    pub label: String,
    pub allocated: Option<i64>,
    pub cached: Option<i64>,
    pub non_pytorch: Option<i64>,
    /// `setup_model`: allocated minus the previous `setup_model` print's; distributed prints:
    /// the printed non-PyTorch cost (NCCL world, device mesh).
    pub change: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Checkpoint {
    pub optimizer_state: i64,
    pub param_entries: u64,
    pub allocated: i64,
    pub cached: i64,
    pub non_pytorch: i64,
}

/// One `[rank=R pp=P]` print. Serialises with a derived `label` and `step`.
#[derive(Debug, Clone)]
pub struct PipelineEntry {
    pub kind: PipelineKind,
    pub i: Option<u32>,
    pub count: Option<u32>,
    pub allocated: i64,
    pub cached: i64,
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

#[derive(Debug, Clone, Serialize)]
pub struct Peak {
    /// Index into `pipeline`.
    pub index: usize,
    pub label: String,
    pub allocated: i64,
    pub cached: i64,
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
    pub cached: i64,
    pub non_pytorch: i64,
    pub total: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LayerProbe {
    /// Pipeline prints of this rank before this probe: the probe ran during the schedule
    /// operation that ends at `pipeline[pipeline_position]`.
    pub pipeline_position: usize,
    pub label: String,
    /// 0 for `layer_forward`'s stage probes and prolog/epilog, 1 inside the model's layer.
    pub depth: u8,
    pub layer: Option<u32>,
    pub stage: Option<u32>,
    pub tensor: Option<String>,
    pub shape: Option<Vec<u64>>,
    pub allocated: i64,
    /// Allocated minus the previous probe's in the same forward pass (experts probes included).
    pub change: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExpertProbe {
    pub pipeline_position: usize,
    /// `input`, `after gate_proj`, `after clamped_swiglu`, …
    pub step: String,
    pub tensor: Option<String>,
    pub shape: Option<Vec<u64>>,
    pub allocated: i64,
    pub change: Option<i64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SavedGroup {
    pub layer: Option<u32>,
    pub stage: String,
    /// From the summary line when there is one, else summed over `tensors`.
    pub activations: i64,
    pub weights: i64,
    pub count: u64,
    /// False when the summary line never came (cut-off log).
    pub complete: bool,
    pub tensors: Vec<SavedTensor>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SavedTensor {
    pub weight: bool,
    pub shape: Option<Vec<u64>>,
    pub dtype: String,
    pub size: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub path: String,
    /// Written by the OOM handler (`..._rankN.pickle`) rather than after step 0.
    pub after_oom: bool,
}

/// The last memory figure a rank printed: where it was when the log ends (or the OOM hit).
#[derive(Debug, Clone, Serialize)]
pub struct LastPoint {
    pub source: PointSource,
    pub label: String,
    pub allocated: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PointSource {
    Setup,
    Checkpoint,
    Pipeline,
    Layer,
    Experts,
}

#[derive(Default)]
struct RankState {
    report: RankReport,
    last_probe: Option<(usize, i64)>,
    last_setup_alloc: Option<i64>,
    /// Index of the saved-tensor group still waiting for its summary line.
    open_saved: Option<usize>,
}

/// Builds a [`Report`] from lines fed in file order.
pub struct ReportBuilder {
    ranks: BTreeMap<u32, RankState>,
    only: Option<BTreeSet<u32>>,
    stats: Stats,
    training: Option<Training>,
    oom: Option<Oom>,
    oom_ranks: BTreeSet<u32>,
    scratch: Vec<u8>,
}

impl ReportBuilder {
    /// `only`: keep these ranks (all when `None`); the stats still count every rank.
    pub fn new(only: Option<BTreeSet<u32>>) -> Self {
        ReportBuilder {
            ranks: BTreeMap::new(),
            only,
            stats: Stats::default(),
            training: None,
            oom: None,
            oom_ranks: BTreeSet::new(),
            scratch: Vec::new(),
        }
    }

    /// Adds lines that were read but not passed to [`Self::line`].
    pub fn count_lines(&mut self, n: u64) {
        self.stats.lines_read += n;
    }

    /// Feeds one physical line (without its `\n`), looking for every kind of needle.
    pub fn line(&mut self, raw: &[u8]) {
        self.line_with(raw, Needles::MAX);
    }

    /// Feeds one physical line that holds (at most) the needles in `found`, as
    /// [`lines::scan`] reports them.
    pub fn line_with(&mut self, raw: &[u8], found: Needles) {
        let mut scratch = std::mem::take(&mut self.scratch);
        let line = lines::clean(raw, &mut scratch);
        if found & 1 != 0 {
            for print in lines::split_prints(line) {
                self.print(print);
            }
        }
        // A step or OOM line may also have been glued to a print by interleaving.
        if found & 0b110 != 0 {
            let text = String::from_utf8_lossy(line);
            self.untagged(&text);
        }
        self.scratch = scratch;
    }

    fn print(&mut self, print: &[u8]) {
        self.stats.memory_lines += 1;
        let Some(parsed) = parse_print(print) else {
            self.stats.unparsed_memory_lines += 1;
            if self.stats.unparsed_examples.len() < UNPARSED_EXAMPLES {
                let text = String::from_utf8_lossy(print);
                self.stats
                    .unparsed_examples
                    .push(text.chars().take(EXAMPLE_CHARS).collect());
            }
            if let Some(rank) = tag_rank(print).filter(|r| self.wanted(*r)) {
                let state = self.rank(rank);
                state.report.memory_lines += 1;
                state.report.unparsed_memory_lines += 1;
            }
            return;
        };
        if !self.wanted(parsed.rank) {
            return;
        }
        let state = self.rank(parsed.rank);
        state.report.memory_lines += 1;
        state.event(parsed.event);
    }

    fn wanted(&self, rank: u32) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(&rank))
    }

    fn rank(&mut self, rank: u32) -> &mut RankState {
        self.ranks.entry(rank).or_insert_with(|| RankState {
            report: RankReport {
                rank,
                ..RankReport::default()
            },
            ..RankState::default()
        })
    }

    fn untagged(&mut self, line: &str) {
        if line.contains("| step ")
            && let Some(step) = parse_step_line(line)
        {
            {
                let t = self.training.get_or_insert(Training {
                    steps_logged: 0,
                    first_step: step.step,
                    last_step: step.step,
                    max_steps: step.max_steps,
                    first_step_time_s: step.step_time_s,
                    first_step_peak_gpu_memory: step.peak_gpu_memory,
                    peak_gpu_memory: None,
                });
                t.steps_logged += 1;
                t.last_step = step.step;
                t.max_steps = step.max_steps.or(t.max_steps);
                t.peak_gpu_memory = t.peak_gpu_memory.max(step.peak_gpu_memory);
            }
        }
        if let Some(oom) = parse_oom_line(line) {
            let entry = self.oom.get_or_insert_with(|| Oom {
                lines: 0,
                ranks: Vec::new(),
                tried_to_allocate: oom.tried_to_allocate,
                message: oom.message.chars().take(EXAMPLE_CHARS).collect(),
            });
            entry.lines += 1;
            self.oom_ranks.extend(oom.rank);
        }
    }

    /// Computes peaks, breakdowns and the cross-rank summary.
    pub fn finish(self, inputs: Vec<String>) -> Report {
        let mut ranks: Vec<RankReport> = self.ranks.into_values().map(|s| s.report).collect();
        for rank in &mut ranks {
            rank.peak = peak(&rank.pipeline);
            rank.breakdown = breakdown(rank);
        }
        let oom = self.oom.map(|mut o| {
            o.ranks = self.oom_ranks.into_iter().collect();
            o
        });
        Report {
            schema_version: SCHEMA_VERSION,
            inputs,
            stats: self.stats,
            training: self.training,
            oom,
            summary: summary(&ranks),
            ranks,
        }
    }
}

impl RankState {
    fn event(&mut self, event: Event<'_>) {
        let r = &mut self.report;
        match event {
            Event::Setup { label, detail } => {
                let change = self.last_setup_alloc.map(|prev| detail.allocated - prev);
                self.last_setup_alloc = Some(detail.allocated);
                r.setup.push(SetupEntry {
                    phase: SetupPhase::SetupModel,
                    label: label.to_owned(),
                    allocated: Some(detail.allocated),
                    cached: Some(detail.cached),
                    non_pytorch: Some(detail.non_pytorch),
                    change,
                });
                set_last(r, PointSource::Setup, label.to_owned(), detail.allocated);
            }
            Event::ProcessGroup {
                cuda_context,
                after_nccl_world,
                nccl_world_cost,
            } => {
                let entry = |label: &str, non_pytorch, change| SetupEntry {
                    phase: SetupPhase::InitProcessGroup,
                    label: label.to_owned(),
                    allocated: None,
                    cached: None,
                    non_pytorch: Some(non_pytorch),
                    change,
                };
                r.setup.push(entry("CUDA context", cuda_context, None));
                r.setup.push(entry(
                    "after NCCL world",
                    after_nccl_world,
                    Some(nccl_world_cost),
                ));
            }
            Event::DeviceMesh {
                non_pytorch,
                mesh_cost,
            } => r.setup.push(SetupEntry {
                phase: SetupPhase::InitDeviceMesh,
                label: "after device mesh".to_owned(),
                allocated: None,
                cached: None,
                non_pytorch: Some(non_pytorch),
                change: Some(mesh_cost),
            }),
            Event::CheckpointLoad {
                optimizer_state,
                param_entries,
                detail,
            } => {
                r.checkpoint = Some(Checkpoint {
                    optimizer_state,
                    param_entries,
                    allocated: detail.allocated,
                    cached: detail.cached,
                    non_pytorch: detail.non_pytorch,
                });
                let label = "after checkpoint load".to_owned();
                set_last(r, PointSource::Checkpoint, label, detail.allocated);
            }
            Event::Pipeline { pp, point } => self.pipeline(pp, point),
            Event::Probe { label, allocated } => self.probe(label, allocated),
            Event::SavedHeader { layer, stage } => {
                r.saved_tensors.push(SavedGroup {
                    layer,
                    stage: stage.to_owned(),
                    activations: 0,
                    weights: 0,
                    count: 0,
                    complete: false,
                    tensors: Vec::new(),
                });
                self.open_saved = Some(r.saved_tensors.len() - 1);
            }
            Event::SavedTensor {
                weight,
                shape,
                dtype,
                size,
            } => {
                let Some(group) = self.open_saved.map(|g| &mut r.saved_tensors[g]) else {
                    r.unparsed_memory_lines += 1;
                    return;
                };
                let dtype = dtype.strip_prefix("torch.").unwrap_or(dtype).to_owned();
                group.tensors.push(SavedTensor {
                    weight,
                    shape: parse_shape(shape),
                    dtype,
                    size,
                });
                group.count += 1;
                if weight {
                    group.weights += size;
                } else {
                    group.activations += size;
                }
            }
            Event::SavedSummary {
                activations,
                weights,
                count,
            } => {
                let Some(group) = self.open_saved.take().map(|g| &mut r.saved_tensors[g]) else {
                    r.unparsed_memory_lines += 1;
                    return;
                };
                group.activations = activations;
                group.weights = weights;
                group.count = count;
                group.complete = true;
            }
            Event::Snapshot { path } => r.snapshots.push(Snapshot {
                path: path.to_owned(),
                after_oom: !path.contains("_step"),
            }),
        }
    }

    fn pipeline(&mut self, pp: u32, point: PipelinePoint) {
        let r = &mut self.report;
        r.pp.get_or_insert(pp);
        let Detail {
            cached,
            non_pytorch,
            ..
        } = point.detail;
        let change = r
            .pipeline
            .last()
            .map(|prev| point.allocated - prev.allocated);
        let entry = PipelineEntry {
            kind: point.kind,
            i: point.i,
            count: point.count,
            allocated: point.allocated,
            cached,
            non_pytorch,
            delta: point.delta,
            change,
        };
        // Only the newest point is kept as a label string; building it per print would cost
        // an allocation on the hot path, so it is made lazily at the end (see `finish`).
        r.last_point = Some(LastPoint {
            source: PointSource::Pipeline,
            label: String::new(),
            allocated: point.allocated,
        });
        r.pipeline.push(entry);
    }

    fn probe(&mut self, raw_label: &str, allocated: i64) {
        let r = &mut self.report;
        let position = r.pipeline.len();
        let change = match self.last_probe {
            Some((pos, prev)) if pos == position => Some(allocated - prev),
            _ => None,
        };
        self.last_probe = Some((position, allocated));
        let label = raw_label.trim();
        let (tensor, shape, before) = match split_tensor(label) {
            Some((before, name, shape)) => (Some(name.to_owned()), parse_shape(shape), before),
            None => (None, None, label),
        };
        if let Some(step) = label.strip_prefix("experts:") {
            let step = match &tensor {
                Some(_) => before.strip_prefix("experts:").unwrap_or(step),
                None => step,
            };
            r.experts.push(ExpertProbe {
                pipeline_position: position,
                step: step.trim().to_owned(),
                tensor,
                shape,
                allocated,
                change,
            });
            set_last(r, PointSource::Experts, label.to_owned(), allocated);
            return;
        }
        let indent = raw_label.len() - raw_label.trim_start().len();
        r.layers.push(LayerProbe {
            pipeline_position: position,
            label: label.to_owned(),
            depth: u8::from(indent > 0),
            layer: number_after(label, "layer"),
            stage: number_after(label, "stage"),
            tensor,
            shape,
            allocated,
            change,
        });
        set_last(r, PointSource::Layer, label.to_owned(), allocated);
    }
}

fn set_last(r: &mut RankReport, source: PointSource, label: String, allocated: i64) {
    r.last_point = Some(LastPoint {
        source,
        label,
        allocated,
    });
}

/// Splits `… name=(shape)` at the end of a probe label into (text before, name, shape).
fn split_tensor(label: &str) -> Option<(&str, &str, &str)> {
    let eq = label.rfind("=(")?;
    let shape = &label[eq + 1..];
    if !shape.ends_with(')') {
        return None;
    }
    let head = &label[..eq];
    let name_start = head.rfind(char::is_whitespace).map_or(0, |p| p + 1);
    let name = &head[name_start..];
    (!name.is_empty()).then(|| (head[..name_start].trim_end(), name, shape))
}

/// `(4096, 2048)` → `[4096, 2048]`; `()` → `[]`; anything else → `None`.
fn parse_shape(text: &str) -> Option<Vec<u64>> {
    let inner = text.strip_prefix('(')?.strip_suffix(')')?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}

/// The number right after the first `word` that is followed by a digit (`layer5` → 5).
fn number_after(label: &str, word: &str) -> Option<u32> {
    label.match_indices(word).find_map(|(at, _)| {
        let rest = &label[at + word.len()..];
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..n].parse().ok()
    })
}

fn peak(pipeline: &[PipelineEntry]) -> Option<Peak> {
    // The first of equal maxima: the moment the peak was reached.
    let (index, e) = pipeline
        .iter()
        .enumerate()
        .rev()
        .max_by_key(|(_, e)| e.allocated)?;
    Some(Peak {
        index,
        label: e.label(),
        allocated: e.allocated,
        cached: e.cached,
        non_pytorch: e.non_pytorch,
    })
}

fn breakdown(rank: &mut RankReport) -> Option<Breakdown> {
    if let Some(last) = rank
        .last_point
        .as_mut()
        .filter(|l| l.source == PointSource::Pipeline)
    {
        last.label = rank
            .pipeline
            .last()
            .map(PipelineEntry::label)
            .unwrap_or_default();
    }
    let peak = rank.peak.as_ref()?;
    let before = rank
        .pipeline
        .iter()
        .find(|e| e.kind == PipelineKind::BeforePipeline)
        .unwrap_or(&rank.pipeline[0]);
    let static_alloc = before.allocated.max(0);
    let setup_alloc = rank
        .setup
        .iter()
        .rev()
        .find_map(|e| e.allocated)
        .unwrap_or(0);
    let weights = setup_alloc.clamp(0, static_alloc);
    let optimizer_state = rank
        .checkpoint
        .as_ref()
        .map_or(0, |c| c.optimizer_state.clamp(0, static_alloc - weights));
    let other_static = static_alloc - weights - optimizer_state;
    let activations = (peak.allocated - static_alloc).max(0);
    let cached = peak.cached.max(0);
    let non_pytorch = peak.non_pytorch.max(0);
    Some(Breakdown {
        weights,
        optimizer_state,
        other_static,
        activations,
        cached,
        non_pytorch,
        total: static_alloc + activations + cached + non_pytorch,
    })
}

fn summary(ranks: &[RankReport]) -> Summary {
    let peaks: Vec<RankPeak> = ranks
        .iter()
        .filter_map(|r| {
            let p = r.peak.as_ref()?;
            Some(RankPeak {
                rank: r.rank,
                pp: r.pp,
                label: p.label.clone(),
                allocated: p.allocated,
                cached: p.cached,
                non_pytorch: p.non_pytorch,
            })
        })
        .collect();
    let peak_rank = peaks
        .iter()
        .rev()
        .max_by_key(|p| p.allocated)
        .map(|p| p.rank);
    let mut by_stage: BTreeMap<u32, StagePeak> = BTreeMap::new();
    for p in &peaks {
        let Some(pp) = p.pp else { continue };
        let s = by_stage.entry(pp).or_insert(StagePeak {
            pp,
            ranks: Vec::new(),
            max_allocated: p.allocated,
            min_allocated: p.allocated,
        });
        s.ranks.push(p.rank);
        s.max_allocated = s.max_allocated.max(p.allocated);
        s.min_allocated = s.min_allocated.min(p.allocated);
    }
    let stages: Vec<StagePeak> = by_stage.into_values().collect();
    let imbalance = match (
        stages.iter().rev().max_by_key(|s| s.max_allocated),
        stages.iter().min_by_key(|s| s.max_allocated),
    ) {
        (Some(hi), Some(lo)) if stages.len() > 1 => {
            let spread = hi.max_allocated - lo.max_allocated;
            Some(Imbalance {
                highest_pp: hi.pp,
                highest: hi.max_allocated,
                lowest_pp: lo.pp,
                lowest: lo.max_allocated,
                spread,
                ratio: if hi.max_allocated > 0 {
                    spread as f64 / hi.max_allocated as f64
                } else {
                    0.0
                },
            })
        }
        _ => None,
    };
    Summary {
        peak_rank,
        peaks,
        stages,
        imbalance,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: i64 = 1 << 30;

    fn build(text: &str) -> Report {
        let mut b = ReportBuilder::new(None);
        for line in text.split('\n') {
            b.count_lines(1);
            b.line(line.as_bytes());
        }
        b.finish(vec![])
    }

    fn pipe(rank: u32, pp: u32, label: &str, gib: &str) -> String {
        format!("[rank={rank} pp={pp}] {label}: {gib} GiB | alloc={gib} cached=1.00 non-pt=2.00")
    }

    #[test]
    fn every_rank_tag_counts_as_one_memory_line_even_when_prints_share_a_line() {
        let line = format!(
            "{}{}",
            pipe(0, 0, "Before pipeline", "1.00"),
            pipe(1, 1, "Before pipeline", "2.00")
        );
        let r = build(&format!("{line}\n[rank=5] garbage"));
        assert_eq!(r.stats.memory_lines, 3);
        assert_eq!(r.stats.unparsed_memory_lines, 1);
        assert_eq!(r.stats.unparsed_examples, ["[rank=5] garbage"]);
        let counts: Vec<_> = r
            .ranks
            .iter()
            .map(|r| (r.rank, r.pipeline.len(), r.unparsed_memory_lines))
            .collect();
        assert_eq!(counts, [(0, 1, 0), (1, 1, 0), (5, 0, 1)]);
    }

    #[test]
    fn interleaved_ranks_get_their_own_timelines_and_changes() {
        let r = build(
            &[
                pipe(0, 0, "Before pipeline", "10.00"),
                pipe(1, 1, "Before pipeline", "20.00"),
                pipe(0, 0, "Step1 F0 i=0", "12.00"),
                pipe(1, 1, "Step1 F0 i=0", "21.00"),
                pipe(0, 0, "After Step8 (end of pipeline)", "11.00"),
            ]
            .join("\n"),
        );
        let r0 = &r.ranks[0];
        assert_eq!(
            r0.pipeline.iter().map(|e| e.change).collect::<Vec<_>>(),
            [None, Some(2 * G), Some(-G)]
        );
        let peak = r0.peak.as_ref().unwrap();
        assert_eq!(
            (peak.index, peak.label.as_str(), peak.allocated),
            (1, "Step1 F0 i=0", 12 * G)
        );
        let b = r0.breakdown.as_ref().unwrap();
        assert_eq!(
            (b.other_static, b.activations, b.cached, b.non_pytorch),
            (10 * G, 2 * G, G, 2 * G)
        );
        assert_eq!(b.total, 15 * G);
        assert_eq!(r.summary.peak_rank, Some(1));
        let imb = r.summary.imbalance.as_ref().unwrap();
        assert_eq!((imb.highest_pp, imb.lowest_pp, imb.spread), (1, 0, 9 * G));
    }

    #[test]
    fn the_breakdown_splits_static_memory_into_weights_and_optimizer_state() {
        let r = build(&[
            "[rank=0] setup_model | after apply_fsdp: alloc=4.00 cached=0.00 non-pt=1.00".to_owned(),
            "[rank=0] load_ckpt | optimizer state: 3.00 GiB (10 param entries) | alloc=8.00 cached=0.00 non-pt=1.00".to_owned(),
            pipe(0, 0, "Before pipeline", "9.00"),
            pipe(0, 0, "Step1 F0 i=0", "10.00"),
        ]
        .join("\n"));
        let b = r.ranks[0].breakdown.clone().unwrap();
        assert_eq!(
            (b.weights, b.optimizer_state, b.other_static, b.activations),
            (4 * G, 3 * G, 2 * G, G)
        );
    }

    #[test]
    fn probes_are_split_into_layers_and_experts_with_per_pass_changes() {
        let r = build(&[
            pipe(0, 0, "Step1 F0 i=0", "1.00"),
            "[rank=0]     layer5 stage1: before forward_stage1_compute: alloc=1.00".to_owned(),
            "[rank=0]     layer5 stage1: after dispatch_prep  dispatch=(8192, 2048): alloc=1.50".to_owned(),
            "[rank=0]       experts: after gate_up_proj gate_up=(4096, 1536): alloc=1.75".to_owned(),
            "[rank=0]   layer5 after stage1 (forward_stage1: attn + gate + dispatch_prep): alloc=2.00".to_owned(),
            pipe(0, 0, "Step1 F0 i=1", "2.00"),
            "[rank=0]   after prolog (embed_tokens): alloc=2.50".to_owned(),
        ]
        .join("\n"));
        let rank = &r.ranks[0];
        let layers: Vec<_> = rank
            .layers
            .iter()
            .map(|l| (l.depth, l.layer, l.stage, l.change))
            .collect();
        assert_eq!(
            layers,
            [
                (1, Some(5), Some(1), None),
                (1, Some(5), Some(1), Some(G / 2)),
                (0, Some(5), Some(1), Some(G / 4)),
                (0, None, None, None)
            ]
        );
        assert_eq!(rank.layers[1].tensor.as_deref(), Some("dispatch"));
        assert_eq!(rank.layers[1].shape, Some(vec![8192, 2048]));
        let e = &rank.experts[0];
        assert_eq!(
            (e.step.as_str(), e.tensor.as_deref(), e.change),
            ("after gate_up_proj", Some("gate_up"), Some(G / 4))
        );
        assert_eq!(
            rank.last_point.as_ref().unwrap().label,
            "after prolog (embed_tokens)"
        );
    }

    #[test]
    fn saved_tensor_groups_use_the_summary_and_survive_a_missing_one() {
        let r = build(
            "[rank=0] layer5 stage1 saved tensors:\n\
             [rank=0]     saved (activ): (4096, 2048) torch.bfloat16 (16.0 MB)\n\
             [rank=0]     saved (weight): (2048,) torch.float32 (0.5 MB)\n\
             [rank=0]   activ=16.0 MB, weight=0.5 MB, total=2 tensors\n\
             [rank=0] layer5 stage3 saved tensors:\n\
             [rank=0]     saved (activ): (8, 4) torch.bfloat16 (1.0 MB)",
        );
        let g = &r.ranks[0].saved_tensors;
        assert_eq!(
            (g[0].activations, g[0].weights, g[0].count, g[0].complete),
            (16 << 20, 1 << 19, 2, true)
        );
        assert_eq!(g[0].tensors[1].shape, Some(vec![2048]));
        assert_eq!(g[0].tensors[0].dtype, "bfloat16");
        assert_eq!(
            (g[1].stage.as_str(), g[1].activations, g[1].complete),
            ("stage3", 1 << 20, false)
        );
    }

    #[test]
    fn an_oom_is_reported_with_each_rank_last_point() {
        let r = build(&[
            pipe(0, 0, "Step3 i=0 before B1", "30.00"),
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has".to_owned(),
            "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has".to_owned(),
            "[rank=0] Memory snapshot saved to /tmp/memory_snapshot_rank0.pickle".to_owned(),
        ]
        .join("\n"));
        let oom = r.oom.as_ref().unwrap();
        assert_eq!(
            (oom.lines, oom.ranks.as_slice(), oom.tried_to_allocate),
            (2, &[0][..], Some(2 * G))
        );
        let last = r.ranks[0].last_point.as_ref().unwrap();
        assert_eq!(
            (last.label.as_str(), last.allocated),
            ("Step3 i=0 before B1", 30 * G)
        );
        assert!(r.ranks[0].snapshots[0].after_oom);
    }

    #[test]
    fn step_lines_are_aggregated() {
        let r = build(
            "t | INFO | step 00000001/00000100 | step-time 9.000 sec | peak-gpu-memory 60.00 GB\n\
             t | INFO | step 00000002/00000100 | step-time 1.000 sec | peak-gpu-memory 61.00 GB",
        );
        let t = r.training.unwrap();
        assert_eq!(
            (t.steps_logged, t.first_step, t.last_step, t.max_steps),
            (2, 1, 2, Some(100))
        );
        assert_eq!(
            (t.first_step_time_s, t.peak_gpu_memory),
            (Some(9.0), Some(61 * G))
        );
    }

    #[test]
    fn a_rank_filter_keeps_stats_for_all_ranks() {
        let mut b = ReportBuilder::new(Some([1].into()));
        b.line(pipe(0, 0, "Before pipeline", "1.00").as_bytes());
        b.line(pipe(1, 0, "Before pipeline", "1.00").as_bytes());
        let r = b.finish(vec![]);
        assert_eq!(r.stats.memory_lines, 2);
        assert_eq!(r.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(), [1]);
    }

    #[test]
    fn shapes_and_tensor_names_are_read_off_labels() {
        assert_eq!(
            split_tensor("after scatter      output_tokens=(4, 2)"),
            Some(("after scatter", "output_tokens", "(4, 2)"))
        );
        assert_eq!(split_tensor("after norm, before lm_head"), None);
        assert_eq!(parse_shape("()"), Some(vec![]));
        assert_eq!(parse_shape("(a, 2)"), None);
    }
}
