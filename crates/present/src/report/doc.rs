//! The report as a document of headings, paragraphs and tables, shared by the text, markdown
//! and HTML renderers so that they all say the same thing.
//!
//! Contract: [`build`] gives one section per run (a level-1 heading named after the run's
//! sources), after a short header about what was read and skipped. Sizes print in GiB with two
//! decimals (MiB with one for saved tensors), signed changes with an explicit sign. A figure
//! nobody measured prints as [`NOT_MEASURED`] and the section says why ("not measured — …");
//! a cell with nothing to show by its nature (the change of a first print, a print that prints
//! no delta) is [`NOT_APPLICABLE`]. Empty sections are left out. Table cells hold plain text;
//! renderers escape them for their format. [`Block::Charts`] marks where the HTML page puts a
//! run's charts; text and markdown skip it. The document opens with the title and a
//! [`Block::Summary`] of every run ([`super::summary`]), before what was read.

use crate::numbers::{gib, mib, plural, signed_gib};
use crate::table::Table;
use memprints_log::schema::{
    Breakdown, CapacityFrom, Crash, FigureFrom, FitStatus, PeakOwners, RankReport, Report, Run,
    SetupPhase,
};

pub use super::block::{Block, NOT_APPLICABLE, NOT_MEASURED, Tone};
pub use super::parts::{BREAKDOWN_PARTS, breakdown_parts};
use super::summary;
use super::{estimate_section, view, whatif};

/// Saved tensors listed by size in a group's `largest` cell.
const LARGEST_SAVED: usize = 3;
/// The column title of `non-pt=` figures.
pub const OUTSIDE: &str = "outside";
/// What [`OUTSIDE`] means, said once per run.
pub const OUTSIDE_MEANS: &str = "“outside” is the prints' non-pt=: device memory in \
     use outside PyTorch's caching allocator (the CUDA context, NCCL, kernels' and libraries' \
     own allocations, and any other process on the GPU).";
/// Growth of [`OUTSIDE`] memory over a step worth a note: more than the prints' rounding.
const NOTABLE_GROWTH: i64 = (1 << 30) / 50;

/// A figure that may be absent, as a cell: an absent one was not measured.
pub fn measured(v: Option<i64>, f: fn(i64) -> String) -> String {
    v.map_or_else(|| NOT_MEASURED.to_owned(), f)
}

/// A figure that may have nothing to show (the change of a first print), as a cell.
fn or_na(v: Option<i64>, f: fn(i64) -> String) -> String {
    v.map_or_else(|| NOT_APPLICABLE.to_owned(), f)
}

/// An optional small number (a stage, a layer), as a cell.
fn num_or_na(v: Option<u32>) -> String {
    v.map_or_else(|| NOT_APPLICABLE.to_owned(), |v| v.to_string())
}

/// A shape as Python prints a tuple: `(4, 2)`, `(7,)`; an unknown one is [`NOT_APPLICABLE`].
fn shape(s: &Option<std::sync::Arc<[u64]>>) -> String {
    match s {
        Some(dims) if dims.len() == 1 => format!("({},)", dims[0]),
        Some(dims) => {
            let parts: Vec<String> = dims.iter().map(u64::to_string).collect();
            format!("({})", parts.join(", "))
        }
        None => NOT_APPLICABLE.to_owned(),
    }
}

/// Builds the document for `report`.
pub fn build(report: &Report) -> Vec<Block> {
    let mut out = vec![Block::Heading {
        level: 1,
        text: "Memory report".to_owned(),
    }];
    out.push(Block::Summary(summary::build(&report.runs)));
    let s = &report.stats;
    let names: Vec<&str> = report.runs.iter().map(|r| r.name.as_str()).collect();
    out.push(Block::Text(format!(
        "Read {} from {}: {}, {} unparsed; {}{}",
        plural(s.lines_read, "line", "lines"),
        plural(report.inputs.len() as u64, "input", "inputs"),
        plural(s.memory_lines, "memory print", "memory prints"),
        s.unparsed_memory_lines,
        plural(report.runs.len() as u64, "run", "runs"),
        if names.len() > 1 {
            format!(": {}.", names.join("; "))
        } else {
            ".".to_owned()
        }
    )));
    if s.long_lines > 0 {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!(
                "{} longer than 64 KiB: only their first 64 KiB were read ({} bytes skipped).",
                plural(s.long_lines, "line was", "lines were"),
                s.cut_bytes
            ),
        });
    }
    if s.detail_prints_not_read > 0 {
        out.push(Block::Text(format!(
            "{} (layer probes, saved tensors) of steps not shown in detail, or of ranks left \
             out, were counted, not read.",
            plural(s.detail_prints_not_read, "detail print", "detail prints")
        )));
    }
    for skipped in &report.skipped {
        out.push(Block::Text(format!(
            "Skipped {}: {}.",
            skipped.path, skipped.reason
        )));
    }
    for r in &report.repeated {
        let what = if r.prints_too {
            "the step lines and memory prints"
        } else {
            "the step lines"
        };
        let steps = if r.first_step == r.last_step {
            format!("step {}", r.first_step)
        } else {
            format!("steps {} to {}", r.first_step, r.last_step)
        };
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!(
                "{} repeats {what} of {} ({steps}); not counted again.",
                r.path, r.repeats
            ),
        });
    }
    if report.runs.iter().all(|r| r.ranks.is_empty()) {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: "No memory prints found: was the run instrumented, and did it reach the prints?"
                .to_owned(),
        });
    }
    for (n, run) in report.runs.iter().enumerate() {
        run_section(n, run, &mut out);
    }
    out
}

fn run_section(n: usize, run: &Run, out: &mut Vec<Block>) {
    out.push(Block::Heading {
        level: 1,
        text: format!("Run: {}", run.name),
    });
    let s = &run.stats;
    out.push(Block::Text(format!(
        "From {}: {}, {} unparsed.",
        sources_text(&run.sources),
        plural(s.memory_lines, "memory print", "memory prints"),
        s.unparsed_memory_lines
    )));
    if !s.unparsed_examples.is_empty() {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!(
                "Unparsed prints, for example: {}",
                s.unparsed_examples.join(" ⏎ ")
            ),
        });
    }
    if let Some(t) = &run.training {
        let mut text = format!(
            "Training: {} logged",
            plural(t.steps_logged, "step", "steps")
        );
        text += &format!(" (step {} to {}", t.first_step, t.last_step);
        if let Some(max) = t.max_steps {
            text += &format!(" of {max}");
        }
        text.push(')');
        if let Some(secs) = t.first_step_time_s {
            text += &format!("; the first took {secs:.3} s");
        }
        if let (Some(peak), Some(step)) = (t.peak_gpu_memory, t.peak_step) {
            text += &format!("; peak-gpu-memory up to {} GiB (step {step})", gib(peak));
        }
        text.push('.');
        out.push(Block::Text(text));
    }
    if let Some(crash) = &run.crash {
        crash_section(run, crash, out);
    }
    whatif::what_to_change_section(run, out);
    if run.ranks.is_empty() {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: "No memory prints in this run.".to_owned(),
        });
        estimate_section::render(run, out);
        return;
    }
    headroom_section(run, out);
    out.push(Block::Text(OUTSIDE_MEANS.to_owned()));
    out.push(Block::Charts { run: n });
    view::memory_view(run, out);
    estimate_section::render(run, out);
    whatif::what_if_section(run, out);
    across_ranks(run, out);
    let shown = shown_ranks(run);
    if shown.len() < run.ranks.len() {
        out.push(Block::Text(format!(
            "Sections of {} of the run's {} ranks below: the highest rank and the highest of \
             each pipeline stage{}. `--ranks R,…` shows any other; `--format json` has every \
             rank.",
            shown.len(),
            run.ranks.len(),
            if run.oom.as_ref().is_some_and(|o| !o.ranks.is_empty()) {
                ", and the ranks that ran out of memory"
            } else {
                ""
            }
        )));
    }
    for rank in shown {
        rank_section(rank, out);
    }
}

/// How many ranks a run may have for every one to get its section; a bigger run shows those of
/// [`shown_ranks`] (a section is some 170 lines: 1,024 of them would be a book nobody reads).
const RANK_SECTIONS: usize = 16;

/// The ranks whose sections a run shows: all of them up to [`RANK_SECTIONS`], else the highest
/// rank, the highest of each pipeline stage and the ranks that ran out of memory, at most
/// `RANK_SECTIONS`, in rank order.
pub(crate) fn shown_ranks(run: &Run) -> Vec<&RankReport> {
    if run.ranks.len() <= RANK_SECTIONS {
        return run.ranks.iter().collect();
    }
    let sum = &run.summary;
    let mut wanted: Vec<u32> = sum.peak_rank.into_iter().collect();
    if let Some(oom) = &run.oom {
        wanted.extend(&oom.ranks);
    }
    for stage in &sum.stages {
        let highest = sum
            .peaks
            .iter()
            .filter(|p| p.pp == Some(stage.pp))
            .rev()
            .max_by_key(|p| p.allocated);
        wanted.extend(highest.map(|p| p.rank));
    }
    let mut seen = std::collections::BTreeSet::new();
    wanted.retain(|r| seen.insert(*r));
    wanted.truncate(RANK_SECTIONS);
    wanted.sort_unstable();
    run.ranks
        .iter()
        .filter(|r| wanted.binary_search(&r.rank).is_ok())
        .collect()
}

/// A run's sources as its heading's sentence names them: all of a few, the first and the last
/// of many.
fn sources_text(sources: &[String]) -> String {
    match sources {
        [first, .., last] if sources.len() > 8 => {
            format!("{} files ({first} … {last})", sources.len())
        }
        _ => sources.join(", "),
    }
}

/// The block of a run that ended in an exception: what it was (for an OOM, PyTorch's whole
/// message and its figures), its last traceback lines, where the run stopped and that its peaks
/// are lower bounds; then each rank's last memory point.
fn crash_section(run: &Run, crash: &Crash, out: &mut Vec<Block>) {
    out.push(Block::Heading {
        level: 2,
        text: "How the run ended".to_owned(),
    });
    let oom = run.oom.as_ref().filter(|_| crash.out_of_memory);
    let mut text = if oom.is_some() {
        "The run was cut off by a CUDA out-of-memory error".to_owned()
    } else {
        "The run died of an exception".to_owned()
    };
    if let Some(bytes) = oom.and_then(|o| o.tried_to_allocate) {
        text += &format!(" (tried to allocate {} GiB)", gib(bytes));
    }
    let ranks: Vec<u32> = match oom {
        Some(o) if !o.ranks.is_empty() => o.ranks.clone(),
        _ => crash.rank.into_iter().collect(),
    };
    if !ranks.is_empty() {
        let ranks: Vec<String> = ranks.iter().map(u32::to_string).collect();
        text += &format!(" on rank {}", ranks.join(", "));
    }
    let message = oom.map_or(&crash.exception, |o| &o.message);
    text += &format!(": {message}");
    out.push(Block::Note {
        tone: Tone::Error,
        text,
    });
    if let Some(o) = oom {
        let figures = [
            ("tried to allocate", o.tried_to_allocate),
            ("GPU total capacity", o.capacity),
            ("free on the GPU", o.free),
            ("in use by the process", o.process_in_use),
            ("allocated by PyTorch", o.allocated_by_pytorch),
            (
                "reserved by PyTorch but unallocated",
                o.reserved_unallocated,
            ),
        ];
        let mut table = Table::new(&[("PyTorch's figures at the failure", false), ("GiB", true)]);
        for (what, v) in figures {
            if let Some(v) = v {
                table.rows.push(vec![what.to_owned(), gib(v)]);
            }
        }
        if !table.rows.is_empty() {
            out.push(Block::Table(table));
        }
    }
    if !crash.frames.is_empty() {
        let mut table = Table::new(&[("last traceback lines", false)]);
        for frame in &crash.frames {
            table.rows.push(vec![frame.clone()]);
        }
        out.push(Block::Table(table));
    }
    let stop = &crash.stopped_at;
    let mut where_ = Vec::new();
    if let Some(step) = stop.last_step {
        where_.push(format!("after step {step} (its step line is the last)"));
    }
    if let (Some(rank), Some(print)) = (stop.rank, &stop.last_print) {
        where_.push(format!("rank {rank}'s last memory print was “{print}”"));
    }
    let where_ = if where_.is_empty() {
        "before any step line or memory print".to_owned()
    } else {
        where_.join("; ")
    };
    out.push(Block::Text(format!(
        "Where it stopped: {where_}. Every peak of this run is a lower bound: the run did not finish."
    )));
    let mut table = Table::new(&[
        ("rank", true),
        ("pp", true),
        ("last memory point", false),
        ("allocated", true),
    ]);
    for r in &run.ranks {
        if let Some(last) = &r.last_point {
            table.rows.push(vec![
                r.rank.to_string(),
                num_or_na(r.pp),
                last.label.clone(),
                gib(last.allocated),
            ]);
        }
    }
    if !table.rows.is_empty() {
        out.push(Block::Heading {
            level: 3,
            text: "Last memory point per rank".to_owned(),
        });
        out.push(Block::Table(table));
    }
}

/// Each rank's peak against its GPU's capacity ([`memprints_log::headroom`]).
fn headroom_section(run: &Run, out: &mut Vec<Block>) {
    out.push(Block::Heading {
        level: 2,
        text: "Capacity and headroom".to_owned(),
    });
    if run
        .ranks
        .iter()
        .all(|r| r.capacity.is_none() && r.status.is_none())
    {
        out.push(Block::Text(
            "GPU capacity not known (pass --gpu-memory GIB): no headroom and no status.".to_owned(),
        ));
        return;
    }
    let mut table = Table::new(&[
        ("rank", true),
        ("peak device total", true),
        ("capacity", true),
        ("headroom", true),
        ("status", false),
    ]);
    for r in &run.ranks {
        let capacity = r.capacity.map_or_else(
            || "not known (pass --gpu-memory GIB)".to_owned(),
            |c| {
                let from = match c.from {
                    CapacityFrom::OomMessage => "OOM message",
                    CapacityFrom::Flag => "--gpu-memory",
                    CapacityFrom::Prints => "prints",
                };
                format!("{} ({from})", gib(c.bytes))
            },
        );
        let status = r.status.map_or(NOT_APPLICABLE, fit_word);
        table.rows.push(vec![
            r.rank.to_string(),
            measured(r.breakdown.as_ref().map(|b| b.total), gib),
            capacity,
            or_na(r.headroom_bytes, signed_gib),
            status.to_owned(),
        ]);
    }
    out.push(Block::Table(table));
    let crashed = if run.crash.is_some() {
        " The run crashed: the peaks are lower bounds."
    } else {
        ""
    };
    out.push(Block::Text(format!(
        "The peak is the device total (allocated, cached and outside the allocator) at the \
         rank's highest pipeline print; tight means under 5 % of the capacity left.{crashed}"
    )));
}

fn across_ranks(run: &Run, out: &mut Vec<Block>) {
    let sum = &run.summary;
    if sum.peaks.is_empty() {
        return;
    }
    out.push(Block::Heading {
        level: 2,
        text: "Across ranks".to_owned(),
    });
    let mut table = Table::new(&[
        ("rank", true),
        ("pp", true),
        ("peak at", false),
        ("allocated", true),
        ("cached", true),
        (OUTSIDE, true),
        ("device", true),
        ("", false),
    ]);
    for p in &sum.peaks {
        table.rows.push(vec![
            p.rank.to_string(),
            num_or_na(p.pp),
            p.label.clone(),
            gib(p.allocated),
            gib(p.cached),
            gib(p.non_pytorch),
            gib(p.allocated + p.cached + p.non_pytorch),
            if sum.peak_rank == Some(p.rank) {
                "highest".to_owned()
            } else {
                String::new()
            },
        ]);
    }
    out.push(Block::Table(table));
    if sum.stages.len() > 1 {
        let mut stages = Table::new(&[
            ("pp", true),
            ("ranks", false),
            ("highest peak", true),
            ("lowest peak", true),
        ]);
        for s in &sum.stages {
            let ranks: Vec<String> = s.ranks.iter().map(u32::to_string).collect();
            stages.rows.push(vec![
                s.pp.to_string(),
                ranks.join(", "),
                gib(s.max_allocated),
                gib(s.min_allocated),
            ]);
        }
        out.push(Block::Heading {
            level: 3,
            text: "Pipeline stages".to_owned(),
        });
        out.push(Block::Table(stages));
    }
    if let Some(imb) = &sum.imbalance {
        out.push(Block::Text(format!(
            "Imbalance between pipeline stages: pp={} peaks at {} GiB, pp={} at {} GiB, {} GiB apart ({:.1}% of the highest).",
            imb.highest_pp,
            gib(imb.highest),
            imb.lowest_pp,
            gib(imb.lowest),
            gib(imb.spread),
            imb.ratio * 100.0
        )));
    }
}

fn rank_section(r: &RankReport, out: &mut Vec<Block>) {
    let title = match r.pp {
        Some(pp) => format!("Rank {} (pp={pp})", r.rank),
        None => format!("Rank {}", r.rank),
    };
    out.push(Block::Heading {
        level: 2,
        text: title,
    });
    if r.unparsed_memory_lines > 0 {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!(
                "{} of this rank's prints matched no known format.",
                r.unparsed_memory_lines
            ),
        });
    }
    if let Some(summary) = peak_summary(r) {
        out.push(Block::Text(summary));
    }
    passes_section(r, out);
    if !r.setup.is_empty() {
        let mut t = Table::new(&[
            ("phase", false),
            ("point", false),
            ("allocated", true),
            ("cached", true),
            (OUTSIDE, true),
            ("change", true),
        ])
        .wide_only(&["cached"]);
        for e in &r.setup {
            let phase = match e.phase {
                SetupPhase::InitProcessGroup => "init_process_group",
                SetupPhase::InitDeviceMesh => "init_device_mesh",
                SetupPhase::SetupModel => "setup_model",
            };
            t.rows.push(vec![
                phase.to_owned(),
                e.label.clone(),
                measured(e.allocated, gib),
                measured(e.cached, gib),
                measured(e.non_pytorch, gib),
                or_na(e.change, signed_gib),
            ]);
        }
        out.push(Block::Heading {
            level: 3,
            text: "Setup".to_owned(),
        });
        out.push(Block::Table(t));
        if r.setup.iter().any(|e| e.allocated.is_none()) {
            out.push(Block::Text(
                "Allocated and cached not measured — init_process_group and init_device_mesh \
                 print only memory outside the allocator (from torch.cuda.mem_get_info); their \
                 change is the cost they print (NCCL's world, the device mesh)."
                    .to_owned(),
            ));
        }
    }
    if let Some(c) = &r.checkpoint {
        out.push(Block::Heading {
            level: 3,
            text: "Checkpoint load".to_owned(),
        });
        out.push(Block::Text(format!(
            "Optimizer state {} GiB over {} param entries; after the load: allocated {} GiB, cached {} GiB, outside the allocator {} GiB.",
            gib(c.optimizer_state),
            c.param_entries,
            gib(c.allocated),
            gib(c.cached),
            gib(c.non_pytorch)
        )));
    }
    if !r.pipeline.is_empty() {
        let mut t = Table::new(&[
            ("#", true),
            ("point", false),
            ("allocated", true),
            ("change", true),
            ("printed delta", true),
            ("cached", true),
            (OUTSIDE, true),
            ("", false),
        ])
        .wide_only(&["#", "printed delta"]);
        let peak = r.peak.as_ref().map(|p| p.index);
        let several = r.passes.len() > 1;
        for (n, e) in r.pipeline.iter().enumerate() {
            t.rows.push(vec![
                n.to_string(),
                if several {
                    format!("pass {}: {}", e.pass, e.label())
                } else {
                    e.label()
                },
                gib(e.allocated),
                or_na(e.change, signed_gib),
                or_na(e.delta, signed_gib),
                gib(e.cached),
                gib(e.non_pytorch),
                if peak == Some(n) {
                    "peak".to_owned()
                } else {
                    String::new()
                },
            ]);
        }
        out.push(Block::Heading {
            level: 3,
            text: "Pipeline".to_owned(),
        });
        out.push(Block::Table(t));
    }
    if let Some(g) = r
        .non_pytorch_growth
        .as_ref()
        .filter(|g| g.growth >= NOTABLE_GROWTH)
    {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!(
                "Memory outside the allocator grew by {} GiB during the step, from {} GiB at {} \
                 to {} GiB at {}: this is not the CUDA context or NCCL's setup, which came \
                 before the pipeline, but device memory taken outside PyTorch's allocator while \
                 the step ran (kernels' own workspaces, communicators and buffers created on \
                 first use, another process on the GPU).",
                gib(g.growth),
                gib(g.from),
                g.from_label,
                gib(g.to),
                g.to_label
            ),
        });
    }
    if let (Some(b), Some(p)) = (&r.breakdown, &r.peak) {
        out.push(Block::Heading {
            level: 3,
            text: format!("Where the memory went at the peak ({})", p.label),
        });
        match &r.owners {
            Some(o) => owners_blocks(o, out),
            None => out.push(Block::Table(breakdown_table(b))),
        }
        for why in breakdown_gaps(b) {
            out.push(Block::Text(why));
        }
    }
    let several = r.passes.len() > 1;
    let during = |pos: usize| match r.pipeline.get(pos) {
        Some(e) if several => format!("pass {}: {}", e.pass, e.label()),
        Some(e) => e.label(),
        None => "end of log".to_owned(),
    };
    if !r.layers.is_empty() {
        let mut t = Table::new(&[
            ("during", false),
            ("probe", false),
            ("shape", false),
            ("allocated", true),
            ("change", true),
        ])
        .wide_only(&["shape"]);
        for l in &r.layers {
            let indent = "  ".repeat(usize::from(l.depth));
            let label = match &l.tensor {
                Some(name) => format!(
                    "{indent}{} ({name})",
                    l.label
                        .split(&format!("{name}=("))
                        .next()
                        .unwrap_or("")
                        .trim_end()
                ),
                None => format!("{indent}{}", l.label),
            };
            t.rows.push(vec![
                during(l.pipeline_position),
                label,
                shape(&l.shape),
                gib(l.allocated),
                or_na(l.change, signed_gib),
            ]);
        }
        out.push(Block::Heading {
            level: 3,
            text: "Detail layers".to_owned(),
        });
        out.push(Block::Table(t));
    }
    if !r.experts.is_empty() {
        let mut t = Table::new(&[
            ("during", false),
            ("step", false),
            ("tensor", false),
            ("shape", false),
            ("allocated", true),
            ("change", true),
        ]);
        for e in &r.experts {
            t.rows.push(vec![
                during(e.pipeline_position),
                e.step.to_string(),
                e.tensor.as_deref().unwrap_or(NOT_APPLICABLE).to_owned(),
                shape(&e.shape),
                gib(e.allocated),
                or_na(e.change, signed_gib),
            ]);
        }
        out.push(Block::Heading {
            level: 3,
            text: "Experts internals".to_owned(),
        });
        out.push(Block::Table(t));
    }
    if !r.saved_tensors.is_empty() {
        let mut t = Table::new(&[
            ("layer", true),
            ("stage", false),
            ("activations MiB", true),
            ("weights MiB", true),
            ("tensors", true),
            ("largest", false),
        ])
        .wide_only(&["largest"]);
        for g in &r.saved_tensors {
            let mut largest: Vec<_> = g.tensors.iter().collect();
            largest.sort_by_key(|t| std::cmp::Reverse(t.size));
            let largest: Vec<String> = largest
                .iter()
                .take(LARGEST_SAVED)
                .map(|t| {
                    let kind = if t.weight { "weight" } else { "activ" };
                    let about = if t.bytes_exact { "" } else { "≈" };
                    format!(
                        "{} {} {about}{} MiB {kind}",
                        shape(&t.shape),
                        t.dtype,
                        mib(t.size)
                    )
                })
                .collect();
            let mut stage = if g.complete {
                g.stage.clone()
            } else {
                format!("{} (cut off)", g.stage)
            };
            if several {
                stage = format!("pass {}: {stage}", g.pass);
            }
            let about = if g.bytes_exact { "" } else { "≈" };
            t.rows.push(vec![
                num_or_na(g.layer),
                stage,
                format!("{about}{}", mib(g.activations)),
                format!("{about}{}", mib(g.weights)),
                g.count.to_string(),
                largest.join("; "),
            ]);
        }
        out.push(Block::Heading {
            level: 3,
            text: "Saved tensors".to_owned(),
        });
        out.push(Block::Table(t));
        let approximate = r.saved_tensors.iter().any(|g| !g.bytes_exact);
        out.push(Block::Text(if approximate {
            "Sizes are exact bytes (printed, or shape × dtype as the print computes them) except \
             those marked ≈: read back from the print's MB, rounded to 0.1."
                .to_owned()
        } else {
            "Sizes are exact bytes: printed, or shape × dtype as the print computes them."
                .to_owned()
        }));
    }
    for s in &r.snapshots {
        let when = if s.after_oom {
            "written after the OOM"
        } else {
            "after step 0"
        };
        out.push(Block::Text(format!("Memory snapshot ({when}): {}", s.path)));
    }
}

/// One sentence: the peak and what it is made of.
/// Passes listed one per row; a rank with more says only how they went.
const PASS_ROWS: usize = 16;

/// A rank that printed several pipeline passes (memory profiling left on past the first step):
/// how their peaks went, which are shown in detail, and a row per pass when they are few.
fn passes_section(r: &RankReport, out: &mut Vec<Block>) {
    if r.passes.len() < 2 {
        return;
    }
    let peaks: Vec<(u32, i64)> = r
        .passes
        .iter()
        .filter_map(|p| Some((p.pass, p.peak_allocated?)))
        .collect();
    let lowest = peaks.iter().map(|&(_, a)| a).min();
    // The first of equal maxima.
    let highest = peaks.iter().rev().max_by_key(|&&(_, a)| a);
    let detail: Vec<String> = r
        .passes
        .iter()
        .filter(|p| p.detail)
        .map(|p| p.pass.to_string())
        .collect();
    let mut text = format!("{} pipeline passes (one per profiled step)", r.passes.len());
    if let (Some(lo), Some(&(at, hi))) = (lowest, highest) {
        text += &format!(
            ": peaks from {} to {} GiB, the highest in pass {at}",
            gib(lo),
            gib(hi)
        );
    }
    text += &format!(
        ". Shown in detail: {} {} (the first, the highest and the last); the other passes' \
         probes and saved tensors were counted, not read.",
        if detail.len() == 1 { "pass" } else { "passes" },
        detail.join(", ")
    );
    out.push(Block::Heading {
        level: 3,
        text: "Passes".to_owned(),
    });
    out.push(Block::Text(text));
    if r.passes.len() > PASS_ROWS {
        return;
    }
    let mut t = Table::new(&[
        ("pass", true),
        ("Before pipeline", true),
        ("peak", true),
        ("at", false),
        ("cached", true),
        (OUTSIDE, true),
        ("end", true),
        ("", false),
    ]);
    for p in &r.passes {
        t.rows.push(vec![
            p.pass.to_string(),
            // A pass that printed no such figure: nobody measured it.
            measured(p.before_pipeline, gib),
            measured(p.peak_allocated, gib),
            p.peak_label
                .clone()
                .unwrap_or_else(|| NOT_MEASURED.to_owned()),
            measured(p.peak_cached, gib),
            measured(p.peak_non_pytorch, gib),
            measured(p.end_allocated, gib),
            if p.detail { "detail" } else { "" }.to_owned(),
        ]);
    }
    out.push(Block::Table(t));
}

fn peak_summary(r: &RankReport) -> Option<String> {
    let (p, b) = (r.peak.as_ref()?, r.breakdown.as_ref()?);
    let held_before = b.weights.unwrap_or(0) + b.optimizer_state.unwrap_or(0) + b.other_static;
    Some(format!(
        "Peak {} GiB allocated at {}: {} GiB held before the pipeline started, {} GiB of activations in flight; the device held {} GiB with {} GiB cached and {} GiB outside the allocator.",
        gib(p.allocated),
        p.label,
        gib(held_before),
        gib(b.activations),
        gib(b.total),
        gib(b.cached),
        gib(b.non_pytorch)
    ))
}

/// Why the parts of a breakdown that were not measured were not, one sentence each.
fn breakdown_gaps(b: &Breakdown) -> Vec<String> {
    let mut out = Vec::new();
    if b.weights.is_none() {
        out.push(
            "Weights after setup: not measured — no setup_model print gave allocated memory; \
             they are part of “other static”."
                .to_owned(),
        );
    }
    if b.optimizer_state.is_none() {
        out.push(
            "Optimizer state: not measured — group 6 prints only after a checkpoint load (a run \
             from scratch creates its optimizer state in its first optimizer step, after the \
             pipeline); anything held is part of “other static”."
                .to_owned(),
        );
    }
    out
}

/// The owners of every byte at a rank's peak: a table of the parts that add up to the device
/// total (the saved tensors indented under the activations they are part of), where each
/// figure came from, then the line that asked for each buffer.
fn owners_blocks(o: &PeakOwners, out: &mut Vec<Block>) {
    let mut t = Table::new(&[
        ("owner", false),
        ("GiB", true),
        ("share", true),
        ("from", false),
        ("how", false),
    ])
    .wide_only(&["how"]);
    for r in &o.owners {
        let name = match r.within {
            Some(_) => format!("  of which {}", r.owner),
            None => r.owner.to_string(),
        };
        let share = match r.bytes {
            Some(bytes) if o.total > 0 => format!("{:.1}%", bytes as f64 * 100.0 / o.total as f64),
            Some(_) => "0.0%".to_owned(),
            None => NOT_APPLICABLE.to_owned(),
        };
        t.rows.push(vec![
            name,
            measured(r.bytes, gib),
            share,
            figure_from(r.from).to_owned(),
            r.how.to_string(),
        ]);
    }
    t.rows.push(vec![
        "total".to_owned(),
        gib(o.total),
        "100.0%".to_owned(),
        figure_from(FigureFrom::Arithmetic).to_owned(),
        "the device at the peak: the rows not indented add up to it".to_owned(),
    ]);
    out.push(Block::Table(t));
    let asked: Vec<String> = o
        .owners
        .iter()
        .filter_map(|r| Some(format!("{} by {}", r.owner, r.asked_by.as_ref()?)))
        .collect();
    let mut text = match &o.snapshot {
        Some(path) => format!(
            "Buffers and gradients named from the memory snapshot {path} (at its own peak); \
             the other figures from the prints, or arithmetic on them."
        ),
        None => "No memory snapshot of this rank: buffers (cuBLAS workspace, autotuning, FSDP's \
                 collectives) are not told apart from the activations, and gradients not from \
                 them either."
            .to_owned(),
    };
    if !asked.is_empty() {
        text += &format!(" Asked for by: {}.", asked.join("; "));
    }
    out.push(Block::Text(text));
}

/// How a [`FigureFrom`] reads in a table.
fn figure_from(from: FigureFrom) -> &'static str {
    match from {
        FigureFrom::Prints => "prints",
        FigureFrom::Snapshot => "snapshot",
        FigureFrom::Arithmetic => "arithmetic",
    }
}

fn breakdown_table(b: &Breakdown) -> Table {
    let mut t = Table::new(&[("part", false), ("GiB", true), ("share", true)]);
    for (name, bytes) in breakdown_parts(b) {
        let share = match bytes {
            Some(bytes) if b.total > 0 => format!("{:.1}%", bytes as f64 * 100.0 / b.total as f64),
            Some(_) => "0.0%".to_owned(),
            None => NOT_APPLICABLE.to_owned(),
        };
        t.rows
            .push(vec![name.to_owned(), measured(bytes, gib), share]);
    }
    t.rows
        .push(vec!["total".to_owned(), gib(b.total), "100.0%".to_owned()]);
    t
}

/// A [`FitStatus`] in the report's words, the same in the ranks' table and the what-if.
pub(crate) fn fit_word(status: FitStatus) -> &'static str {
    match status {
        FitStatus::Fits => "fits",
        FitStatus::Tight => "tight (headroom under 5 %)",
        FitStatus::OutOfMemory => "out of memory",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of 40 ranks over 4 stages, rank 21 the highest: its text shows the sections of
    /// the highest of each stage (21, and 0, 1, 3: the first of equal peaks) and says so.
    #[test]
    fn a_big_run_shows_the_sections_of_its_highest_ranks() {
        let mut b = memprints_log::ReportBuilder::new(None);
        for rank in 0..40u32 {
            let alloc = if rank == 21 { "9.00" } else { "1.00" };
            b.line(
                format!("[rank={rank} pp={}] Before pipeline: {alloc} GiB | alloc={alloc} cached=0.00 non-pt=1.00", rank % 4)
                    .as_bytes(),
            );
        }
        let report = b.finish(vec!["a.log".into()]);
        let text = crate::report::render_text(&report, false, None);
        let sections: Vec<&str> = text.lines().filter(|l| l.starts_with("Rank ")).collect();
        assert_eq!(
            sections,
            [
                "Rank 0 (pp=0)",
                "Rank 2 (pp=2)",
                "Rank 3 (pp=3)",
                "Rank 21 (pp=1)"
            ]
        );
        assert!(
            text.contains("Sections of 4 of the run's 40 ranks below"),
            "{text}"
        );
    }

    #[test]
    fn many_sources_are_named_by_their_count_first_and_last() {
        let few: Vec<String> = (0..8).map(|i| format!("r{i}.log")).collect();
        assert_eq!(sources_text(&few), few.join(", "));
        let many: Vec<String> = (0..1024).map(|i| format!("r{i}.log")).collect();
        assert_eq!(sources_text(&many), "1024 files (r0.log … r1023.log)");
    }

    #[test]
    fn shapes_print_like_python_tuples() {
        assert_eq!(shape(&Some(vec![4, 2].into())), "(4, 2)");
        assert_eq!(shape(&Some(vec![7].into())), "(7,)");
    }
}
