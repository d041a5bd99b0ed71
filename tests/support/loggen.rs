//! Generator of realistic logs of an instrumented PithTrain run, for tests and the benchmark.
//!
//! It simulates each rank's stdout (setup, distributed init, checkpoint load, DualPipeV steps
//! 1-8 with the step counts of `DualPipeV.step`, layer probes, saved tensors, experts internals,
//! snapshot, rank-0 step lines), then interleaves the ranks the way one `tee`d file per node does,
//! with optional launcher prefixes, ANSI colours, CRLF, timestamps, prints glued together, garbage,
//! duplicates, a cut-off last line and an OOM. Deterministic for a given seed. It counts what it
//! wrote (`[rank=` tags, pipeline prints per rank) so tests can check the report against it.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{self, Write};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefix {
    None,
    /// `srun --label`: `3: `
    Srun,
    /// `torchrun --tee`: `[rank3]:`
    TorchrunRank,
    /// `torchrun --tee`: `[default3]:`
    TorchrunDefault,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    pub world: u32,
    pub pp: u32,
    pub num_chunks: u32,
    /// Ranks that print (the instrumentation's RANKS).
    pub ranks: Vec<u32>,
    /// Training steps whose pipeline is profiled (1 = step 0 only, as the full skill does).
    pub profiled_steps: u32,
    pub train_steps: u32,
    pub prefix: Prefix,
    pub ansi: bool,
    pub crlf: bool,
    pub timestamps: bool,
    /// Probability (per mille) that a print is glued to the next line.
    pub glue_per_mille: u32,
    pub garbage: bool,
    /// Rank that runs out of memory in Step 3 of the first step (the run stops there).
    pub oom_rank: Option<u32>,
    pub cut_last_line: bool,
    pub checkpoint: bool,
    /// Noise lines per rank per training step.
    pub noise: u32,
    pub seed: u64,
    /// Stop after the first training step that brings the log past this size.
    pub max_bytes: Option<u64>,
    /// Layer probes and saved tensors in every profiled step, not only the first.
    pub detail_every_step: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            world: 4,
            pp: 2,
            num_chunks: 8,
            ranks: vec![0, 1, 2, 3],
            profiled_steps: 1,
            train_steps: 3,
            prefix: Prefix::None,
            ansi: false,
            crlf: false,
            timestamps: false,
            glue_per_mille: 0,
            garbage: false,
            oom_rank: None,
            cut_last_line: false,
            checkpoint: true,
            noise: 1,
            seed: 1,
            max_bytes: None,
            detail_every_step: false,
        }
    }
}

/// What the generator wrote.
#[derive(Debug, Default, Clone)]
pub struct LogCounts {
    pub tags: u64,
    pub garbage: u64,
    pub pipeline: BTreeMap<u32, u64>,
    pub bytes: u64,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const DETAIL_TAIL: &str = "cached={:.2} non-pt={:.2}";

/// Simulated memory of one rank, in GiB.
struct Mem {
    alloc: f64,
    cached: f64,
    non_pt: f64,
}

impl Mem {
    fn detail(&self) -> String {
        format!(
            "alloc={:.2} cached={:.2} non-pt={:.2}",
            self.alloc, self.cached, self.non_pt
        )
    }
}

fn setup_lines(cfg: &LogConfig, rank: u32, out: &mut Vec<String>, mem: &mut Mem) {
    let r = rank;
    out.push(format!(
        "[rank={r}] init_process_group | cuda_ctx=0.52 after_nccl_world=1.10 nccl_world_cost=0.58"
    ));
    out.push(format!(
        "[rank={r}] init_device_mesh | non-pt=1.40 mesh_cost=0.30"
    ));
    mem.non_pt = 1.40;
    out.push(format!(
        "[rank={r}] setup_model | before model creation: {}",
        mem.detail()
    ));
    let pp = rank / (cfg.world / cfg.pp);
    let chunk = 2.0 + 0.25 * f64::from(pp);
    for (k, label) in ["after module[0] creation", "after module[1] creation"]
        .iter()
        .enumerate()
    {
        mem.alloc += chunk * (1.0 + k as f64 * 0.1);
        out.push(format!(
            "[rank={r}] setup_model | {label}: {}",
            mem.detail()
        ));
    }
    mem.cached = 0.12;
    out.push(format!(
        "[rank={r}] setup_model | after init_weights: {}",
        mem.detail()
    ));
    mem.alloc /= 2.0;
    mem.cached = 0.5;
    out.push(format!(
        "[rank={r}] setup_model | after apply_fsdp: {}",
        mem.detail()
    ));
    if cfg.checkpoint {
        let optim = mem.alloc * 2.0;
        mem.alloc += optim;
        out.push(format!(
            "[rank={r}] load_ckpt | optimizer state: {optim:.2} GiB (412 param entries) | {}",
            mem.detail()
        ));
    }
}

fn layer_lines(rank: u32, layer: u32, out: &mut Vec<String>, mem: &mut Mem, first_stage: bool) {
    let r = rank;
    let probe = |out: &mut Vec<String>, label: &str, add: f64, mem: &mut Mem| {
        mem.alloc += add;
        out.push(format!("[rank={r}]   {label}: alloc={:.2}", mem.alloc));
    };
    if first_stage {
        probe(out, "after prolog (embed_tokens)", 0.03, mem);
    }
    probe(
        out,
        &format!("  layer{layer} stage1: before forward_stage1_compute"),
        0.0,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage1: after forward_stage1_compute (LN+Attn+LN+gate)"),
        0.09,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage1: after dispatch_prep  dispatch=(8192, 2048)"),
        0.03,
        mem,
    );
    out.push(format!("[rank={r}] layer{layer} stage1 saved tensors:"));
    out.push(format!(
        "[rank={r}]     saved (activ): (4096, 2048) torch.bfloat16 (16.0 MB)"
    ));
    out.push(format!(
        "[rank={r}]     saved (weight): (2048,) torch.bfloat16 (0.0 MB)"
    ));
    out.push(format!(
        "[rank={r}]     saved (activ): (4096, 32, 128) torch.bfloat16 (32.0 MB)"
    ));
    out.push(format!(
        "[rank={r}]   activ=48.0 MB, weight=0.0 MB, total=3 tensors"
    ));
    probe(
        out,
        &format!("layer{layer} after stage1 (forward_stage1: attn + gate + dispatch_prep)"),
        0.0,
        mem,
    );
    probe(
        out,
        &format!("layer{layer} after stage2 (dispatch a2a)"),
        0.03,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage3: before expand gather  gathered=(8192, 2048)"),
        0.0,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage3: after expand gather   expanded=(16384, 2048)"),
        0.06,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage3: after scatter      output_tokens=(16384, 2048)"),
        0.06,
        mem,
    );
    probe(
        out,
        "    experts: input             x=(16384, 2048)",
        0.0,
        mem,
    );
    probe(
        out,
        "    experts: after gate_proj   g=(16384, 768)",
        0.02,
        mem,
    );
    probe(
        out,
        "    experts: after up_proj     u=(16384, 768)",
        0.02,
        mem,
    );
    probe(
        out,
        "    experts: after silu_mul    gu=(16384, 768)",
        0.02,
        mem,
    );
    probe(
        out,
        "    experts: after down_proj   out=(16384, 2048)",
        0.06,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage3: after experts      outs=(16384, 2048)"),
        0.0,
        mem,
    );
    probe(
        out,
        &format!("  layer{layer} stage3: after unshuffle    outs=(16384, 2048)"),
        -0.06,
        mem,
    );
    out.push(format!("[rank={r}] layer{layer} stage3 saved tensors:"));
    out.push(format!(
        "[rank={r}]     saved (activ): (16384, 2048) torch.bfloat16 (64.0 MB)"
    ));
    out.push(format!(
        "[rank={r}]     saved (weight): (128, 768, 2048) torch.bfloat16 (384.0 MB)"
    ));
    out.push(format!(
        "[rank={r}]   activ=64.0 MB, weight=384.0 MB, total=2 tensors"
    ));
    probe(
        out,
        &format!("layer{layer} after stage3 (forward_stage3)"),
        -0.1,
        mem,
    );
    probe(
        out,
        &format!("layer{layer} after stage4 (combine a2a)"),
        0.03,
        mem,
    );
    probe(
        out,
        &format!("layer{layer} after stage5 (forward_stage5)"),
        -0.05,
        mem,
    );
    if !first_stage {
        probe(out, "before epilog (norm + lm_head)", 0.0, mem);
        probe(out, "after norm, before lm_head", 0.02, mem);
        probe(out, "after lm_head", 0.5, mem);
    }
}

/// One rank's lines for one profiled step; returns `false` when the rank hit the OOM.
fn pipeline_lines(
    cfg: &LogConfig,
    rank: u32,
    out: &mut Vec<String>,
    mem: &mut Mem,
    first: bool,
) -> bool {
    let pp = rank / (cfg.world / cfg.pp);
    let tag = format!("[rank={rank} pp={pp}]");
    let act = 0.8 + 0.1 * f64::from(pp);
    let m0 = mem.alloc;
    let print = |out: &mut Vec<String>, label: String, mem: &Mem, delta: Option<String>| {
        let d = delta.map(|d| format!(" ({d})")).unwrap_or_default();
        out.push(format!(
            "{tag} {label}: {:.2} GiB{d} | {}",
            mem.alloc,
            mem.detail()
        ));
    };
    let plus = |mem: &Mem| format!("+{:.2}", mem.alloc - m0);
    print(out, "Before pipeline".into(), mem, None);
    let (s1, s2, s3) = ((cfg.pp - pp - 1) * 2, pp + 1, cfg.pp - pp - 1);
    let s4 = (cfg.num_chunks + pp + 1).saturating_sub(cfg.pp * 2);
    let layer = 5 + pp;
    for i in 0..s1 {
        if i == 1 && (first || cfg.detail_every_step) {
            layer_lines(rank, layer, out, mem, pp == 0);
        }
        mem.alloc += act;
        print(out, format!("Step1 F0 i={i}"), mem, Some(plus(mem)));
    }
    print(out, format!("After Step1 ({s1} F0)"), mem, Some(plus(mem)));
    for i in 0..s2 {
        mem.alloc += act;
        print(
            out,
            format!("Step2 i={i} forward_chunk(0)"),
            mem,
            Some(plus(mem)),
        );
        if i == 0 && (first || cfg.detail_every_step) {
            layer_lines(rank, 40 - layer, out, mem, false);
        }
        mem.alloc += act;
        print(
            out,
            format!("Step2 i={i} forward_chunk(1)"),
            mem,
            Some(plus(mem)),
        );
    }
    print(
        out,
        format!("After Step2 ({s2} F0F1)"),
        mem,
        Some(plus(mem)),
    );
    mem.cached = 1.0 + 0.2 * f64::from(pp);
    for i in 0..s3 {
        let ms3 = mem.alloc;
        print(out, format!("Step3 i={i} before B1"), mem, None);
        if cfg.oom_rank == Some(rank) && first {
            return false;
        }
        for (what, change) in [
            ("after B1", -0.5 * act),
            ("after W1", -0.5 * act),
            ("after F1", act),
        ] {
            mem.alloc += change;
            print(
                out,
                format!("Step3 i={i} {what}"),
                mem,
                Some(format!("delta={:+.2}", mem.alloc - ms3)),
            );
        }
    }
    print(
        out,
        format!("After Step3 ({s3} B1W1F1)"),
        mem,
        Some(plus(mem)),
    );
    for i in 0..s4 {
        print(out, format!("Step4 i={i}"), mem, None);
    }
    print(out, format!("After Step4 ({s4} F0B1F1B0)"), mem, None);
    mem.alloc = m0;
    print(out, "After Step8 (end of pipeline)".into(), mem, None);
    true
}

struct Emitter<'a, W: Write> {
    cfg: &'a LogConfig,
    out: W,
    rng: Rng,
    counts: LogCounts,
    clock: u64,
    /// The previous print's newline, held back so the next print can run into it.
    pending_newline: bool,
}

impl<W: Write> Emitter<'_, W> {
    /// Writes the ranks' streams interleaved; `None` as a rank means an unprefixed launcher line.
    fn interleave(
        &mut self,
        mut streams: Vec<(Option<u32>, std::vec::IntoIter<String>)>,
    ) -> io::Result<()> {
        while !streams.is_empty() {
            let k = self.rng.below(streams.len() as u64) as usize;
            let Some(line) = streams[k].1.next() else {
                streams.swap_remove(k);
                continue;
            };
            let rank = streams[k].0;
            self.emit(rank, &line)?;
        }
        Ok(())
    }

    fn emit(&mut self, rank: Option<u32>, line: &str) -> io::Result<()> {
        let mut text = String::new();
        let is_print = line.starts_with("[rank=");
        if std::mem::take(&mut self.pending_newline) {
            if is_print {
                // Two prints ran together: the second has no launcher prefix of its own.
                return self.body(line, text);
            }
            text += self.newline();
        }
        if self.cfg.timestamps {
            self.clock += 1;
            text += &format!(
                "2026-07-22T10:{:02}:{:02}.{:03}Z ",
                self.clock / 60000 % 60,
                self.clock / 1000 % 60,
                self.clock % 1000
            );
        }
        if let Some(r) = rank {
            match self.cfg.prefix {
                Prefix::None => {}
                Prefix::Srun => text += &format!("{r}: "),
                Prefix::TorchrunRank => text += &format!("[rank{r}]:"),
                Prefix::TorchrunDefault => text += &format!("[default{r}]:"),
            }
        }
        self.body(line, text)
    }

    fn body(&mut self, line: &str, mut text: String) -> io::Result<()> {
        let is_print = line.starts_with("[rank=");
        let colored = self.cfg.ansi && is_print && self.rng.below(3) == 0;
        if colored {
            text += &format!("\x1b[32m{line}\x1b[0m");
        } else {
            text += line;
        }
        self.counts.tags += line.matches("[rank=").count() as u64;
        let glue = is_print && self.rng.below(1000) < u64::from(self.cfg.glue_per_mille);
        if glue {
            self.pending_newline = true;
        } else {
            text += self.newline();
        }
        self.counts.bytes += text.len() as u64;
        self.out.write_all(text.as_bytes())
    }

    fn newline(&self) -> &'static str {
        if self.cfg.crlf { "\r\n" } else { "\n" }
    }
}

/// Writes a whole log to `out`.
pub fn write_log<W: Write>(cfg: &LogConfig, out: W) -> io::Result<LogCounts> {
    let mut e = Emitter {
        cfg,
        out,
        rng: Rng(cfg.seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        counts: LogCounts::default(),
        clock: 0,
        pending_newline: false,
    };
    let printing: Vec<u32> = cfg
        .ranks
        .iter()
        .copied()
        .filter(|r| *r < cfg.world)
        .collect();
    let mut mems: BTreeMap<u32, Mem> = printing
        .iter()
        .map(|r| {
            (
                *r,
                Mem {
                    alloc: 0.0,
                    cached: 0.0,
                    non_pt: 0.52,
                },
            )
        })
        .collect();
    let mut streams = Vec::new();
    for &r in &printing {
        let mut lines = Vec::new();
        setup_lines(cfg, r, &mut lines, mems.get_mut(&r).expect("rank"));
        if cfg.garbage {
            lines.push(format!(
                "[rank={r}] setup_model | after init_weights: alloc=1.0"
            ));
            lines.push(format!("[rank={r}] ??? {}", DETAIL_TAIL));
            e.counts.garbage += 2;
        }
        streams.push((Some(r), lines.into_iter()));
    }
    streams.push((
        None,
        vec![
            "W0722 10:00:00.000000 torch/distributed/run.py:792] Setting OMP_NUM_THREADS"
                .to_owned(),
        ]
        .into_iter(),
    ));
    e.interleave(streams)?;
    let mut oom_hit = false;
    for step in 0..cfg.train_steps.max(cfg.profiled_steps) {
        let mut streams = Vec::new();
        if step < cfg.profiled_steps {
            for &r in &printing {
                let mut lines = Vec::new();
                let mem = mems.get_mut(&r).expect("rank");
                let finished = pipeline_lines(cfg, r, &mut lines, mem, step == 0);
                let n = lines.iter().filter(|l| l.contains(" pp=")).count() as u64;
                *e.counts.pipeline.entry(r).or_default() += n;
                if !finished {
                    oom_hit = true;
                    lines.push("Traceback (most recent call last):".to_owned());
                    lines.push(
                        "  File \"pithtrain/dualpipe/dualpipev.py\", line 612, in step".to_owned(),
                    );
                    lines.push("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which 1.12 GiB is free.".to_owned());
                    lines.push(format!(
                        "[rank={r}] Memory snapshot saved to /tmp/memory_snapshot_rank{r}.pickle"
                    ));
                } else if step == 0 && r == 0 {
                    lines.push(
                        "[rank=0] Memory snapshot saved to /tmp/memory_snapshot_rank0_step0.pickle"
                            .to_owned(),
                    );
                }
                if cfg.garbage && step == 0 {
                    let dup = lines[lines.len() / 2].clone();
                    if dup.contains(" pp=") {
                        *e.counts.pipeline.entry(r).or_default() += 1;
                    }
                    lines.push(dup);
                }
                streams.push((Some(r), lines.into_iter()));
            }
        }
        if oom_hit {
            e.interleave(streams)?;
            break;
        }
        let mut launcher = Vec::new();
        for n in 0..cfg.noise {
            launcher.push(format!("[W722 10:00:{:02}.000 ProcessGroupNCCL.cpp:4561] Guessing device ID based on global rank {n}.", step % 60));
        }
        streams.push((None, launcher.into_iter()));
        e.interleave(streams)?;
        let peak = 20.0 + f64::from(step % 7) * 0.01;
        let line = format!(
            "2026-07-22 10:00:{:02} | INFO | step {:08}/{:08} | step-time {:.3} sec | cross-entropy-loss 10.1234 | learning-rate 1.000000e-04 | gradient-norm 1.2345 | tokens-per-second 123,456 | peak-gpu-memory {peak:.2} GB",
            step % 60,
            step + 1,
            cfg.train_steps,
            if step == 0 { 9.5 } else { 1.234 }
        );
        e.emit(Some(0), &line)?;
        if cfg.max_bytes.is_some_and(|max| e.counts.bytes >= max) {
            break;
        }
    }
    if std::mem::take(&mut e.pending_newline) {
        let nl = e.newline();
        e.counts.bytes += nl.len() as u64;
        e.out.write_all(nl.as_bytes())?;
    }
    if cfg.cut_last_line {
        let r = printing.first().copied().unwrap_or(0);
        let text = format!("[rank={r} pp=0] Step4 i=0: 12.3");
        e.counts.tags += 1;
        e.counts.garbage += 1;
        e.counts.bytes += text.len() as u64;
        e.out.write_all(text.as_bytes())?;
    }
    e.out.flush()?;
    Ok(e.counts)
}

/// The whole log as a string.
pub fn log_string(cfg: &LogConfig) -> (String, LogCounts) {
    let mut buf = Vec::new();
    let counts = write_log(cfg, &mut buf).expect("writing to memory");
    (
        String::from_utf8(buf).expect("generated logs are UTF-8"),
        counts,
    )
}
