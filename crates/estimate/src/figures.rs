//! What the estimator predicts for one pp rank ([`Estimate`]), read from the driver's JSON.
//!
//! Contract: [`from_driver_output`] takes the driver's whole stdout, finds its one marker line
//! and fails with [`EstimateError::Unparseable`] when it is missing or its JSON is not what the
//! driver writes. Every size is in bytes, as the estimator computed it. An event's `allocated`
//! is what the estimator's snapshot holds in PyTorch tensors (static + dynamic: what
//! `torch.cuda.memory_allocated()` would count), without the non-PyTorch figure and the
//! fragmentation it adds on top for its TOTAL.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::EstimateError;
use super::schedule::{Schedule, ScheduleEvent};

/// The driver's marker, in front of its one JSON line.
pub const DRIVER_MARKER: &str = "MEMPRINTS-ESTIMATE-JSON ";
const DRIVER_VERSION: u32 = 1;

/// Where an [`Estimate`]'s figures were read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The estimator's own objects, through the driver: exact bytes.
    Driver,
    /// The estimator's text output: rounded as it prints them (see [`super::text`]).
    Text,
}

/// The estimator's OK/TIGHT/OOM against the GPU capacity it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// `STATUS: OK`: the peak TOTAL leaves at least 5 % of the GPU free.
    Ok,
    /// `STATUS: TIGHT`: it fits with less than 5 % free.
    Tight,
    /// `STATUS: OOM`: it exceeds the GPU's capacity.
    Oom,
}

/// The model as the estimator read it from the config.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSummary {
    /// The config's `model_type` (`qwen3_moe`); empty when the estimator's config has none.
    pub model_type: String,
    /// `num_hidden_layers`: decoder layers in the whole model; 0 when absent.
    pub layers: u32,
    /// `num_experts`: routed experts per MoE layer; 0 when absent (a dense model).
    pub experts: u32,
    /// `num_experts_per_tok`: experts each token is routed to; 0 when absent.
    pub experts_per_token: u32,
    /// Every field of the estimator's `ModelConfig` (empty when read from text): what it knows.
    pub fields: BTreeMap<String, serde_json::Value>,
}

/// The parallelism and batch the estimator simulated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parallel {
    /// Pipeline parallel size.
    pub pp: u32,
    /// Expert parallel size.
    pub ep: u32,
    /// Data parallel size, as the estimator derived it: GPUs ÷ (pp × ep × cp).
    pub dp: u32,
    /// Context parallel size.
    pub cp: u32,
    /// Sequences per micro-batch.
    pub micro_batch_size: u32,
    /// Sequences per optimizer step.
    pub global_batch_size: u32,
    /// Tokens per sequence.
    pub sequence_length: u32,
    /// Micro-batches each pipeline step runs: global ÷ (micro × dp × ep).
    pub num_chunks: u32,
}

/// One event of the estimator's timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimatedEvent {
    /// As the estimator labels it (`S4.i0 fwd_bwd(p1,p0) fc1/bc0`).
    pub label: String,
    /// PyTorch tensors at the snapshot, bytes: static + dynamic, without non-PyTorch and
    /// fragmentation.
    pub allocated: i64,
    /// PyTorch tensors, bytes, after the simulator frees a `fwd_bwd`'s backward chunk (equal to
    /// `allocated` for other events); `None` when that chunk's size is unknown (text output).
    pub allocated_after: Option<i64>,
}

/// One module's parameters, as the estimator counts them during the pipeline (bf16, unsharded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageParams {
    /// 0 or 1: the model chunk (phase).
    pub module: u8,
    /// The pipeline stage it runs (0 … 2·pp − 1).
    pub stage: u32,
    /// The module's parameter bucket (`module[M] params (stage S)`), bytes.
    pub bytes: i64,
    /// Of which the rotary cos/sin caches (specs named `rotary_emb`), bytes.
    pub rotary_bytes: i64,
}

/// The estimator's dynamic memory at its peak event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Dynamic {
    /// LayerRecord tensors of every live chunk, bytes.
    pub activations: i64,
    /// Autograd saved tensors of every live chunk, bytes.
    pub autograd: i64,
    /// Parameter gradients of the modules that have run a backward so far, bytes (`gradients`).
    pub gradients: i64,
    /// P2P receive and all-to-all buffers, bytes (`comm_buffers`).
    pub comm_buffers: i64,
    /// Tensors held for deferred weight gradients, bytes (`weight_grad_store`).
    pub wgrad_store: i64,
    /// Phase-0 outputs the last pp rank keeps for its phase 1, bytes (`pp_transfer_buffers`).
    pub pp_transfer: i64,
}

impl Dynamic {
    /// The sum of all six, bytes: the estimator's `dynamic_bytes`.
    pub fn total(&self) -> i64 {
        self.activations
            + self.autograd
            + self.gradients
            + self.comm_buffers
            + self.wgrad_store
            + self.pp_transfer
    }
}

/// Which part of a model chunk a [`LayerPart`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Part {
    /// The embedding before the first decoder layer (`prolog.` specs).
    Prolog,
    /// Decoder layer `layer`, DualPipeV stage `stage` (1, 3 or 5).
    Layer {
        /// The decoder layer's index in the whole model.
        layer: u32,
        /// The DualPipeV stage inside the layer.
        stage: u8,
    },
    /// The final norm and head after the last decoder layer (`epilog.` specs).
    Epilog,
}

/// One chunk's activations for one part of a module, as the estimator sizes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct LayerPart {
    /// 0 or 1: the model chunk (module) it belongs to.
    pub phase: u8,
    /// Which part of that chunk.
    pub part: Part,
    /// LayerRecord tensors, bytes.
    pub records: i64,
    /// Autograd saved tensors, bytes.
    pub autograd: i64,
    /// Sized as an MoE layer (router and expert tensors).
    pub moe: bool,
}

/// What the estimator predicts for one pp rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The pp rank the estimator ran for (`--pp-rank`).
    pub pp_rank: u32,
    /// Where the figures were read from.
    pub source: Source,
    /// The model as the estimator read it.
    pub model: ModelSummary,
    /// The parallelism and batch it simulated.
    pub parallel: Parallel,
    /// Its timeline, one event per snapshot, in order (`static_baseline` first).
    pub events: Vec<EstimatedEvent>,
    /// The unsharded parameters of each of the rank's two modules (`params_unsharded`).
    pub params: Vec<StageParams>,
    /// Persistent FSDP-sharded parameter copies, bytes (`fsdp_sharded_params`; only shards
    /// split over more than one GPU).
    pub fsdp_sharded: i64,
    /// The estimator's optimizer state (Adam m + v in fp32 over the sharded parameters), bytes.
    pub optimizer: i64,
    /// Index into `events` of the estimator's peak (`peak_event_idx`: the highest TOTAL).
    pub peak_index: usize,
    /// The dynamic memory of the peak event, component by component.
    pub at_peak: Dynamic,
    /// The estimator's fixed figure for CUDA context, NCCL, FSDP and compile workspaces, bytes.
    pub non_pytorch: i64,
    /// The share of the subtotal the estimator adds as fragmentation (0.10 = 10 %, its
    /// `--fragmentation`).
    pub fragmentation_factor: f64,
    /// `fragmentation_factor × (allocated + non_pytorch)` at the peak, bytes.
    pub fragmentation_at_peak: i64,
    /// The estimator's TOTAL at the peak: allocated + non-PyTorch + fragmentation, bytes.
    pub total_at_peak: i64,
    /// The GPU capacity the status is judged against, bytes (`--gpu-memory-gb` × 2³⁰).
    pub gpu_memory: i64,
    /// The estimator's `STATUS:` line; `None` when its output has none.
    pub status: Option<Status>,
    /// One chunk per phase, part by part.
    pub layers: Vec<LayerPart>,
    /// How the figures were read, when it matters (text output, rounding).
    pub notes: Vec<String>,
}

impl Estimate {
    /// Parameters, FSDP shards and optimizer state: constant through the step.
    pub fn static_bytes(&self) -> i64 {
        self.params.iter().map(|p| p.bytes).sum::<i64>() + self.fsdp_sharded + self.optimizer
    }

    /// The peak event.
    pub fn peak(&self) -> &EstimatedEvent {
        &self.events[self.peak_index]
    }

    /// The timeline's labels, read as schedule events.
    pub fn schedule(&self) -> Schedule {
        Schedule::new(self.events.iter().map(|e| e.label.as_str()))
    }

    /// Autograd saved tensors of decoder layer `layer`'s stage `stage` for one chunk, when the
    /// layer is on this rank.
    pub fn autograd_of(&self, layer: u32, stage: u8) -> Option<i64> {
        let wanted = Part::Layer { layer, stage };
        let parts: Vec<_> = self.layers.iter().filter(|p| p.part == wanted).collect();
        (!parts.is_empty()).then(|| parts.iter().map(|p| p.autograd).sum())
    }
}

#[derive(Deserialize)]
struct DriverOutput {
    driver_version: u32,
    ranks: Vec<DriverRank>,
}

#[derive(Deserialize)]
struct DriverRank {
    pp_rank: u32,
    model: BTreeMap<String, serde_json::Value>,
    parallel: Parallel,
    gpu_memory_bytes: i64,
    status: Option<Status>,
    non_pytorch_bytes: i64,
    fragmentation_factor: f64,
    peak_index: usize,
    peak_total_bytes: i64,
    params: Vec<DriverParams>,
    fsdp_sharded_bytes: i64,
    optimizer: DriverOptimizer,
    timeline: Vec<DriverEvent>,
    layers: Vec<DriverPart>,
}

#[derive(Deserialize)]
struct DriverParams {
    name: String,
    bytes: i64,
    rotary_bytes: i64,
}

#[derive(Deserialize)]
struct DriverOptimizer {
    bytes: i64,
}

#[derive(Deserialize)]
struct DriverEvent {
    name: String,
    static_bytes: i64,
    activation_bytes: i64,
    autograd_bytes: i64,
    gradient_bytes: i64,
    comm_bytes: i64,
    wgrad_store_bytes: i64,
    pp_transfer_bytes: i64,
    fragmentation_bytes: i64,
    /// `[phase, chunk, bytes]` of every live chunk.
    live: Vec<(u8, u32, i64)>,
}

#[derive(Deserialize)]
struct DriverPart {
    phase: u8,
    part: String,
    layer: Option<u32>,
    stage: Option<u8>,
    records_bytes: i64,
    autograd_bytes: i64,
    moe: bool,
}

impl DriverEvent {
    fn dynamic(&self) -> Dynamic {
        Dynamic {
            activations: self.activation_bytes,
            autograd: self.autograd_bytes,
            gradients: self.gradient_bytes,
            comm_buffers: self.comm_bytes,
            wgrad_store: self.wgrad_store_bytes,
            pp_transfer: self.pp_transfer_bytes,
        }
    }

    fn estimated(&self) -> EstimatedEvent {
        let allocated = self.static_bytes + self.dynamic().total();
        let released = ScheduleEvent::parse(&self.name)
            .and_then(|e| e.released_after())
            .and_then(|(phase, chunk)| {
                self.live
                    .iter()
                    .find(|(p, c, _)| (*p, *c) == (phase, chunk))
            })
            .map_or(0, |(_, _, bytes)| *bytes);
        EstimatedEvent {
            label: self.name.clone(),
            allocated,
            allocated_after: Some(allocated - released),
        }
    }
}

/// `module[1] params (stage 3)` → (1, 3).
pub(crate) fn module_stage(name: &str) -> Option<(u8, u32)> {
    let rest = name.strip_prefix("module[")?;
    let (module, rest) = rest.split_once("] params (stage ")?;
    let stage = rest.strip_suffix(')')?;
    Some((module.parse().ok()?, stage.parse().ok()?))
}

fn unparseable(reason: impl Into<String>) -> EstimateError {
    EstimateError::Unparseable {
        reason: reason.into(),
    }
}

/// Reads the driver's stdout: one [`Estimate`] per pp rank it ran, in its order.
pub fn from_driver_output(stdout: &str) -> Result<Vec<Estimate>, EstimateError> {
    let json = stdout
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix(DRIVER_MARKER))
        .ok_or_else(|| unparseable("the driver printed no result line"))?;
    from_driver_json(json)
}

/// Reads the driver's JSON document (the marker line without its marker).
pub fn from_driver_json(json: &str) -> Result<Vec<Estimate>, EstimateError> {
    let output: DriverOutput =
        serde_json::from_str(json).map_err(|e| unparseable(format!("driver JSON: {e}")))?;
    if output.driver_version != DRIVER_VERSION {
        return Err(unparseable(format!(
            "driver version {} (this memprints reads {DRIVER_VERSION})",
            output.driver_version
        )));
    }
    output.ranks.into_iter().map(rank_estimate).collect()
}

fn rank_estimate(rank: DriverRank) -> Result<Estimate, EstimateError> {
    let peak = rank.timeline.get(rank.peak_index).ok_or_else(|| {
        unparseable(format!(
            "peak event #{} of a {}-event timeline",
            rank.peak_index,
            rank.timeline.len()
        ))
    })?;
    let params = rank
        .params
        .iter()
        .map(|p| {
            let (module, stage) = module_stage(&p.name)
                .ok_or_else(|| unparseable(format!("parameter bucket `{}`", p.name)))?;
            Ok(StageParams {
                module,
                stage,
                bytes: p.bytes,
                rotary_bytes: p.rotary_bytes,
            })
        })
        .collect::<Result<Vec<_>, EstimateError>>()?;
    let layers = rank
        .layers
        .iter()
        .filter_map(|p| {
            let part = match (p.part.as_str(), p.layer, p.stage) {
                ("prolog", ..) => Part::Prolog,
                ("epilog", ..) => Part::Epilog,
                ("layer", Some(layer), Some(stage)) => Part::Layer { layer, stage },
                _ => return None,
            };
            Some(LayerPart {
                phase: p.phase,
                part,
                records: p.records_bytes,
                autograd: p.autograd_bytes,
                moe: p.moe,
            })
        })
        .collect();
    let field = |name: &str| {
        rank.model
            .get(name)
            .and_then(serde_json::Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(0)
    };
    let model = ModelSummary {
        model_type: rank
            .model
            .get("model_type")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned(),
        layers: field("num_hidden_layers"),
        experts: field("num_experts"),
        experts_per_token: field("num_experts_per_tok"),
        fields: rank.model.clone(),
    };
    let mut estimate = Estimate {
        pp_rank: rank.pp_rank,
        source: Source::Driver,
        model,
        parallel: rank.parallel,
        events: rank.timeline.iter().map(DriverEvent::estimated).collect(),
        params,
        fsdp_sharded: rank.fsdp_sharded_bytes,
        optimizer: rank.optimizer.bytes,
        peak_index: rank.peak_index,
        at_peak: peak.dynamic(),
        non_pytorch: rank.non_pytorch_bytes,
        fragmentation_factor: rank.fragmentation_factor,
        fragmentation_at_peak: peak.fragmentation_bytes,
        total_at_peak: rank.peak_total_bytes,
        gpu_memory: rank.gpu_memory_bytes,
        status: rank.status,
        layers,
        notes: Vec::new(),
    };
    estimate.layers.sort_by_key(|p| (p.phase, p.part));
    Ok(estimate)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::{Action, ScheduleEvent};

    const QWEN3_PP1: &str = include_str!("../../../tests/data/estimate/qwen3-tiny-pp1.json");
    const QWEN3_PP2: &str = include_str!("../../../tests/data/estimate/qwen3-tiny-pp2.json");
    const BIG_PP4: &str = include_str!("../../../tests/data/estimate/qwen3-big-pp4.json");

    #[test]
    fn the_recorded_qwen3_tiny_estimate_reads_to_the_estimators_figures() {
        let estimates = from_driver_json(QWEN3_PP1).unwrap();
        assert_eq!(estimates.len(), 1);
        let e = &estimates[0];
        assert_eq!(
            (e.pp_rank, e.source, e.status),
            (0, Source::Driver, Some(Status::Ok))
        );
        assert_eq!(
            (e.model.layers, e.model.experts, e.model.experts_per_token),
            (4, 8, 2)
        );
        assert_eq!(e.parallel.num_chunks, 8);
        assert_eq!(e.events.len(), 21);
        assert_eq!(e.peak().label, "S4.i0 fwd_bwd(p1,p0) fc1/bc0");
        // The estimator's TOTAL is allocated + non-PyTorch + fragmentation, to the byte.
        assert_eq!(
            e.peak().allocated + e.non_pytorch + e.fragmentation_at_peak,
            e.total_at_peak
        );
        assert_eq!(
            e.static_bytes(),
            e.events[0].allocated - e.at_peak.comm_buffers
        );
        // 4.84 GiB of fixed non-PyTorch figure for a single GPU: 0.52 + 0.39 + 0.96 + 2.97.
        assert_eq!(e.non_pytorch, 5_196_910_427);
        let stages: Vec<_> = e.params.iter().map(|p| (p.module, p.stage)).collect();
        assert_eq!(stages, [(0, 0), (1, 1)]);
        assert_eq!(e.params[0].rotary_bytes, 2 * 40960 * 64 * 2);
        assert_eq!(e.autograd_of(2, 1), Some(3_162_112));
        assert_eq!(e.autograd_of(9, 1), None);
    }

    #[test]
    fn an_overlap_event_is_also_given_after_its_backward_chunk_is_freed() {
        let e = &from_driver_json(QWEN3_PP1).unwrap()[0];
        let peak = e.peak();
        let phase0_chunk = e
            .layers
            .iter()
            .filter(|p| p.phase == 0)
            .map(|p| p.records + p.autograd)
            .sum::<i64>();
        assert_eq!(peak.allocated_after, Some(peak.allocated - phase0_chunk));
        for event in &e.events {
            let overlap = matches!(
                ScheduleEvent::parse(&event.label).map(|s| s.action),
                Some(Action::ForwardBackward { .. })
            );
            assert_eq!(
                overlap,
                event.allocated_after != Some(event.allocated),
                "{}",
                event.label
            );
        }
    }

    #[test]
    fn every_recorded_label_reads_as_a_schedule_event() {
        for json in [QWEN3_PP1, QWEN3_PP2, BIG_PP4] {
            for e in from_driver_json(json).unwrap() {
                let schedule = e.schedule();
                assert!(
                    schedule.events.iter().all(Option::is_some),
                    "pp rank {}",
                    e.pp_rank
                );
                let (pp, r) = (e.parallel.pp, e.pp_rank);
                let n = e.parallel.num_chunks;
                let expected = [
                    2 * (pp - r - 1),
                    r + 1,
                    pp - r - 1,
                    n - 2 * pp + r + 1,
                    pp - r - 1,
                    r + 1,
                    pp - r - 1,
                    r + 1,
                ];
                let counted: Vec<u32> = (1..=8).map(|s| schedule.iterations(s)).collect();
                assert_eq!(counted, expected, "pp={pp} rank {r}");
            }
        }
    }

    #[test]
    fn output_without_the_marker_or_with_another_version_is_refused() {
        let err = from_driver_output("hello\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read the memory estimator's output: the driver printed no result line"
        );
        let err = from_driver_json(r#"{"driver_version": 9, "ranks": []}"#).unwrap_err();
        assert!(err.to_string().contains("driver version 9"), "{err}");
        let noisy = format!(
            "a warning\n{DRIVER_MARKER}{}\n",
            QWEN3_PP1.replace('\n', "")
        );
        assert_eq!(from_driver_output(&noisy).unwrap().len(), 1);
    }
}
