//! The fallback: an [`Estimate`] read from the estimator's text output, for when its objects no
//! longer look as the driver expects.
//!
//! Input: the stdout of `python -m tools.memory_estimator … --pp-rank R --detail --timeline
//! --timeline-limit 0` (one rank's summary, detail, timeline and suggestions). Precision follows
//! what the text prints: tensor lists give exact bytes (shape × dtype size), so parameters per
//! module and one chunk's activations per layer stage are exact; `format_bytes` figures
//! (`46.08 MB`) are good to 3-4 digits; summary lines (`0.02 GB`) to 0.005 GiB; timeline totals to
//! 0.0005 GiB. An event's allocated bytes are `TOTAL / (1 + fragmentation) − non-PyTorch`, so
//! they inherit the summary's rounding of the non-PyTorch figure (±5 MiB). Contract: fails with
//! [`EstimateError::Unparseable`] naming the first missing part (header, peak, timeline); every
//! other missing figure reads as 0, as the estimator leaves out sections whose total is 0.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::EstimateError;
use super::figures::{
    Dynamic, Estimate, EstimatedEvent, LayerPart, ModelSummary, Parallel, Part, Source,
    StageParams, Status, module_stage,
};
use super::schedule::ScheduleEvent;

const GIB: f64 = (1u64 << 30) as f64;

static MODEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^  Model: (\S+) \| (\d+) layers, (\d+) experts, top-(\d+)$").expect("valid")
});
static PARALLEL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^  Parallelism: pp=(\d+), ep=(\d+), dp=(\d+), cp=(\d+) \| \d+ GPUs \| pp_rank=(\d+)$",
    )
    .expect("valid")
});
static TRAINING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^  Training: micro_bs=(\d+), global_bs=(\d+), seq_len=(\d+), num_chunks=(\d+)$")
        .expect("valid")
});
static SUMMARY_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^  (\S.*?)\s+(-?\d+\.\d+) GB$").expect("valid"));
static PEAK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"^  Peak at: event #(\d+) "(.*)"$"#).expect("valid"));
static TIMELINE_ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^  (\d+)\s+(\S.*?)\s+(-?\d+\.\d+)\s+[+-]?\d+\.\d+\s+\(\d+,\d+\)(?: \*\*\* PEAK)?$")
        .expect("valid")
});
static SPEC: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s+(\S+)\s+\[([\d,]*)\s*\]\s+(\w+)\s+\d+(?:\.\d+)? [KMG]?B$").expect("valid")
});
static LIVE_CHUNK: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^--- Live chunk phase=([01]), chunk=(\d+) ---$").expect("valid"));
static GROUP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^    (prolog|epilog|L(\d+)) \(.*\):$").expect("valid"));
static SECTION_SIZE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^--- (Gradients|WeightGradStore|PP Transfer Buffers) \((.*)\) ---$")
        .expect("valid")
});
static TOTAL_LINE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^    Total: (\d+(?:\.\d+)? [KMG]?B) \(").expect("valid"));
static FRAGMENTATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^  CUDA allocator fragmentation \(~(\d+)%\)\s+(-?\d+\.\d+) GB$").expect("valid")
});
static STATUS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"STATUS: (OK|TIGHT|OOM)").expect("valid"));

fn dtype_size(dtype: &str) -> Option<i64> {
    Some(match dtype {
        "bf16" | "fp16" | "int16" => 2,
        "fp32" | "int32" => 4,
        "fp8" | "int8" => 1,
        "int64" => 8,
        _ => return None,
    })
}

/// `[2,512,256]` `bf16` → bytes.
fn spec_bytes(shape: &str, dtype: &str) -> Option<i64> {
    let mut n: i64 = 1;
    for dim in shape.split(',').filter(|d| !d.is_empty()) {
        n = n.checked_mul(dim.parse().ok()?)?;
    }
    n.checked_mul(dtype_size(dtype)?)
}

/// `format_bytes` output (`0 B`, `4.0 KB`, `46.08 MB`, `1.234 GB`) → bytes.
fn formatted_bytes(text: &str) -> Option<i64> {
    let (number, unit) = text.trim().split_once(' ')?;
    let scale = match unit {
        "B" => 1.0,
        "KB" => 1024.0,
        "MB" => 1024.0 * 1024.0,
        "GB" => GIB,
        _ => return None,
    };
    Some((number.parse::<f64>().ok()? * scale).round() as i64)
}

fn gib(text: &str) -> i64 {
    text.parse::<f64>().map_or(0, |g| (g * GIB).round() as i64)
}

enum Section {
    None,
    Params(usize),
    Fsdp,
    Optimizer,
    Chunk {
        phase: u8,
        first: bool,
        autograd: bool,
        part: Option<Part>,
    },
}

fn unparseable(reason: &str) -> EstimateError {
    EstimateError::Unparseable {
        reason: format!("estimator text: {reason}"),
    }
}

/// Capture `i` as a number; 0 when it is absent (the regexes only capture digits).
fn num<T: std::str::FromStr + Default>(c: &regex::Captures<'_>, i: usize) -> T {
    c.get(i)
        .and_then(|m| m.as_str().parse().ok())
        .unwrap_or_default()
}

/// Reads one pp rank's text output.
pub fn from_text(stdout: &str) -> Result<Estimate, EstimateError> {
    let mut model = None;
    let mut parallel_rank = None;
    let mut training = None;
    let mut summary: BTreeMap<String, i64> = BTreeMap::new();
    let mut peak = None;
    let mut fragmentation = None;
    let mut status = None;
    let mut timeline: Vec<(String, i64)> = Vec::new();
    let mut params: Vec<StageParams> = Vec::new();
    let mut fsdp_sharded = 0;
    let mut optimizer = None;
    let mut gradients = 0;
    let mut wgrad_store = 0;
    let mut pp_transfer = 0;
    let mut live = Dynamic::default();
    let mut seen_phases = [false; 2];
    let mut chunk_bytes = [None::<i64>; 2];
    let mut parts: BTreeMap<(u8, Part), LayerPart> = BTreeMap::new();
    let mut section = Section::None;

    for line in stdout.lines() {
        if let Some(c) = MODEL.captures(line) {
            model = Some(ModelSummary {
                model_type: c[1].to_owned(),
                layers: num(&c, 2),
                experts: num(&c, 3),
                experts_per_token: num(&c, 4),
                fields: BTreeMap::new(),
            });
        } else if let Some(c) = PARALLEL.captures(line) {
            parallel_rank = Some((
                [num(&c, 1), num(&c, 2), num(&c, 3), num(&c, 4)],
                num::<u32>(&c, 5),
            ));
        } else if let Some(c) = TRAINING.captures(line) {
            training = Some([num(&c, 1), num(&c, 2), num(&c, 3), num(&c, 4)]);
        } else if let Some(c) = PEAK.captures(line) {
            peak = Some(num::<usize>(&c, 1));
        } else if let Some(c) = FRAGMENTATION.captures(line) {
            fragmentation = Some((num::<u32>(&c, 1), gib(&c[2])));
        } else if let Some(c) = STATUS.captures(line) {
            status = Some(match &c[1] {
                "OK" => Status::Ok,
                "TIGHT" => Status::Tight,
                _ => Status::Oom,
            });
        } else if let Some(c) = TIMELINE_ROW.captures(line) {
            timeline.push((c[2].to_owned(), gib(&c[3])));
        } else if let Some(c) = SUMMARY_LINE.captures(line) {
            summary.entry(c[1].to_owned()).or_insert_with(|| gib(&c[2]));
        } else if let Some(name) = line
            .strip_prefix("--- ")
            .and_then(|l| l.strip_suffix(" ---"))
        {
            section = if let Some((module, stage)) = module_stage(name) {
                params.push(StageParams {
                    module,
                    stage,
                    bytes: 0,
                    rotary_bytes: 0,
                });
                Section::Params(params.len() - 1)
            } else if name.starts_with("FSDP sharded params") {
                Section::Fsdp
            } else if name.starts_with("Optimizer states") {
                Section::Optimizer
            } else if let Some(c) = LIVE_CHUNK.captures(line) {
                let phase: u8 = num(&c, 1);
                let first = !seen_phases[usize::from(phase)];
                seen_phases[usize::from(phase)] = true;
                Section::Chunk {
                    phase,
                    first,
                    autograd: false,
                    part: None,
                }
            } else {
                if let Some(c) = SECTION_SIZE.captures(line) {
                    let bytes = formatted_bytes(&c[2]).unwrap_or(0);
                    match &c[1] {
                        "Gradients" => gradients = bytes,
                        "WeightGradStore" => wgrad_store = bytes,
                        _ => pp_transfer = bytes,
                    }
                }
                Section::None
            };
        } else if line.starts_with("===") {
            section = Section::None;
        } else {
            match &mut section {
                Section::None => {}
                Section::Params(index) => {
                    if let Some(c) = SPEC.captures(line)
                        && let Some(bytes) = spec_bytes(&c[2], &c[3])
                    {
                        params[*index].bytes += bytes;
                        if c[1].contains("rotary_emb") {
                            params[*index].rotary_bytes += bytes;
                        }
                    }
                }
                Section::Fsdp | Section::Optimizer => {
                    if let Some(c) = TOTAL_LINE.captures(line) {
                        let bytes = formatted_bytes(&c[1]).unwrap_or(0);
                        match section {
                            Section::Fsdp => fsdp_sharded = bytes,
                            _ => optimizer = Some(bytes),
                        }
                    }
                }
                Section::Chunk {
                    phase,
                    first,
                    autograd,
                    part,
                } => {
                    if line.starts_with("  LayerRecord tensors") {
                        *autograd = false;
                    } else if line.starts_with("  Autograd overhead") {
                        *autograd = true;
                    } else if let Some(c) = GROUP.captures(line) {
                        *part = Some(match &c[1] {
                            "prolog" => Part::Prolog,
                            "epilog" => Part::Epilog,
                            _ => Part::Layer {
                                layer: num(&c, 2),
                                stage: 0,
                            },
                        });
                    } else if let Some(c) = SPEC.captures(line)
                        && let Some(bytes) = spec_bytes(&c[2], &c[3])
                    {
                        if *autograd {
                            live.autograd += bytes;
                        } else {
                            live.activations += bytes;
                        }
                        if !*first {
                            continue;
                        }
                        *chunk_bytes[usize::from(*phase)].get_or_insert(0) += bytes;
                        let part = match *part {
                            // `s3.ag.expand_idx` under `L2`: the stage is the name's first field.
                            Some(Part::Layer { layer, .. }) => Part::Layer {
                                layer,
                                stage: c[1]
                                    .strip_prefix('s')
                                    .and_then(|s| s.split('.').next())
                                    .and_then(|s| s.parse().ok())
                                    .unwrap_or(0),
                            },
                            Some(other) => other,
                            None => continue,
                        };
                        let entry = parts.entry((*phase, part)).or_insert(LayerPart {
                            phase: *phase,
                            part,
                            records: 0,
                            autograd: 0,
                            moe: false,
                        });
                        if *autograd {
                            entry.autograd += bytes;
                        } else {
                            entry.records += bytes;
                        }
                        entry.moe |= c[1].contains("topk") || c[1].contains("scattered");
                    }
                }
            }
        }
    }

    let model = model.ok_or_else(|| unparseable("no `Model:` header line"))?;
    let (degrees, pp_rank) =
        parallel_rank.ok_or_else(|| unparseable("no `Parallelism:` header line"))?;
    let [
        micro_batch_size,
        global_batch_size,
        sequence_length,
        num_chunks,
    ] = training.ok_or_else(|| unparseable("no `Training:` header line"))?;
    let [pp, ep, dp, cp] = degrees;
    let peak_index = peak.ok_or_else(|| unparseable("no `Peak at: event #…` line"))?;
    if timeline.len() <= peak_index {
        return Err(unparseable(
            "no full timeline (was it run with --timeline --timeline-limit 0?)",
        ));
    }
    let (percent, fragmentation_at_peak) = fragmentation.unwrap_or((0, 0));
    let factor = f64::from(percent) / 100.0;
    let line = |name: &str| summary.get(name).copied().unwrap_or(0);
    let non_pytorch = line("Non-PyTorch (CUDA ctx, NCCL, compile)");
    let at_peak = Dynamic {
        comm_buffers: line("Comm buffers (P2P + all-to-all)"),
        gradients,
        wgrad_store,
        pp_transfer,
        ..live
    };
    let events = timeline
        .iter()
        .map(|(label, total)| {
            let allocated = (*total as f64 / (1.0 + factor)).round() as i64 - non_pytorch;
            let allocated_after = match ScheduleEvent::parse(label).and_then(|e| e.released_after())
            {
                Some((phase, _)) => chunk_bytes[usize::from(phase)].map(|b| allocated - b),
                None => Some(allocated),
            };
            EstimatedEvent {
                label: label.clone(),
                allocated,
                allocated_after,
            }
        })
        .collect();
    Ok(Estimate {
        pp_rank,
        source: Source::Text,
        model,
        parallel: Parallel {
            pp,
            ep,
            dp,
            cp,
            micro_batch_size,
            global_batch_size,
            sequence_length,
            num_chunks,
        },
        events,
        params,
        fsdp_sharded,
        optimizer: optimizer.unwrap_or_else(|| line("Optimizer states (Adam m+v, fp32)")),
        peak_index,
        at_peak,
        non_pytorch,
        fragmentation_factor: factor,
        fragmentation_at_peak,
        total_at_peak: line("TOTAL"),
        gpu_memory: line("GPU capacity"),
        status,
        layers: parts.into_values().collect(),
        notes: vec![
            "figures read from the estimator's text output: events are good to about ±6 MiB \
             (its totals are printed to 0.001 GB and its non-PyTorch figure to 0.01 GB)"
                .to_owned(),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::from_driver_json;

    const MIB: i64 = 1 << 20;

    fn pair(json: &str, text: &str, rank: usize) -> (Estimate, Estimate) {
        let exact = from_driver_json(json).unwrap().swap_remove(rank);
        (exact, from_text(text).unwrap())
    }

    #[test]
    fn the_text_of_each_recorded_run_agrees_with_its_exact_figures() {
        for (json, text, rank) in [
            (
                include_str!("../../../tests/data/estimate/qwen3-tiny-pp1.json"),
                include_str!("../../../tests/data/estimate/qwen3-tiny-pp1-rank0.txt"),
                0,
            ),
            (
                include_str!("../../../tests/data/estimate/dsv2-tiny-pp1.json"),
                include_str!("../../../tests/data/estimate/dsv2-tiny-pp1-rank0.txt"),
                0,
            ),
            (
                include_str!("../../../tests/data/estimate/qwen3-tiny-pp2.json"),
                include_str!("../../../tests/data/estimate/qwen3-tiny-pp2-rank1.txt"),
                1,
            ),
            (
                include_str!("../../../tests/data/estimate/qwen3-big-pp4.json"),
                include_str!("../../../tests/data/estimate/qwen3-big-pp4-rank0.txt"),
                0,
            ),
        ] {
            let (exact, text) = pair(json, text, rank);
            let what = format!("pp={} rank {}", exact.parallel.pp, exact.pp_rank);
            assert_eq!(text.source, Source::Text);
            assert_eq!(
                (text.pp_rank, &text.parallel, text.peak_index, text.status),
                (
                    exact.pp_rank,
                    &exact.parallel,
                    exact.peak_index,
                    exact.status
                ),
                "{what}"
            );
            assert_eq!(
                (text.model.layers, text.model.experts),
                (exact.model.layers, exact.model.experts)
            );
            // Tensor lists are exact.
            assert_eq!(text.params, exact.params, "{what}");
            assert_eq!(text.layers, exact.layers, "{what}");
            assert_eq!(
                text.at_peak.activations, exact.at_peak.activations,
                "{what}"
            );
            assert_eq!(text.at_peak.autograd, exact.at_peak.autograd, "{what}");
            assert_eq!(text.fragmentation_factor, exact.fragmentation_factor);
            // format_bytes figures keep 3-4 digits, summary figures 0.01 GiB.
            let close = |a: i64, b: i64| (a - b).abs() <= (MIB / 10).max(b / 1000);
            assert!(close(text.optimizer, exact.optimizer), "{what}");
            assert!(
                close(text.at_peak.gradients, exact.at_peak.gradients),
                "{what}"
            );
            assert!(
                (text.non_pytorch - exact.non_pytorch).abs() <= 6 * MIB,
                "{what}"
            );
            assert_eq!(text.events.len(), exact.events.len());
            for (t, e) in text.events.iter().zip(&exact.events) {
                assert_eq!(t.label, e.label);
                assert!(
                    (t.allocated - e.allocated).abs() <= 6 * MIB,
                    "{what} {}",
                    e.label
                );
                let after = t.allocated_after.unwrap() - e.allocated_after.unwrap();
                assert!(after.abs() <= 6 * MIB, "{what} {}", e.label);
            }
        }
    }

    #[test]
    fn text_without_a_timeline_is_refused_with_the_reason() {
        let text = include_str!("../../../tests/data/estimate/qwen3-tiny-pp1-rank0.txt");
        let cut = &text[..text.find("Schedule Timeline").unwrap()];
        let err = from_text(cut).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read the memory estimator's output: estimator text: no full timeline (was \
             it run with --timeline --timeline-limit 0?)"
        );
        let err = from_text("").unwrap_err();
        assert!(
            err.to_string().ends_with("no `Model:` header line"),
            "{err}"
        );
    }

    #[test]
    fn format_bytes_reads_back_in_binary_units() {
        assert_eq!(formatted_bytes("0 B"), Some(0));
        assert_eq!(formatted_bytes("4.0 KB"), Some(4096));
        assert_eq!(formatted_bytes("46.08 MB"), Some(48_318_382));
        assert_eq!(formatted_bytes("1.5 GB"), Some(3 << 29));
        assert_eq!(formatted_bytes("12 TB"), None);
        assert_eq!(spec_bytes("2,512,256", "bf16"), Some(524_288));
        assert_eq!(spec_bytes("", "fp32"), Some(4));
        assert_eq!(spec_bytes("2", "complex64"), None);
    }
}
