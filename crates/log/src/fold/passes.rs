//! Pipeline passes: one rank's prints cut at each `Before pipeline`, and which of them the
//! report reads in detail.
//!
//! Contract:
//! - A rank's pass begins at its `Before pipeline` print once the pass it is in holds a pipeline
//!   print; every print before the rank's second pass belongs to pass 0. A run that profiles one
//!   step (what the instrumentation does) has one pass per rank.
//! - *Detail prints* ([`crate::parse::detail_rank`]: the `_lmem` probes and the saved-tensor prints, whose
//!   body after `[rank=R] ` is indented or is a `layerN … saved tensors:` header) are kept raw
//!   until their pass ends, and parsed only when the pass is kept in detail: the first pass
//!   (the profiled step), the one with the highest pipeline peak (the first of equal maxima)
//!   and the last one (where the log ends: an OOM's step). The detail prints of the other
//!   passes are counted, not read: the report says how many ([`PassSummary::detail_prints`],
//!   `detail_prints_not_read` of the stats), and a malformed one among them is not seen.
//! - Every pass, kept or not, gets a [`PassSummary`] from its pipeline prints, which are always
//!   parsed.
//! - Memory per rank: the raw detail of the pass being read, plus at most three kept passes,
//!   whatever the number of steps logged. A run with memory profiling left on at every step
//!   reports its steps in one line each instead of holding (and writing) every print.

use super::{intern, saved};
use crate::parse::{Event, PipelineKind, parse_print};
use crate::schema::{
    ExpertProbe, GroupSizeFrom, LastPoint, LayerProbe, PassSummary, PipelineEntry, PointSource,
    SavedGroup, SavedTensor, SizeFrom,
};

/// A detail print of the pass being read: how many of the pass's pipeline prints came before
/// it, and its place among the rank's prints (from the pass's first). Where its bytes are is
/// not kept here: they are the next line of [`OpenPass::raw`], or, when that line is empty,
/// the next place of [`OpenPass::mapped`]. Eight bytes a print: a run of 10,000 ranks holds
/// every rank's open pass until the logs end.
struct Deferred {
    pipeline_at: u32,
    /// `seq` less [`OpenPass::first_seq`], saturated: a pass of 4G prints (a log of hundreds
    /// of GB for one step) orders the rest as the last.
    seq: u32,
}

/// The pass a rank is in: its pipeline entries, parsed, and its detail prints, raw.
#[derive(Default)]
pub struct OpenPass {
    index: u32,
    pipeline: Vec<PipelineEntry>,
    /// The detail prints, each ended by a `\n` (a print holds none); an empty line stands for
    /// a print read from the mapped file.
    raw: Vec<u8>,
    /// Where the prints read from the mapped file are in it, in order: start and length.
    mapped: Vec<(usize, u32)>,
    deferred: Vec<Deferred>,
    /// The `seq` of the pass's first detail print.
    first_seq: u64,
}

/// A pass read in detail: what goes into the rank's report, positions relative to the pass.
#[derive(Debug, Default)]
pub struct KeptPass {
    /// The pass's number.
    pub index: u32,
    /// Its pipeline entries.
    pub pipeline: Vec<PipelineEntry>,
    /// Its probes (positions relative to `pipeline`).
    pub layers: Vec<LayerProbe>,
    /// Its experts probes (likewise).
    pub experts: Vec<ExpertProbe>,
    /// Its saved-tensor groups.
    pub saved_tensors: Vec<SavedGroup>,
    /// Saved-tensor prints with no group open: unparsed on the rank only.
    pub orphans: u64,
    /// Detail prints that matched no format, as read.
    pub unparsed: Vec<Vec<u8>>,
    /// The last probe, with its place among the rank's prints.
    pub last_probe: Option<(u64, LastPoint)>,
}

/// One rank's passes: the open one, the kept ones, the summaries.
#[derive(Default)]
pub struct Passes {
    open: OpenPass,
    /// Pass 0, once it ended.
    first: Option<Box<KeptPass>>,
    /// The pass with the highest peak so far, when it is not pass 0.
    best: Option<Box<KeptPass>>,
    /// That highest peak (pass 0's included).
    best_peak: Option<i64>,
    summaries: Vec<PassSummary>,
    /// Detail prints of passes not kept.
    not_read: u64,
}

impl Passes {
    /// Adds a pipeline entry; a `Before pipeline` after a pipeline print begins a new pass,
    /// ending the open one (whose detail prints are parsed then when it is kept). `map` is the
    /// file mapped detail prints were deferred from.
    pub fn pipeline(
        &mut self,
        entry: PipelineEntry,
        unparsed: &mut Vec<Vec<u8>>,
        map: Option<&[u8]>,
    ) {
        if entry.kind == PipelineKind::BeforePipeline && !self.open.pipeline.is_empty() {
            self.end_open(unparsed, map);
        }
        let mut entry = entry;
        entry.pass = self.open.index;
        self.open.pipeline.push(entry);
    }

    /// Keeps a detail print of the open pass, raw, or only its place when it is at `mapped_at`
    /// in the mapped file being read; `seq` is its place among the rank's prints.
    pub fn defer(&mut self, print: &[u8], mapped_at: Option<usize>, seq: u64) {
        let open = &mut self.open;
        if open.deferred.is_empty() {
            open.first_seq = seq;
        }
        match mapped_at {
            // A line's bytes are capped at 64 KiB: the length fits.
            Some(at) => open
                .mapped
                .push((at, u32::try_from(print.len()).unwrap_or(u32::MAX))),
            None => open.raw.extend_from_slice(print),
        }
        open.raw.push(b'\n');
        // A pass of more than 4G pipeline prints would be a log of hundreds of GB for one
        // step: the casts keep the record small.
        open.deferred.push(Deferred {
            pipeline_at: u32::try_from(open.pipeline.len()).unwrap_or(u32::MAX),
            seq: u32::try_from(seq - open.first_seq).unwrap_or(u32::MAX),
        });
    }

    /// Ends the open pass: summarised, and parsed when it is pass 0 or the highest so far.
    fn end_open(&mut self, unparsed: &mut Vec<Vec<u8>>, map: Option<&[u8]>) {
        let open = std::mem::take(&mut self.open);
        let next = open.index + 1;
        let peak = pass_peak(&open.pipeline).map(|e| e.allocated);
        let higher = match (peak, self.best_peak) {
            (Some(p), Some(b)) => p > b,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if open.index == 0 {
            self.best_peak = peak;
            let kept = self.keep(open, unparsed, map);
            self.first = Some(Box::new(kept));
        } else if higher {
            self.best_peak = peak;
            let kept = self.keep(open, unparsed, map);
            self.best = Some(Box::new(kept));
        } else {
            self.drop_pass(open);
        }
        self.open.index = next;
        // The buffers of a dropped pass are reused by the next one.
    }

    fn drop_pass(&mut self, open: OpenPass) {
        self.summaries.push(summary(&open, false));
        self.not_read += open.deferred.len() as u64;
        let OpenPass {
            mut raw,
            mut mapped,
            mut deferred,
            mut pipeline,
            ..
        } = open;
        raw.clear();
        mapped.clear();
        deferred.clear();
        pipeline.clear();
        self.open.raw = raw;
        self.open.mapped = mapped;
        self.open.deferred = deferred;
        self.open.pipeline = pipeline;
    }

    fn keep(
        &mut self,
        open: OpenPass,
        unparsed: &mut Vec<Vec<u8>>,
        map: Option<&[u8]>,
    ) -> KeptPass {
        self.summaries.push(summary(&open, true));
        let mut kept = read_detail(open, map);
        unparsed.append(&mut kept.unparsed);
        kept
    }

    /// Ends the open pass (always kept: it is the last) and returns the kept passes in order,
    /// the summary of every pass, and the detail prints not read.
    pub fn finish(
        mut self,
        unparsed: &mut Vec<Vec<u8>>,
        map: Option<&[u8]>,
    ) -> (Vec<KeptPass>, Vec<PassSummary>, u64) {
        let open = std::mem::take(&mut self.open);
        let last = (!open.pipeline.is_empty() || !open.deferred.is_empty())
            .then(|| self.keep(open, unparsed, map));
        let kept = self
            .first
            .into_iter()
            .chain(self.best)
            .map(|k| *k)
            .chain(last)
            .collect();
        (kept, self.summaries, self.not_read)
    }
}

/// The highest pipeline entry of a pass, the first of equal maxima.
fn pass_peak(pipeline: &[PipelineEntry]) -> Option<&PipelineEntry> {
    pipeline.iter().rev().max_by_key(|e| e.allocated)
}

fn summary(pass: &OpenPass, detail: bool) -> PassSummary {
    let peak = pass_peak(&pass.pipeline);
    PassSummary {
        pass: pass.index,
        detail,
        pipeline_prints: pass.pipeline.len() as u64,
        detail_prints: pass.deferred.len() as u64,
        before_pipeline: pass
            .pipeline
            .first()
            .filter(|e| e.kind == PipelineKind::BeforePipeline)
            .map(|e| e.allocated),
        peak_label: peak.map(PipelineEntry::label),
        peak_allocated: peak.map(|e| e.allocated),
        peak_cached: peak.map(|e| e.cached),
        peak_non_pytorch: peak.map(|e| e.non_pytorch),
        end_allocated: pass.pipeline.last().map(|e| e.allocated),
    }
}

/// Parses a kept pass's detail prints into its probes and saved tensors.
fn read_detail(open: OpenPass, map: Option<&[u8]>) -> KeptPass {
    let mut kept = KeptPass {
        index: open.index,
        ..KeptPass::default()
    };
    let mut fold = DetailFold::default();
    let mut lines = open.raw.split(|&b| b == b'\n');
    let mut mapped = open.mapped.iter();
    for d in &open.deferred {
        let line = lines.next().unwrap_or_default();
        // A print is never empty (it holds its tag): an empty line is a mapped one's.
        let in_map = if line.is_empty() { mapped.next() } else { None };
        let print = match (line, in_map, map) {
            (_, Some(&(start, len)), Some(map)) => &map[start..start + len as usize],
            (_, Some(_), None) => {
                unreachable!("a print deferred by its place in a map comes with it")
            }
            (line, None, _) => line,
        };
        let seq = open.first_seq + u64::from(d.seq);
        let folded = parse_print(print)
            .is_some_and(|p| fold.event(&mut kept, p.event, d.pipeline_at as usize, seq));
        if !folded {
            kept.unparsed.push(print.to_vec());
        }
    }
    kept.pipeline = open.pipeline;
    kept
}

/// What the next detail print of a pass is compared with.
#[derive(Default)]
struct DetailFold {
    /// `(pipeline position, allocated)` of the latest probe.
    last_probe: Option<(usize, i64)>,
    /// Index of the saved-tensor group still waiting for its summary line.
    open_saved: Option<usize>,
}

impl DetailFold {
    /// Folds one detail event; false for an event that is not a detail print's.
    fn event(&mut self, kept: &mut KeptPass, event: Event<'_>, position: usize, seq: u64) -> bool {
        match event {
            Event::Probe { label, allocated } => self.probe(kept, label, allocated, position, seq),
            Event::SavedHeader { layer, stage } => {
                kept.saved_tensors.push(SavedGroup {
                    pass: kept.index,
                    layer,
                    stage: stage.to_owned(),
                    activations: 0,
                    weights: 0,
                    count: 0,
                    complete: false,
                    size_from: GroupSizeFrom::RoundedMb,
                    bytes_exact: true,
                    tensors: Vec::new(),
                });
                self.open_saved = Some(kept.saved_tensors.len() - 1);
            }
            Event::SavedTensor {
                weight,
                shape,
                dtype,
                size,
                exact,
            } => {
                let Some(group) = self.open_saved.map(|g| &mut kept.saved_tensors[g]) else {
                    kept.orphans += 1;
                    return true;
                };
                let shape = parse_shape(shape);
                let (size, size_from) = saved::tensor_size(size, exact, shape.as_deref(), dtype);
                let bytes_exact = size_from != SizeFrom::RoundedMb;
                group.tensors.push(SavedTensor {
                    weight,
                    shape,
                    dtype: intern::text(dtype.strip_prefix("torch.").unwrap_or(dtype)),
                    size,
                    size_from,
                    bytes_exact,
                });
                // Until its summary line comes (it may never: a cut-off log) the group is the
                // sum of its tensors.
                group.count += 1;
                // Saturating: a forged log may list enough huge tensors to overflow.
                if weight {
                    group.weights = group.weights.saturating_add(size);
                } else {
                    group.activations = group.activations.saturating_add(size);
                }
                group.bytes_exact &= bytes_exact;
                group.size_from = if group.bytes_exact {
                    GroupSizeFrom::TensorSum
                } else {
                    GroupSizeFrom::RoundedMb
                };
            }
            Event::SavedSummary {
                activations,
                weights,
                count,
                exact,
            } => {
                let Some(group) = self.open_saved.take().map(|g| &mut kept.saved_tensors[g]) else {
                    kept.orphans += 1;
                    return true;
                };
                saved::group_size(group, activations, weights, count, exact);
            }
            _ => return false,
        }
        true
    }

    fn probe(
        &mut self,
        kept: &mut KeptPass,
        raw_label: &str,
        allocated: i64,
        position: usize,
        seq: u64,
    ) {
        let change = match self.last_probe {
            Some((pos, prev)) if pos == position => Some(allocated - prev),
            _ => None,
        };
        self.last_probe = Some((position, allocated));
        let label = raw_label.trim();
        let (tensor, shape, before) = match split_tensor(label) {
            Some((before, name, shape)) => (Some(intern::text(name)), parse_shape(shape), before),
            None => (None, None, label),
        };
        let last = |source| last_point(seq, source, label, allocated);
        if let Some(step) = label.strip_prefix("experts:") {
            let step = match &tensor {
                Some(_) => before.strip_prefix("experts:").unwrap_or(step),
                None => step,
            };
            kept.experts.push(ExpertProbe {
                pass: kept.index,
                pipeline_position: position,
                step: intern::text(step.trim()),
                tensor,
                shape,
                allocated,
                change,
            });
            kept.last_probe = last(PointSource::Experts);
            return;
        }
        let indent = raw_label.len() - raw_label.trim_start().len();
        kept.layers.push(LayerProbe {
            pass: kept.index,
            pipeline_position: position,
            label: intern::text(label),
            depth: u8::from(indent > 0),
            layer: number_after(label, "layer"),
            stage: number_after(label, "stage"),
            tensor,
            shape,
            allocated,
            change,
        });
        kept.last_probe = last(PointSource::Layer);
    }
}

/// A rank's last memory figure, with its place among the rank's prints (`seq`): the later of
/// the last probe and the last other print is the rank's [`LastPoint`].
pub fn last_point(
    seq: u64,
    source: PointSource,
    label: &str,
    allocated: i64,
) -> Option<(u64, LastPoint)> {
    Some((
        seq,
        LastPoint {
            source,
            label: label.to_owned(),
            allocated,
        },
    ))
}

/// Splits `… name=(shape)` at the end of a probe label into (text before, name, shape).
pub fn split_tensor(label: &str) -> Option<(&str, &str, &str)> {
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
pub fn parse_shape(text: &str) -> Option<std::sync::Arc<[u64]>> {
    let inner = text.strip_prefix('(')?.strip_suffix(')')?;
    // Read on the stack (a tensor has few dimensions), then shared: held for every tensor of
    // every rank to the end, once ([`super::intern`]).
    let mut dims = [0u64; 8];
    let mut n = 0;
    let mut more = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let dim = part.parse().ok()?;
        if n < dims.len() {
            dims[n] = dim;
        } else {
            more.push(dim);
        }
        n += 1;
    }
    if n <= dims.len() {
        return Some(intern::shape(&dims[..n]));
    }
    let mut all = dims.to_vec();
    all.extend(more);
    Some(intern::shape(&all))
}

/// The number right after the first `word` that is followed by a digit (`layer5` → 5).
fn number_after(label: &str, word: &str) -> Option<u32> {
    label.match_indices(word).find_map(|(at, _)| {
        let rest = &label[at + word.len()..];
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..n].parse().ok()
    })
}
