/*!
What-if: each rank's steady-state peak predicted at other settings, component by component, by
scaling what was measured; and what to change, ranked by the GiB it saves on the worst rank.

The steady-state peak is the highest of PithTrain's per-step `peak-gpu-memory` (PyTorch's
`max_memory_allocated`) over steps ≥ 2: step 1 has no optimizer state yet. It is split into parts
that are each measured or derived from a measurement, and each part scales by its own rule
(memprints models the scaling itself; PithTrain's estimator is not run):

| part | measured from | rule |
|---|---|---|
| weights | the last `setup_model` print | ∝ layers held: pp / pp′ |
| other static | `Before pipeline` minus weights (and a loaded optimizer state) | fixed |
| gradients | `After Step8` minus `Before pipeline` of the peak's pass, at most the growth to the peak | ∝ layers held: pp / pp′ |
| optimizer state | the checkpoint print; else estimated from the optimizer the config names (Muon: the weights × 1, its momentum, a lower bound; AdamW: × 2), at most what the steady-state peak leaves; else the steady-state peak minus step 1's | ∝ layers held: pp / pp′ |
| activations | the prints' peak minus `Before pipeline`, less the gradients | tokens per micro-batch (seq·mb/cp, from the config line) for the share of saved bytes shaped by tokens, fixed for the rest; × the micro-batch stages in flight per layer under DualPipeV, (2pp+1)/(2pp) |
| unattributed | the steady-state peak minus the parts above | the optimizer step's peak above the pipeline's parts: max(0, opt′ − pipeline′), the optimizer step's peak ∝ layers held |

Two phases hold a step's peak: the pipeline (the parts above, activations included) and the
optimizer step after it (weights, gradients, optimizer state and the optimizer's temporaries, no
activations). The real sweep of `tests/data/whatif/` shows both: at 1,024 and 2,048 tokens per
micro-batch the steady-state peak is the optimizer step's (the same 9.05 GiB), from 4,096 on the
pipeline's, growing with the tokens. So the part above the pipeline's is taken as the optimizer
step's, and the predicted peak is the higher of the two phases; buffers inside one operation,
between two prints, are not scaled. The predicted device total (peak, allocator reserve, memory
outside the allocator) is set against the rank's capacity by the report's own rule
([`super::headroom::status_of`]).

Outside the peak (PyTorch's allocated memory) but on the device: the allocator's unused reserve
(its fraction of allocated at the prints' peak is kept) and the memory outside the allocator (CUDA
context, NCCL; fixed). Expert parallelism and the global batch size move none of the parts: the
expert share of the parameters is not in the log, and the peak does not depend on the number of
micro-batches per step once DualPipeV has its `2·pp` of them.

Contract: [`predict`] is pure; at the measured settings every predicted figure equals the measured
one (each factor is exactly 1). The steady-state peak is one figure per run (the step lines'):
the rank with the highest prints peak is matched to it, the others keep its unattributed part.
*/

use std::fmt;
use std::str::FromStr;

use memprints_estimate::LoggedConfig;

pub use super::schema::{
    Action, Component, Figure, Key, RankWhatIf, Settings, SettingsPair, WhatIfSection, WhatToChange,
};
use super::schema::{RankReport, Report, Run, SavedGroup, Training};

impl Key {
    /// Every key, in the order errors list them.
    pub const ALL: [Key; 6] = [
        Key::SequenceLength,
        Key::MicroBatchSize,
        Key::GlobalBatchSize,
        Key::PipelineParallelSize,
        Key::ExpertParallelSize,
        Key::ContextParallelSize,
    ];

    /// The key as `--what-if` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Key::SequenceLength => "sequence-length",
            Key::MicroBatchSize => "micro-batch-size",
            Key::GlobalBatchSize => "global-batch-size",
            Key::PipelineParallelSize => "pipeline-parallel-size",
            Key::ExpertParallelSize => "expert-parallel-size",
            Key::ContextParallelSize => "context-parallel-size",
        }
    }

    fn alias(self) -> Option<&'static str> {
        match self {
            Key::PipelineParallelSize => Some("pp"),
            Key::ExpertParallelSize => Some("ep"),
            Key::ContextParallelSize => Some("cp"),
            _ => None,
        }
    }

    /// The field as PithTrain's config names it (`training.micro_batch_size`).
    pub fn field(self) -> &'static str {
        match self {
            Key::SequenceLength => "training.sequence_length",
            Key::MicroBatchSize => "training.micro_batch_size",
            Key::GlobalBatchSize => "training.global_batch_size",
            Key::PipelineParallelSize => "distributed.pipeline_parallel_size",
            Key::ExpertParallelSize => "distributed.expert_parallel_size",
            Key::ContextParallelSize => "distributed.context_parallel_size",
        }
    }

    /// The key named by `text`: its kebab-case name, its alias, or PithTrain's snake_case field.
    fn parse(text: &str) -> Option<Key> {
        let text = text.trim().to_ascii_lowercase().replace('_', "-");
        Key::ALL
            .into_iter()
            .find(|k| k.name() == text || k.alias() == Some(text.as_str()))
    }

    /// `sequence-length, …, pipeline-parallel-size (pp), …`, for errors.
    fn list() -> String {
        let names: Vec<String> = Key::ALL
            .iter()
            .map(|k| match k.alias() {
                Some(a) => format!("{} ({a})", k.name()),
                None => k.name().to_owned(),
            })
            .collect();
        names.join(", ")
    }
}

/// One `--what-if KEY=VALUE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The setting.
    pub key: Key,
    /// Its value at the other configuration, at least 1.
    pub value: u32,
}

/// Why a `--what-if` could not be read; one line that lists the keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChangeError {
    /// No `=`.
    #[error("--what-if `{0}`: expected KEY=VALUE with KEY one of {keys}", keys = Key::list())]
    NotKeyValue(String),
    /// A key that is none of [`Key::ALL`].
    #[error("--what-if `{0}`: unknown key; use one of {keys}", keys = Key::list())]
    UnknownKey(String),
    /// A value that is not a whole number ≥ 1.
    #[error(
        "--what-if `{0}`: the value must be a whole number of at least 1 (keys: {keys})",
        keys = Key::list()
    )]
    BadValue(String),
}

impl FromStr for Change {
    type Err = ChangeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let Some((key, value)) = text.split_once('=') else {
            return Err(ChangeError::NotKeyValue(text.to_owned()));
        };
        let key = Key::parse(key).ok_or_else(|| ChangeError::UnknownKey(text.to_owned()))?;
        let value = value
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|&v| v >= 1)
            .ok_or_else(|| ChangeError::BadValue(text.to_owned()))?;
        Ok(Change { key, value })
    }
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key.name(), self.value)
    }
}

impl Settings {
    /// The settings of a logged config line; `Err` names the fields it lacks.
    pub fn from_logged(c: &LoggedConfig) -> Result<Self, Vec<&'static str>> {
        let mut missing = Vec::new();
        let mut need = |v: Option<u32>, key: Key| {
            if v.is_none() {
                missing.push(key.field());
            }
            v.unwrap_or(1).max(1)
        };
        let s = Settings {
            sequence_length: need(c.sequence_length, Key::SequenceLength),
            micro_batch_size: need(c.micro_batch_size, Key::MicroBatchSize),
            global_batch_size: need(c.global_batch_size, Key::GlobalBatchSize),
            pipeline_parallel_size: need(c.pp, Key::PipelineParallelSize),
            expert_parallel_size: need(c.ep, Key::ExpertParallelSize),
            context_parallel_size: need(c.cp, Key::ContextParallelSize),
        };
        if missing.is_empty() {
            Ok(s)
        } else {
            Err(missing)
        }
    }

    /// These settings with `changes` applied in order.
    pub fn with(&self, changes: &[Change]) -> Self {
        let mut s = *self;
        for c in changes {
            *s.get_mut(c.key) = c.value;
        }
        s
    }

    fn get_mut(&mut self, key: Key) -> &mut u32 {
        match key {
            Key::SequenceLength => &mut self.sequence_length,
            Key::MicroBatchSize => &mut self.micro_batch_size,
            Key::GlobalBatchSize => &mut self.global_batch_size,
            Key::PipelineParallelSize => &mut self.pipeline_parallel_size,
            Key::ExpertParallelSize => &mut self.expert_parallel_size,
            Key::ContextParallelSize => &mut self.context_parallel_size,
        }
    }

    /// Tokens one rank holds per micro-batch: seq · mb / cp.
    fn tokens(&self) -> f64 {
        f64::from(self.sequence_length) * f64::from(self.micro_batch_size)
            / f64::from(self.context_parallel_size)
    }

    /// Micro-batch stages in flight per layer at DualPipeV's peak: on pp rank r, 2p − r
    /// micro-batches of phase 0 and r + 1 of phase 1, each over 1/(2p) of the layers.
    fn in_flight_per_layer(&self) -> f64 {
        let p = f64::from(self.pipeline_parallel_size);
        (2.0 * p + 1.0) / (2.0 * p)
    }

    /// Micro-batches per step, without data parallelism (the log does not say the world).
    fn micro_batches(&self) -> u32 {
        self.global_batch_size / self.micro_batch_size
    }
}

/// What one rank's memory at the steady-state peak is made of, as measured.
#[derive(Debug, Clone, PartialEq)]
pub struct RankMeasure {
    /// The global rank.
    pub rank: u32,
    /// Its pipeline stage.
    pub pp: Option<u32>,
    /// Sharded weights after setup; `None` without a `setup_model` print.
    pub weights: Option<i64>,
    /// The rest of the static memory.
    pub other_static: i64,
    /// Gradients held at the peak; `None` when the pass printed no `After Step8`.
    pub gradients: Option<i64>,
    /// Optimizer state, and where it comes from; `None` when neither measured nor estimated.
    pub optimizer: (Option<i64>, &'static str),
    /// Activations in flight at the peak.
    pub activations: i64,
    /// Of the saved bytes, the share shaped by tokens; `None` without saved-tensor prints.
    pub token_share: Option<f64>,
    /// The steady-state peak minus the parts above.
    pub unattributed: i64,
    /// Where the peak comes from.
    pub peak_from: String,
    /// Cached over allocated at the prints' peak.
    pub reserve_fraction: f64,
    /// Memory outside the allocator at the prints' peak.
    pub non_pytorch: i64,
    /// The rank's GPU capacity ([`super::headroom`]), when known.
    pub capacity: Option<i64>,
}

impl RankMeasure {
    /// The steady-state peak: the parts in the peak (a part not measured adds nothing; the
    /// unattributed part holds it).
    pub fn peak(&self) -> i64 {
        self.weights.unwrap_or(0)
            + self.other_static
            + self.gradients.unwrap_or(0)
            + self.optimizer.0.unwrap_or(0)
            + self.activations
            + self.unattributed
    }
}

/// Reads each rank's parts; `None` for a rank without a pipeline peak. The steady-state peak
/// (`training`) is matched to the rank with the highest prints peak (see the module doc).
/// `settings`: the run's, from its config line, for the tokens of a micro-batch; `optimizer`:
/// the function its config line names.
pub fn measure(
    run: &Run,
    settings: Option<&Settings>,
    optimizer: Option<&str>,
) -> Vec<RankMeasure> {
    let tokens = settings.map(|s| (u64::from(s.sequence_length), s.tokens().round() as u64));
    let mut out: Vec<RankMeasure> = run
        .ranks
        .iter()
        .filter_map(|r| measure_rank(r, tokens))
        .collect();
    let peak_rank = run.summary.peak_rank;
    let Some(top) = out.iter().position(|m| Some(m.rank) == peak_rank) else {
        return out;
    };
    let steps = run.training.as_ref().and_then(steady);
    if let Some((steady, step1)) = steps {
        // Every rank holds optimizer state from step 2 on; without a checkpoint print it is
        // estimated from the optimizer the config names, on the step lines' rank never more
        // than the steady-state peak leaves for it.
        let rule = optimizer_rule(optimizer);
        for (i, m) in out.iter_mut().enumerate() {
            if let (None, Some((factor, from)), Some(weights)) = (m.optimizer.0, rule, m.weights) {
                let (estimate, room) = (scale(weights, factor), (steady - m.peak()).max(0));
                m.optimizer = if i == top && estimate > room {
                    (Some(room), OPTIMIZER_CAPPED)
                } else {
                    (Some(estimate), from)
                };
            }
        }
        let m = &mut out[top];
        if m.optimizer.0.is_none()
            && let Some(step1) = step1
        {
            m.optimizer = (
                Some((steady - step1).max(0)),
                "the steady-state peak minus step 1's (step lines)",
            );
        }
        m.unattributed = steady - m.peak();
        let unattributed = m.unattributed;
        for (i, m) in out.iter_mut().enumerate() {
            m.peak_from = if i == top {
                "the step lines (steps ≥ 2)".to_owned()
            } else {
                m.unattributed = unattributed;
                format!(
                    "the prints, with rank {}'s unattributed part",
                    out_rank(peak_rank)
                )
            };
        }
    }
    out
}

/// Optimizer state per byte of weights for the optimizer PithTrain's config names, and where
/// the figure comes from; `None` for an optimizer memprints does not know.
fn optimizer_rule(optimizer: Option<&str>) -> Option<(f64, &'static str)> {
    let name = optimizer?.to_ascii_lowercase();
    if name.contains("muon") {
        Some((
            1.0,
            "estimated: the weights × 1, Muon's momentum buffer per parameter \
             (make_muon_optimizer; AdamW's second moment on the embeddings, head, norms and \
             router is not in the log: a lower bound)",
        ))
    } else if name.contains("adam") {
        Some((
            2.0,
            "estimated: the weights × 2, AdamW's two moments per parameter \
             (make_adamw_optimizer)",
        ))
    } else {
        None
    }
}

/// Where an optimizer estimate larger than the steady-state peak allows comes from.
const OPTIMIZER_CAPPED: &str = "estimated from the optimizer, at most what the steady-state \
     peak leaves above the other parts";

fn out_rank(rank: Option<u32>) -> u32 {
    rank.unwrap_or(0)
}

/// The steady-state peak and step 1's, when the step lines have them.
fn steady(t: &Training) -> Option<(i64, Option<i64>)> {
    let steady = t.steady_peak_gpu_memory?;
    let step1 = (t.first_step == 1)
        .then_some(t.first_step_peak_gpu_memory)
        .flatten();
    Some((steady, step1))
}

fn measure_rank(r: &RankReport, tokens: Option<(u64, u64)>) -> Option<RankMeasure> {
    let b = r.breakdown.as_ref()?;
    let peak = r.peak.as_ref()?;
    let pass = r.pipeline.get(peak.index)?.pass;
    let gradients = r
        .passes
        .iter()
        .find(|p| p.pass == pass)
        .and_then(|p| Some(p.end_allocated? - p.before_pipeline?))
        .map(|g| g.clamp(0, b.activations.max(0)));
    let saved: Vec<&SavedGroup> = r.saved_tensors.iter().filter(|g| g.pass == pass).collect();
    Some(RankMeasure {
        rank: r.rank,
        pp: r.pp,
        weights: b.weights,
        other_static: b.other_static,
        gradients,
        optimizer: match b.optimizer_state {
            Some(o) => (Some(o), "the checkpoint load's print"),
            None => (None, "no checkpoint load, no step lines ≥ 2"),
        },
        activations: b.activations - gradients.unwrap_or(0),
        token_share: token_share(&saved, tokens),
        unattributed: 0,
        peak_from: "the prints' peak (no step line of a step ≥ 2)".to_owned(),
        reserve_fraction: if peak.allocated > 0 {
            b.cached as f64 / peak.allocated as f64
        } else {
            0.0
        },
        non_pytorch: b.non_pytorch,
        capacity: r.capacity.map(|c| c.bytes),
    })
}

/// The share of saved activation bytes in tensors shaped by tokens: a dimension equal to a
/// sequence, or a first dimension at least a micro-batch's tokens (routed tokens); saved
/// weights and small per-head vectors are not. `tokens`: the sequence and a micro-batch's tokens
/// per rank (seq · mb / cp) from the config line; without it they are guessed from the
/// activations' shapes (the largest b·s of a (b, s, …) activation), never from saved weights,
/// whose (experts, rows, columns) would pass for tokens.
fn token_share(groups: &[&SavedGroup], tokens: Option<(u64, u64)>) -> Option<f64> {
    let activations = || groups.iter().flat_map(|g| &g.tensors).filter(|t| !t.weight);
    let (seq, tokens) = tokens.unwrap_or_else(|| {
        let mut guess = (0u64, 0u64);
        for t in activations() {
            if let Some(dims) = &t.shape
                && dims.len() >= 3
                && dims[0] * dims[1] > guess.1
            {
                guess = (dims[1], dims[0] * dims[1]);
            }
        }
        guess
    });
    let (mut scaled, mut all) = (0i64, 0i64);
    for t in activations() {
        all += t.size;
        let by_tokens = t.shape.as_ref().is_some_and(|dims| {
            tokens > 0
                && (dims.len() >= 3 && dims[1] == seq
                    || dims.len() >= 2 && dims[1] == seq && dims[0] == 1
                    || dims.first().is_some_and(|&d| d >= tokens)
                    || dims.len() == 3 && dims[2] == seq)
        });
        if by_tokens {
            scaled += t.size;
        }
    }
    (all > 0).then(|| scaled as f64 / all as f64)
}

/// Scales `bytes` by `factor`; a factor of exactly 1 gives `bytes` back.
fn scale(bytes: i64, factor: f64) -> i64 {
    (bytes as f64 * factor).round() as i64
}

/// Predicts one rank at `to`, from its parts measured at `from`.
pub fn predict(m: &RankMeasure, from: &Settings, to: &Settings) -> RankWhatIf {
    let held = f64::from(from.pipeline_parallel_size) / f64::from(to.pipeline_parallel_size);
    let tokens = to.tokens() / from.tokens();
    let in_flight = to.in_flight_per_layer() / from.in_flight_per_layer();
    let share = m.token_share.unwrap_or(1.0);
    let activations = (share * tokens + (1.0 - share)) * in_flight;
    let held_rule = "∝ layers held: pp / pp′ (layers spread evenly; expert parallelism and \
                     FSDP sharding kept)";
    let act_rule = match m.token_share {
        Some(s) => format!(
            "∝ seq·mb/cp for the {:.0}% of saved bytes shaped by tokens, fixed for the rest \
             (saved-tensor prints); × (2pp+1)/(2pp) micro-batch stages in flight per layer \
             (DualPipeV)",
            s * 100.0
        ),
        None => "∝ seq·mb/cp (no saved-tensor prints: all of it taken as shaped by tokens); × \
                 (2pp+1)/(2pp) micro-batch stages in flight per layer (DualPipeV)"
            .to_owned(),
    };
    // A part not measured is said so (`None` both sides, "not measured" in its source), never
    // shown as 0; the unattributed part holds its bytes.
    let part = |name, bytes: Option<i64>, factor: f64, rule: &str, from: &str| Component {
        name,
        measured_bytes: bytes,
        predicted_bytes: bytes.map(|b| scale(b, factor)),
        rule: rule.to_owned(),
        measured_from: match bytes {
            Some(_) => from.to_owned(),
            None => format!("not measured ({from})"),
        },
        in_peak: true,
    };
    let mut components = vec![
        part(
            "weights",
            m.weights,
            held,
            held_rule,
            "the last setup_model print",
        ),
        part(
            "other_static",
            Some(m.other_static),
            1.0,
            "fixed",
            "Before pipeline minus the weights",
        ),
        part(
            "gradients",
            m.gradients,
            held,
            held_rule,
            "After Step8 minus Before pipeline, at most the growth to the peak",
        ),
        part(
            "optimizer_state",
            m.optimizer.0,
            held,
            held_rule,
            m.optimizer.1,
        ),
        part(
            "activations",
            Some(m.activations),
            activations,
            &act_rule,
            "the prints' peak minus Before pipeline, less the gradients",
        ),
    ];
    components.push(unattributed(m, &components, held));
    let peak = Figure {
        measured_bytes: m.peak(),
        predicted_bytes: components.iter().filter_map(|c| c.predicted_bytes).sum(),
    };
    components.push(Component {
        name: "allocator_reserve",
        measured_bytes: Some(scale(peak.measured_bytes, m.reserve_fraction)),
        predicted_bytes: Some(scale(peak.predicted_bytes, m.reserve_fraction)),
        rule: format!(
            "kept at {:.1}% of the peak (its share at the prints' peak)",
            m.reserve_fraction * 100.0
        ),
        measured_from: "cached at the prints' peak".to_owned(),
        in_peak: false,
    });
    components.push(Component {
        name: "non_pytorch",
        measured_bytes: Some(m.non_pytorch),
        predicted_bytes: Some(m.non_pytorch),
        rule: "fixed (CUDA context, NCCL)".to_owned(),
        measured_from: "non-pt= at the prints' peak".to_owned(),
        in_peak: false,
    });
    let device = Figure {
        measured_bytes: components.iter().filter_map(|c| c.measured_bytes).sum(),
        predicted_bytes: components.iter().filter_map(|c| c.predicted_bytes).sum(),
    };
    let predicted_headroom_bytes = m.capacity.map(|c| c - device.predicted_bytes);
    RankWhatIf {
        rank: m.rank,
        pp: m.pp,
        peak,
        device,
        components,
        capacity_bytes: m.capacity,
        predicted_headroom_bytes,
        predicted_status: m
            .capacity
            .and_then(|c| super::headroom::status_of(c, device.predicted_bytes)),
    }
}

/// The steady-state peak above the pipeline's parts. When the parts leave room under the
/// peak, the peak is the optimizer step's (it holds the weights, gradients and optimizer state
/// with its own temporaries, and no activations; PithTrain's steps ≥ 2 peak there when the
/// activations are small): predicted as what the optimizer step's peak, ∝ layers held, needs
/// above the pipeline's predicted parts, so that the predicted peak is the higher of the two
/// phases. A negative part (a peak below the parts, on a rank other than the step lines') stays
/// fixed.
fn unattributed(m: &RankMeasure, pipeline: &[Component], held: f64) -> Component {
    let predicted: i64 = pipeline.iter().filter_map(|c| c.predicted_bytes).sum();
    let (bytes, rule) = if m.unattributed >= 0 {
        let step = m.peak();
        let step_predicted = m.other_static + scale(step - m.other_static, held);
        (
            (step_predicted - predicted).max(0),
            "the optimizer step's peak above the pipeline's parts: its peak (no activations; \
             ∝ layers held) less the predicted parts, at least 0: the predicted peak is the \
             higher of the optimizer step's and the pipeline's (buffers inside one operation, \
             between two prints, are not scaled)",
        )
    } else {
        (
            m.unattributed,
            "fixed (the step lines' peak is another rank's)",
        )
    };
    Component {
        name: "unattributed",
        measured_bytes: Some(m.unattributed),
        predicted_bytes: Some(bytes),
        rule: rule.to_owned(),
        measured_from: "the steady-state peak minus the parts above".to_owned(),
        in_peak: true,
    }
}

/// The method line of every section.
const METHOD: &str = "memprints scales each measured part by its own rule (PithTrain's \
     estimator is not run); these are predictions, not measurements";

/// Notes on settings no part scales with, for `changes`.
fn notes_for(from: &Settings, to: &Settings) -> Vec<String> {
    let mut notes = Vec::new();
    if to.expert_parallel_size != from.expert_parallel_size {
        notes.push(
            "expert-parallel-size moves no part: the expert share of the parameters is not in \
             the log, and each rank receives about as many routed tokens at any ep"
                .to_owned(),
        );
    }
    if to.global_batch_size != from.global_batch_size {
        notes.push(
            "global-batch-size changes only the micro-batches per step, which the peak does not \
             depend on"
                .to_owned(),
        );
    }
    if to.micro_batches() < 2 * to.pipeline_parallel_size {
        notes.push(format!(
            "{} micro-batches per step (global batch / micro-batch) are fewer than DualPipeV's \
             2·pp = {}: PithTrain will not run this",
            to.micro_batches(),
            2 * to.pipeline_parallel_size
        ));
    }
    if !to.sequence_length.is_multiple_of(to.context_parallel_size) {
        notes.push("the sequence length does not split evenly over context parallelism".to_owned());
    }
    notes
}

/// The run's settings, or why there are none.
fn settings_of(config: Option<&LoggedConfig>) -> Result<Settings, String> {
    let config = config.ok_or("the log has no PithTrain config line (launch(cfg=…))")?;
    Settings::from_logged(config)
        .map_err(|missing| format!("the config line lacks {}", missing.join(", ")))
}

/// The `--what-if` section of one run, from its settings and its ranks' parts ([`measure`]).
pub fn section(
    settings: &Result<Settings, String>,
    measures: &[RankMeasure],
    changes: &[Change],
) -> WhatIfSection {
    let mut out = WhatIfSection {
        settings: SettingsPair {
            measured: None,
            predicted: None,
            changes: changes.iter().map(Change::to_string).collect(),
        },
        method: METHOD.to_owned(),
        ranks: Vec::new(),
        notes: Vec::new(),
        error: None,
    };
    let from = match settings {
        Ok(s) => *s,
        Err(e) => {
            out.error = Some(e.clone());
            return out;
        }
    };
    let to = from.with(changes);
    out.settings.measured = Some(from);
    out.settings.predicted = Some(to);
    out.notes = notes_for(&from, &to);
    out.ranks = measures.iter().map(|m| predict(m, &from, &to)).collect();
    if out.ranks.is_empty() {
        out.error = Some("no rank has a pipeline peak to start from".to_owned());
    }
    out
}

/// A rank's parts at its own settings (any settings predict themselves).
fn as_measured(m: &RankMeasure) -> RankWhatIf {
    let s = Settings {
        sequence_length: 1,
        micro_batch_size: 1,
        global_batch_size: 2,
        pipeline_parallel_size: 1,
        expert_parallel_size: 1,
        context_parallel_size: 1,
    };
    predict(m, &s, &s)
}

/// What to change on the worst rank of a run, from its settings and its ranks' parts
/// ([`measure`]), ranked; `None` without a pipeline peak.
pub fn what_to_change(
    settings: &Result<Settings, String>,
    measures: &[RankMeasure],
) -> Option<WhatToChange> {
    let worst = measures.iter().max_by_key(|m| {
        (
            as_measured(m).device.measured_bytes,
            std::cmp::Reverse(m.rank),
        )
    })?;
    let now = as_measured(worst);
    let mut actions = Vec::new();
    let mut not_offered = Vec::new();
    match settings {
        Ok(s) => {
            let mut try_change = |action: String, key: Key, value: u32, cost: String| {
                let to = s.with(&[Change { key, value }]);
                if to.micro_batches() < 2 * to.pipeline_parallel_size {
                    return;
                }
                let p = predict(worst, s, &to);
                let saves = now.device.measured_bytes - p.device.predicted_bytes;
                if saves > 0 {
                    actions.push(Action {
                        action,
                        setting: format!("{}={value}", key.field()),
                        saves_bytes: saves,
                        predicted_device_bytes: p.device.predicted_bytes,
                        cost,
                    });
                } else if p
                    .components
                    .iter()
                    .any(|c| c.name == "unattributed" && c.predicted_bytes > Some(0))
                {
                    not_offered.push(format!(
                        "{action}: saves nothing, the steady-state peak stays the optimizer \
                         step's, which holds no activations"
                    ));
                } else {
                    not_offered.push(format!("{action}: saves nothing, as predicted"));
                }
            };
            if s.micro_batch_size > 1 {
                let mb = s.micro_batch_size / 2;
                try_change(
                    format!("halve the micro-batch ({} → {mb})", s.micro_batch_size),
                    Key::MicroBatchSize,
                    mb,
                    format!(
                        "keep global_batch_size={}: twice the micro-batches per step",
                        s.global_batch_size
                    ),
                );
            }
            let pp = 2 * s.pipeline_parallel_size;
            try_change(
                format!(
                    "double the pipeline stages ({} → {pp})",
                    s.pipeline_parallel_size
                ),
                Key::PipelineParallelSize,
                pp,
                "twice the GPUs per data-parallel replica".to_owned(),
            );
            let cp = 2 * s.context_parallel_size;
            if s.sequence_length.is_multiple_of(cp) {
                try_change(
                    format!(
                        "double context parallelism ({} → {cp})",
                        s.context_parallel_size
                    ),
                    Key::ContextParallelSize,
                    cp,
                    "twice the GPUs per data-parallel replica".to_owned(),
                );
            }
            if s.sequence_length >= 2 {
                let seq = s.sequence_length / 2;
                try_change(
                    format!("halve the sequence ({} → {seq})", s.sequence_length),
                    Key::SequenceLength,
                    seq,
                    "trains on shorter sequences".to_owned(),
                );
            }
            not_offered.push(
                "more expert parallelism: not computed, the expert share of the parameters is \
                 not in the log"
                    .to_owned(),
            );
        }
        Err(e) => not_offered.push(format!("changes of settings: {e}")),
    }
    let reserve = now
        .components
        .iter()
        .find(|c| c.name == "allocator_reserve")
        .and_then(|c| c.measured_bytes)
        .unwrap_or(0);
    if reserve >= 256 << 20 && reserve * 20 >= now.device.measured_bytes {
        actions.push(Action {
            action: "let the allocator grow segments instead of reserving new ones".to_owned(),
            setting: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True".to_owned(),
            saves_bytes: reserve,
            predicted_device_bytes: now.device.measured_bytes - reserve,
            cost: "up to the unused reserve; an environment variable of the launch".to_owned(),
        });
    }
    not_offered.push("activation recomputation: PithTrain has no setting for it".to_owned());
    not_offered.push(
        "a fused loss: PithTrain already computes the loss with its fused in-place \
         cross-entropy"
            .to_owned(),
    );
    actions.sort_by_key(|a| std::cmp::Reverse(a.saves_bytes));
    Some(WhatToChange {
        worst_rank: worst.rank,
        worst_device_bytes: now.device.measured_bytes,
        actions,
        not_offered,
    })
}

/// Fills each run's `what_to_change`, and its `what_if` when `changes` are given. `known`:
/// each input's config lines ([`config_lines`]) when the scan found them already; else they
/// are read again, only when some run has a pipeline peak to start from.
pub fn attach(report: &mut Report, changes: &[Change], known: Option<Vec<Vec<LoggedConfig>>>) {
    if report.runs.iter().all(|r| r.summary.peak_rank.is_none()) {
        return;
    }
    let configs: Vec<Vec<LoggedConfig>> = known.unwrap_or_else(|| {
        report
            .inputs
            .iter()
            .map(|input| config_lines(std::path::Path::new(input)))
            .collect()
    });
    let inputs: std::collections::HashMap<&str, usize> = report
        .inputs
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    let configs: Vec<Option<LoggedConfig>> = (0..report.runs.len())
        .map(|n| config_of(report, n, &configs, &inputs))
        .collect();
    for (n, config) in configs.into_iter().enumerate() {
        let settings = settings_of(config.as_ref());
        let optimizer = config.as_ref().and_then(|c| c.optimizer.as_deref());
        let measures = measure(&report.runs[n], settings.as_ref().ok(), optimizer);
        let what_to_change = what_to_change(&settings, &measures);
        let what_if = (!changes.is_empty()).then(|| section(&settings, &measures, changes));
        let run = &mut report.runs[n];
        run.what_to_change = what_to_change;
        run.what_if = what_if;
    }
}

/// The config line of run `n` ([`crate::launch::launch_of`]).
fn config_of(
    report: &Report,
    n: usize,
    configs: &[Vec<LoggedConfig>],
    inputs: &std::collections::HashMap<&str, usize>,
) -> Option<LoggedConfig> {
    // By name through a map: a run of 10,000 sources is not searched for each of them.
    let of = |source: &str| inputs.get(source).map(|&i| &configs[i]);
    let (source, k) = crate::launch::launch_of(report, n, |s| of(s).map_or(0, Vec::len))?;
    of(source).map(|c| c[k].clone())
}

/// PithTrain's config lines (`launch(cfg=`) of one log, in order: those of its first
/// [`CONFIG_SEARCH`] bytes (decompressed), reading at most [`crate::scan::LINE_CAP`] bytes of any
/// line ([`crate::scan::inputs::find_lines`], a chunk at a time at memmem speed); an unreadable
/// log has none.
pub fn config_lines(path: &std::path::Path) -> Vec<LoggedConfig> {
    let Ok(reader) = crate::scan::inputs::open(path) else {
        return Vec::new();
    };
    let mut parse = ParseOnce::default();
    let mut out = Vec::new();
    // A read error ends the search: what was found so far counts.
    let _ = crate::scan::inputs::find_lines(reader, NEEDLE, CONFIG_SEARCH as u64, |line| {
        out.extend(parse.config(line))
    });
    out
}

/// What finds a config line: PithTrain's `launch(cfg=` (with or without the `| ` before it).
const NEEDLE: &[u8] = b"launch(cfg=";

/// [`LoggedConfig::parse`], once per distinct line: a log may repeat one config line thousands
/// of times.
#[derive(Default)]
struct ParseOnce(std::collections::HashMap<Vec<u8>, Option<LoggedConfig>>);

impl ParseOnce {
    fn config(&mut self, line: &[u8]) -> Option<LoggedConfig> {
        if let Some(c) = self.0.get(line) {
            return c.clone();
        }
        let c = LoggedConfig::parse(&String::from_utf8_lossy(line));
        self.0.insert(line.to_vec(), c.clone());
        c
    }
}

/// How far into a log (decompressed) its config lines are looked for: a run prints its config
/// when it launches, and a log of gigabytes is not read a second time for launches deep inside
/// it (a run that starts past this reads as one without a config line: its changes are not
/// offered).
const CONFIG_SEARCH: usize = 64 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// The config lines found are those a split into lines finds: launches among noise, a
    /// config line across the search's chunks, one past a line's first LINE_CAP bytes (not
    /// seen), two needles on one line (one config).
    #[test]
    fn the_search_finds_the_config_lines_a_split_into_lines_finds() {
        let real = std::fs::read_to_string(data("e2e/qwen3-tiny-pp1-instr.log")).unwrap();
        let config = real
            .lines()
            .find(|l| l.contains("launch(cfg="))
            .unwrap()
            .to_string();
        let mut log = String::new();
        let noise = "2026-12-01 03:10:49 | INFO | some other line of the run\n".repeat(400_000);
        log += &config;
        log += "\n";
        log += &noise;
        log += &format!("{config} launch(cfg= again\n");
        log += &"x".repeat(crate::scan::LINE_CAP);
        log += &format!("{config}\n");
        log += &noise;
        log += &config.replace("micro_batch_size=2", "micro_batch_size=4");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.log");
        std::fs::write(&path, &log).unwrap();
        let found = config_lines(&path);
        let split: Vec<LoggedConfig> = log
            .lines()
            .map(|l| &l[..l.len().min(crate::scan::LINE_CAP)])
            .filter(|l| l.contains("launch(cfg="))
            .filter_map(LoggedConfig::parse)
            .collect();
        assert_eq!(found, split);
        assert_eq!(found.len(), 3, "{found:?}");
    }

    fn data(path: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/data")
            .join(path)
    }

    fn report(log: &str, changes: &[Change]) -> Report {
        let opts = super::super::ReportOptions {
            what_if: changes.to_vec(),
            ..Default::default()
        };
        super::super::run_report(&[data(log)], &opts).unwrap()
    }

    fn change(text: &str) -> Change {
        text.parse().unwrap()
    }

    #[test]
    fn keys_are_read_in_kebab_case_by_alias_and_as_pithtrain_fields() {
        assert_eq!(
            change("micro-batch-size=2"),
            Change {
                key: Key::MicroBatchSize,
                value: 2
            }
        );
        assert_eq!(change("pp=4").key, Key::PipelineParallelSize);
        assert_eq!(change("sequence_length=8192").key, Key::SequenceLength);
        assert_eq!(change("EP=8").key, Key::ExpertParallelSize);
    }

    #[test]
    fn a_bad_key_or_value_is_one_line_listing_the_keys() {
        for bad in ["mb=2", "pp=0", "pp=two", "pp"] {
            let err = bad.parse::<Change>().unwrap_err().to_string();
            assert!(!err.contains('\n'), "{err}");
            assert!(
                err.contains(
                    "sequence-length, micro-batch-size, global-batch-size, \
                              pipeline-parallel-size (pp), expert-parallel-size (ep), \
                              context-parallel-size (cp)"
                ),
                "{err}"
            );
        }
    }

    #[test]
    fn at_the_measured_settings_the_prediction_is_the_measurement() {
        for log in [
            "e2e/qwen3-tiny-pp1-instr.log",
            "e2e/dsv2-tiny-pp1-instr.log",
            "e2e/qwen3-tiny-pp1-resume.log",
            "report/pp4_srun_ansi_crlf.log",
        ] {
            let r = report(log, &[change("global-batch-size=16")]);
            for run in &r.runs {
                let Some(w) = &run.what_if else { continue };
                for rank in &w.ranks {
                    for c in &rank.components {
                        if w.settings.measured.unwrap().global_batch_size == 16 {
                            assert_eq!(c.measured_bytes, c.predicted_bytes, "{log} {}", c.name);
                        }
                    }
                }
            }
        }
        let r = report(
            "e2e/qwen3-tiny-pp1-instr.log",
            &[change("micro-batch-size=2")],
        );
        let run = &r.runs[0];
        let w = run.what_if.as_ref().unwrap();
        let rank = &w.ranks[0];
        let steady = run
            .training
            .as_ref()
            .unwrap()
            .steady_peak_gpu_memory
            .unwrap();
        assert_eq!(rank.peak.measured_bytes, steady);
        assert_eq!(rank.peak.predicted_bytes, steady);
        assert_eq!(rank.device.predicted_bytes, rank.device.measured_bytes);
        let in_peak: i64 = rank
            .components
            .iter()
            .filter(|c| c.in_peak)
            .filter_map(|c| c.measured_bytes)
            .sum();
        assert_eq!(in_peak, steady);
    }

    #[test]
    fn the_steady_state_peak_leaves_step_1_out() {
        let r = report("e2e/qwen3-tiny-pp1-instr.log", &[]);
        let t = r.runs[0].training.as_ref().unwrap();
        // Step 1: 0.18 GB, steps 2 and 3: 0.21 GB.
        assert_eq!(t.first_step_peak_gpu_memory, Some(193_273_528));
        assert_eq!(t.steady_peak_gpu_memory, Some(225_485_783));
        assert!(r.runs[0].what_if.is_none());
    }

    fn measure_of(activations: i64, share: Option<f64>) -> RankMeasure {
        RankMeasure {
            rank: 0,
            pp: Some(0),
            weights: Some(1000),
            other_static: 10,
            gradients: Some(2000),
            optimizer: (Some(4000), "test"),
            activations,
            token_share: share,
            unattributed: 100,
            peak_from: String::new(),
            reserve_fraction: 0.1,
            non_pytorch: 500,
            capacity: None,
        }
    }

    fn settings() -> Settings {
        Settings {
            sequence_length: 1024,
            micro_batch_size: 1,
            global_batch_size: 8,
            pipeline_parallel_size: 1,
            expert_parallel_size: 1,
            context_parallel_size: 1,
        }
    }

    fn predicted(p: &RankWhatIf, name: &str) -> i64 {
        p.components
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .predicted_bytes
            .unwrap()
    }

    #[test]
    fn activations_follow_tokens_per_micro_batch_for_their_token_shaped_share() {
        let m = measure_of(10_000, Some(0.75));
        let from = settings();
        let seq8 = predict(&m, &from, &from.with(&[change("sequence-length=8192")]));
        assert_eq!(predicted(&seq8, "activations"), 2_500 + 7_500 * 8);
        assert_eq!(predicted(&seq8, "weights"), 1000);
        // The optimizer step's peak (the parts at the measurement plus its 100 above them)
        // is far below the pipeline's now: nothing above the pipeline's parts.
        assert_eq!(predicted(&seq8, "unattributed"), 0);
        let same = predict(&m, &from, &from);
        assert_eq!(predicted(&same, "unattributed"), 100);
        let mb2 = predict(&m, &from, &from.with(&[change("micro-batch-size=2")]));
        let cp2 = predict(
            &m,
            &from.with(&[change("sequence-length=2048")]),
            &from.with(&[change("sequence-length=2048"), change("cp=2")]),
        );
        assert_eq!(predicted(&mb2, "activations"), 2_500 + 7_500 * 2);
        assert_eq!(predicted(&cp2, "activations"), 2_500 + 7_500 / 2);
        let gbs = predict(&m, &from, &from.with(&[change("global-batch-size=64")]));
        assert_eq!(gbs.peak.predicted_bytes, gbs.peak.measured_bytes);
    }

    #[test]
    fn a_part_the_log_does_not_measure_is_said_so_never_zero() {
        let mut m = measure_of(10_000, Some(1.0));
        m.weights = None;
        m.optimizer = (None, "no checkpoint load, no step lines ≥ 2");
        let p = predict(&m, &settings(), &settings().with(&[change("pp=2")]));
        for name in ["weights", "optimizer_state"] {
            let c = p.components.iter().find(|c| c.name == name).unwrap();
            assert_eq!(
                (c.measured_bytes, c.predicted_bytes),
                (None, None),
                "{name}"
            );
            assert!(
                c.measured_from.starts_with("not measured ("),
                "{}",
                c.measured_from
            );
        }
        // The peak is the parts measured: 10 + 2000 + 10,000 + 100.
        assert_eq!(p.peak.measured_bytes, 12_110);
    }

    #[test]
    fn more_pipeline_stages_divide_what_a_rank_holds_and_the_stages_in_flight() {
        let m = measure_of(12_000, None);
        let from = settings();
        let pp4 = predict(&m, &from, &from.with(&[change("pp=4")]));
        assert_eq!(predicted(&pp4, "weights"), 250);
        assert_eq!(predicted(&pp4, "gradients"), 500);
        assert_eq!(predicted(&pp4, "optimizer_state"), 1000);
        // (2·4+1)/(2·4) against (2·1+1)/(2·1): 9/8 ÷ 3/2 = 3/4.
        assert_eq!(predicted(&pp4, "activations"), 9_000);
        assert_eq!(predicted(&pp4, "non_pytorch"), 500);
    }

    /// An estimator output's `Activations (LayerRecord tensors)` plus `Autograd saved tensors`,
    /// in MiB, from its breakdown lines (`214.56 MB`, `1.111 GB`).
    fn estimator_activations(name: &str) -> f64 {
        let text = std::fs::read_to_string(data(&format!("whatif/{name}"))).unwrap();
        let mut sum = 0.0;
        for line in text.lines().map(str::trim) {
            let Some(rest) = ["Autograd saved tensors  ", "Activations (records)  "]
                .iter()
                .find_map(|p| line.strip_prefix(p))
            else {
                continue;
            };
            let mut words = rest.split_whitespace();
            let value: f64 = words.next().unwrap().parse().unwrap();
            sum += match words.next().unwrap() {
                "GB" => value * 1024.0,
                "MB" => value,
                unit => panic!("{unit}"),
            };
        }
        sum
    }

    #[test]
    fn the_token_rule_agrees_with_pithtrains_estimator_on_the_whatif_sweep() {
        // The estimator's activations are a fixed part (saved weights) plus a part ∝ seq·mb:
        // the same tokens give the same figure, and the two smallest shapes fix both parts.
        let base = estimator_activations("estimate-s1024-mb1.txt");
        let double = estimator_activations("estimate-s2048-mb1.txt");
        assert_eq!(double, estimator_activations("estimate-s1024-mb2.txt"));
        let per_1024 = double - base;
        let share = per_1024 / base;
        let m = measure_of(base.round() as i64, Some(share));
        let from = settings();
        for (file, seq, mb) in [
            ("estimate-s4096-mb1.txt", 4096, 1),
            ("estimate-s8192-mb1.txt", 8192, 1),
            ("estimate-s8192-mb32.txt", 8192, 32),
        ] {
            let to = from.with(&[
                Change {
                    key: Key::SequenceLength,
                    value: seq,
                },
                Change {
                    key: Key::MicroBatchSize,
                    value: mb,
                },
            ]);
            let ours = predicted(&predict(&m, &from, &to), "activations") as f64;
            let theirs = estimator_activations(file);
            assert!(
                (ours - theirs).abs() <= 0.05 * theirs,
                "{file}: memprints {ours:.0} MiB, estimator {theirs:.0} MiB"
            );
        }
    }

    #[test]
    fn what_to_change_ranks_actions_that_save_and_names_the_setting() {
        let r = report("e2e/qwen3-tiny-pp1-instr.log", &[]);
        let w = r.runs[0].what_to_change.as_ref().unwrap();
        assert_eq!(w.worst_rank, 0);
        assert!(!w.actions.is_empty());
        assert!(
            w.actions
                .windows(2)
                .all(|a| a[0].saves_bytes >= a[1].saves_bytes)
        );
        assert!(w.actions.iter().all(|a| a.saves_bytes > 0));
        // At this tiny model's shape the optimizer step holds the steady-state peak: a smaller
        // micro-batch saves nothing, and the report says so.
        assert!(
            w.not_offered
                .iter()
                .any(|n| n.starts_with("halve the micro-batch (2 → 1): saves nothing")),
            "{:?}",
            w.not_offered
        );
        assert!(
            w.actions
                .iter()
                .any(|a| a.setting == "distributed.pipeline_parallel_size=2")
        );
    }

    #[test]
    fn without_a_config_line_the_what_if_says_so() {
        let r = report("report/pp1_default_prefix.log", &[change("pp=2")]);
        for run in &r.runs {
            if let Some(w) = &run.what_if
                && w.settings.measured.is_none()
            {
                assert!(w.error.as_deref().unwrap().contains("config line"));
            }
        }
    }
}
