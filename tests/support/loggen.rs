//! Generator of realistic logs of an instrumented PithTrain run, for tests and the benchmark.
//!
//! It simulates each rank's stdout (setup, distributed init, checkpoint load, DualPipeV steps
//! 1-8 with the step counts of `DualPipeV.step`, layer probes, saved tensors, experts internals,
//! snapshot, rank-0 step lines), then interleaves the ranks the way one `tee`d file per node does,
//! with optional launcher prefixes, ANSI colours, CRLF, timestamps, prints glued together, garbage,
//! duplicates, a cut-off last line and an OOM. Deterministic for a given seed. It counts what it
//! wrote (`[rank=` tags, pipeline prints per rank) so tests can check the report against it.
//! Every memory print is written by `memprints_format::fill`, so it is a line the templates
//! print; only the garbage and the cut-off line are written by hand.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{self, Write};

use memprints_format::{Value, fill, shape};

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
    /// The GPU's total memory in bytes, printed by `init_process_group` as the prints do today
    /// (`gpu_total=`); `None` writes that print as earlier prints did, without it.
    pub gpu_total: Option<i64>,
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
            gpu_total: None,
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

const GIB: f64 = (1u64 << 30) as f64;

/// Simulated memory of one rank, in GiB.
struct Mem {
    alloc: f64,
    cached: f64,
    non_pt: f64,
}

impl Mem {
    /// The `alloc=… cached=… non-pt=…` figures, as values.
    fn detail(&self) -> [Value<'static>; 3] {
        [self.alloc.into(), self.cached.into(), self.non_pt.into()]
    }
}

/// `[rank=R] setup_model | LABEL: DETAIL`.
fn setup_line(name: &str, rank: u32, mem: &Mem) -> String {
    let [a, c, n] = mem.detail();
    fill(shape(name), &[rank.into(), a, c, n])
}

fn setup_lines(cfg: &LogConfig, rank: u32, out: &mut Vec<String>, mem: &mut Mem) {
    let r = rank;
    let group = [r.into(), 0.52.into(), 1.10.into(), 0.58.into()];
    out.push(match cfg.gpu_total {
        Some(total) => fill(
            shape("process_group"),
            &[&group[..], &[(total as f64 / GIB).into(), total.into()]].concat(),
        ),
        None => fill(shape("process_group_without_total"), &group),
    });
    out.push(fill(
        shape("device_mesh"),
        &[r.into(), 1.40.into(), 0.30.into()],
    ));
    mem.non_pt = 1.40;
    out.push(setup_line("setup_before_model_creation", r, mem));
    let pp = rank / (cfg.world / cfg.pp);
    let chunk = 2.0 + 0.25 * f64::from(pp);
    for (k, name) in [
        "setup_after_module0_creation",
        "setup_after_module1_creation",
    ]
    .iter()
    .enumerate()
    {
        mem.alloc += chunk * (1.0 + k as f64 * 0.1);
        out.push(setup_line(name, r, mem));
    }
    mem.cached = 0.12;
    out.push(setup_line("setup_after_init_weights", r, mem));
    mem.alloc /= 2.0;
    mem.cached = 0.5;
    out.push(setup_line("setup_after_apply_fsdp", r, mem));
    if cfg.checkpoint {
        let optim = mem.alloc * 2.0;
        mem.alloc += optim;
        let [a, c, n] = mem.detail();
        out.push(fill(
            shape("checkpoint_load"),
            &[r.into(), optim.into(), 412.into(), a, c, n],
        ));
    }
}

fn layer_lines(rank: u32, layer: u32, out: &mut Vec<String>, mem: &mut Mem, first_stage: bool) {
    let r = rank;
    // An `_lmem` probe: the shape's fields between the rank and `alloc`, and what it adds.
    let probe =
        |out: &mut Vec<String>, name: &str, between: &[Value<'_>], add: f64, mem: &mut Mem| {
            mem.alloc += add;
            let mut values = vec![r.into()];
            values.extend_from_slice(between);
            values.push(mem.alloc.into());
            out.push(fill(shape(name), &values));
        };
    let saved_tensor = |out: &mut Vec<String>, tag: &str, tensor: &str, mb: f64| {
        out.push(fill(
            shape("saved_tensor_mb"),
            &[
                r.into(),
                tag.into(),
                tensor.into(),
                "torch.bfloat16".into(),
                mb.into(),
            ],
        ));
    };
    let saved_summary = |out: &mut Vec<String>, activ: f64, weight: f64, count: u32| {
        out.push(fill(
            shape("saved_summary_mb"),
            &[r.into(), activ.into(), weight.into(), count.into()],
        ));
    };
    let l = Value::from(layer);
    if first_stage {
        probe(out, "after_prolog", &[], 0.03, mem);
    }
    probe(out, "stage1_before_compute", &[l], 0.0, mem);
    probe(out, "stage1_after_compute", &[l], 0.09, mem);
    probe(
        out,
        "stage1_after_dispatch",
        &[l, "(8192, 2048)".into()],
        0.03,
        mem,
    );
    out.push(fill(shape("saved_header"), &[r.into(), l, "stage1".into()]));
    saved_tensor(out, "activ", "(4096, 2048)", 16.0);
    saved_tensor(out, "weight", "(2048,)", 0.0);
    saved_tensor(out, "activ", "(4096, 32, 128)", 32.0);
    saved_summary(out, 48.0, 0.0, 3);
    probe(out, "layer_after_stage1", &[l], 0.0, mem);
    probe(out, "layer_after_stage2", &[l], 0.03, mem);
    probe(
        out,
        "stage3_before_gather",
        &[l, "(8192, 2048)".into()],
        0.0,
        mem,
    );
    probe(
        out,
        "stage3_after_gather",
        &[l, "(16384, 2048)".into()],
        0.06,
        mem,
    );
    probe(
        out,
        "stage3_after_scatter",
        &[l, "output_tokens".into(), "(16384, 2048)".into()],
        0.06,
        mem,
    );
    probe(out, "experts_input", &["x=(16384, 2048)".into()], 0.0, mem);
    probe(
        out,
        "experts_step",
        &["gate_proj  ".into(), "g=(16384, 768)".into()],
        0.02,
        mem,
    );
    probe(
        out,
        "experts_step",
        &["up_proj    ".into(), "u=(16384, 768)".into()],
        0.02,
        mem,
    );
    probe(
        out,
        "experts_inner",
        &["silu_mul   ".into(), "(16384, 768)".into()],
        0.02,
        mem,
    );
    probe(
        out,
        "experts_outer",
        &["down_proj  ".into(), "(16384, 2048)".into()],
        0.06,
        mem,
    );
    probe(
        out,
        "stage3_after_experts",
        &[l, "outs".into(), "(16384, 2048)".into()],
        0.0,
        mem,
    );
    probe(
        out,
        "stage3_after_unshuffle",
        &[l, "(16384, 2048)".into()],
        -0.06,
        mem,
    );
    out.push(fill(shape("saved_header"), &[r.into(), l, "stage3".into()]));
    saved_tensor(out, "activ", "(16384, 2048)", 64.0);
    saved_tensor(out, "weight", "(128, 768, 2048)", 384.0);
    saved_summary(out, 64.0, 384.0, 2);
    probe(out, "layer_after_stage3", &[l], -0.1, mem);
    probe(out, "layer_after_stage4", &[l], 0.03, mem);
    probe(out, "layer_after_stage5", &[l], -0.05, mem);
    if !first_stage {
        probe(out, "before_epilog", &[], 0.0, mem);
        probe(out, "after_norm", &[], 0.02, mem);
        probe(out, "after_lm_head", &[], 0.5, mem);
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
    let act = 0.8 + 0.1 * f64::from(pp);
    let m0 = mem.alloc;
    // A DualPipeV print: its loop index or step count, the figure, and its delta when it has one.
    let print =
        |out: &mut Vec<String>, name: &str, at: Option<u32>, mem: &Mem, delta: Option<f64>| {
            let mut values: Vec<Value<'_>> = vec![rank.into(), pp.into()];
            values.extend(at.map(Value::from));
            values.push(mem.alloc.into());
            values.extend(delta.map(Value::from));
            values.extend(mem.detail());
            out.push(fill(shape(name), &values));
        };
    let plus = |mem: &Mem| Some(mem.alloc - m0);
    print(out, "before_pipeline", None, mem, None);
    let (s1, s2, s3) = ((cfg.pp - pp - 1) * 2, pp + 1, cfg.pp - pp - 1);
    let s4 = (cfg.num_chunks + pp + 1).saturating_sub(cfg.pp * 2);
    let layer = 5 + pp;
    for i in 0..s1 {
        if i == 1 && (first || cfg.detail_every_step) {
            layer_lines(rank, layer, out, mem, pp == 0);
        }
        mem.alloc += act;
        print(out, "step1_f0", Some(i), mem, plus(mem));
    }
    print(out, "after_step1", Some(s1), mem, plus(mem));
    for i in 0..s2 {
        mem.alloc += act;
        print(out, "step2_forward_chunk0", Some(i), mem, plus(mem));
        if i == 0 && (first || cfg.detail_every_step) {
            layer_lines(rank, 40 - layer, out, mem, false);
        }
        mem.alloc += act;
        print(out, "step2_forward_chunk1", Some(i), mem, plus(mem));
    }
    print(out, "after_step2", Some(s2), mem, plus(mem));
    mem.cached = 1.0 + 0.2 * f64::from(pp);
    for i in 0..s3 {
        let ms3 = mem.alloc;
        print(out, "step3_before_b1", Some(i), mem, None);
        if cfg.oom_rank == Some(rank) && first {
            return false;
        }
        for (name, change) in [
            ("step3_after_b1", -0.5 * act),
            ("step3_after_w1", -0.5 * act),
            ("step3_after_f1", act),
        ] {
            mem.alloc += change;
            print(out, name, Some(i), mem, Some(mem.alloc - ms3));
        }
    }
    print(out, "after_step3", Some(s3), mem, plus(mem));
    for i in 0..s4 {
        print(out, "step4", Some(i), mem, None);
    }
    print(out, "after_step4", Some(s4), mem, None);
    mem.alloc = m0;
    print(out, "after_step8", None, mem, None);
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
                    lines.push(fill(shape("snapshot_oom"), &[r.into(), "/tmp".into()]));
                } else if step == 0 && r == 0 {
                    lines.push(fill(
                        shape("snapshot_step"),
                        &[0.into(), "/tmp".into(), 0.into()],
                    ));
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
