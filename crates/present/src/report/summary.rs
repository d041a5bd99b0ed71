//! The report's first screen: per run, a few short lines on how the run went, where and when it
//! peaked and what held the memory at the peak, built from the model and nothing else.
//!
//! Contract: [`build`] gives one [`RunSummary`] per run, in the report's order, each a list of
//! [`Line`]s in [`Topic`] order; a topic the run has nothing to say on is left out (a run
//! without step lines has no `steps` line). Lines are plain sentences of at most about 90
//! characters, so that a renderer can show them one per line under a short topic name; the text
//! renderer wraps a longer one and keeps the whole summary within [`MAX_LINES`] lines.
//!
//! A topic is one function from the run to its line: a new topic is a [`Topic`] variant, its
//! name, and an arm of [`line`]. [`Topic::Capacity`] says whether the tightest rank fits its GPU
//! (with the headroom), [`Topic::Actions`] the first of the ranked changes that would lower the
//! worst rank's peak (the what-if engine's predictions).

use std::fmt::Write;

use crate::escape;
use crate::numbers::{gib, plural};
use memprints_log::schema::{Breakdown, CapacityFrom, FitStatus, OwnerKind, PeakOwner, Run};

/// The most lines the text renderer gives the summary, the title's two included, so that the
/// summary is the report's first screen.
pub const MAX_LINES: usize = 15;
/// Parts of the breakdown named on the `owners` line.
const TOP_OWNERS: usize = 4;

/// The summary of every run.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// One per run, in the report's order.
    pub runs: Vec<RunSummary>,
}

/// The summary of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The run's name ([`Run::name`]).
    pub name: String,
    /// Its lines, in [`Topic`] order.
    pub lines: Vec<Line>,
}

/// One line of a run's summary.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// What it is about.
    pub topic: Topic,
    /// A plain-text sentence without a final full stop.
    pub text: String,
}

/// What a summary line is about, in the order the lines are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    /// How the run went: steps logged, an out-of-memory error, prints that did not parse.
    Status,
    /// The highest pipeline print: how much, on which rank, when; what the device held then.
    Peak,
    /// What held the device memory at that peak, largest first.
    Owners,
    /// Pipeline stages that peak apart.
    Stages,
    /// PithTrain's own step lines: the highest `peak-gpu-memory` and when.
    Steps,
    /// The GPU's capacity and the headroom at the peak (fits, tight, out of memory).
    Capacity,
    /// What to change first, ranked.
    Actions,
}

impl Topic {
    /// Every topic, in the order the lines are shown.
    pub const ALL: [Topic; 7] = [
        Topic::Status,
        Topic::Capacity,
        Topic::Peak,
        Topic::Owners,
        Topic::Actions,
        Topic::Stages,
        Topic::Steps,
    ];

    /// The short name a line is shown under (at most [`Topic::WIDTH`] characters).
    pub fn name(self) -> &'static str {
        match self {
            Topic::Status => "status",
            Topic::Peak => "peak",
            Topic::Owners => "owners",
            Topic::Stages => "stages",
            Topic::Steps => "steps",
            Topic::Capacity => "capacity",
            Topic::Actions => "actions",
        }
    }

    /// The widest [`Topic::name`].
    pub const WIDTH: usize = 8;
}

/// The summary of `runs`.
pub fn build(runs: &[Run]) -> Summary {
    Summary {
        runs: runs
            .iter()
            .map(|run| RunSummary {
                name: run.name.clone(),
                lines: Topic::ALL
                    .iter()
                    .filter_map(|&topic| {
                        Some(Line {
                            topic,
                            text: line(topic, run)?,
                        })
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The line of `topic` for `run`, or `None` when the run has nothing to say on it.
fn line(topic: Topic, run: &Run) -> Option<String> {
    match topic {
        Topic::Status => Some(status(run)),
        Topic::Peak => peak(run),
        Topic::Owners => owners(run),
        Topic::Stages => stages(run),
        Topic::Steps => steps(run),
        // The model knows neither the GPU's capacity nor what to change yet.
        Topic::Capacity => Some(capacity(run)),
        Topic::Actions => actions(run),
    }
}

fn status(run: &Run) -> String {
    let mut text = match (&run.oom, &run.training) {
        (Some(oom), _) => {
            let mut text = "out of memory".to_owned();
            if let Some(bytes) = oom.tried_to_allocate {
                text += &format!(" (tried to allocate {} GiB)", gib(bytes));
            }
            if !oom.ranks.is_empty() {
                let ranks: Vec<String> = oom.ranks.iter().map(u32::to_string).collect();
                text += &format!(" on rank {}", ranks.join(", "));
            }
            text + ": the run was cut off"
        }
        (None, Some(t)) => {
            let mut text = format!(
                "{} logged (step {} to {}",
                plural(t.steps_logged, "step", "steps"),
                t.first_step,
                t.last_step
            );
            if let Some(max) = t.max_steps {
                text += &format!(" of {max}");
            }
            text + "), no out-of-memory error"
        }
        (None, None) => "no step lines logged, no out-of-memory error".to_owned(),
    };
    // A run that died of another exception says so first: its peak is a lower bound.
    if let Some(crash) = run.crash.as_ref().filter(|c| !c.out_of_memory) {
        let exception: String = crash.exception.chars().take(60).collect();
        text = match crash.rank {
            Some(rank) => format!("died on rank {rank} of {exception}"),
            None => format!("died of {exception}"),
        };
        if let Some(step) = crash.stopped_at.last_step {
            text += &format!(" after step {step}");
        }
        text += " (its peak is a lower bound)";
    }
    let s = &run.stats;
    if run.ranks.is_empty() {
        text += "; no memory prints";
    } else {
        text += &format!(
            "; {} from {}",
            plural(s.memory_lines, "memory print", "memory prints"),
            plural(run.ranks.len() as u64, "rank", "ranks")
        );
    }
    if s.unparsed_memory_lines > 0 {
        text += &format!(", {} unparsed", s.unparsed_memory_lines);
    }
    text
}

/// The tightest rank's fit: its status, headroom and capacity; or how to give the capacity.
fn capacity(run: &Run) -> String {
    let tightest = run
        .ranks
        .iter()
        .filter_map(|r| Some((r, r.capacity.as_ref()?, r.headroom_bytes?)))
        .min_by_key(|(r, _, headroom)| (*headroom, r.rank));
    let Some((rank, capacity, headroom)) = tightest else {
        return "not known: pass --gpu-memory GIB (e.g. 139.81 for an H200)".to_string();
    };
    let status = match rank.status {
        Some(FitStatus::Fits) => "fits",
        Some(FitStatus::Tight) => "tight (under 5 % free)",
        Some(FitStatus::OutOfMemory) => "out of memory",
        None => "not known",
    };
    let from = match capacity.from {
        CapacityFrom::OomMessage => "from the OOM message",
        CapacityFrom::Flag => "--gpu-memory",
        CapacityFrom::Prints => "from the prints",
    };
    let whose = if run.ranks.len() > 1 {
        format!("rank {}, the tightest: ", rank.rank)
    } else {
        String::new()
    };
    format!(
        "{whose}{status}; {} GiB free of {} GiB ({from})",
        gib(headroom),
        gib(capacity.bytes)
    )
}

/// The first two of the ranked changes, with what each saves on the worst rank.
fn actions(run: &Run) -> Option<String> {
    let change = run.what_to_change.as_ref()?;
    let top: Vec<String> = change
        .actions
        .iter()
        .take(2)
        .map(|a| {
            format!(
                "{} saves {} GiB ({})",
                a.action,
                gib(a.saves_bytes),
                a.setting
            )
        })
        .collect();
    if top.is_empty() {
        return Some("no change memprints can compute would lower the peak".to_string());
    }
    Some(format!("{} (predicted)", top.join("; ")))
}

fn peak(run: &Run) -> Option<String> {
    let p = run.memory.prints_peak.as_ref()?;
    let rank = run.ranks.iter().find(|r| r.rank == p.rank)?;
    let mut text = format!("{} GiB allocated on rank {}", gib(p.allocated), p.rank);
    if let Some(pp) = p.pp {
        text += &format!(" (pp={pp})");
    }
    text += &format!(" at {}", p.label);
    let pass = rank
        .peak
        .as_ref()
        .and_then(|peak| rank.pipeline.get(peak.index))
        .map(|e| e.pass);
    match (pass, &run.memory.steps) {
        (Some(pass), _) if rank.passes.len() > 1 => text += &format!(", pass {pass}"),
        (_, Some(steps)) => text += &format!(", step {}", steps.profiled_step),
        _ => {}
    }
    if let Some(b) = &rank.breakdown {
        text += &format!("; the device held {} GiB", gib(b.total));
    }
    Some(text)
}

/// Short names of a breakdown's parts, in [`super::parts::BREAKDOWN_PARTS`]' order.
const OWNER_NAMES: [&str; 6] = [
    "weights",
    "optimizer state",
    "other static",
    "activations",
    "cached",
    "outside allocator",
];

/// An owner's name in the summary: the breakdown's parts by [`OWNER_NAMES`], a buffer by what
/// it is.
fn short_owner(r: &PeakOwner) -> &str {
    match r.kind {
        OwnerKind::Weights => OWNER_NAMES[0],
        OwnerKind::OptimizerState => OWNER_NAMES[1],
        OwnerKind::OtherStatic => OWNER_NAMES[2],
        OwnerKind::Activations => OWNER_NAMES[3],
        OwnerKind::UnusedReserve => OWNER_NAMES[4],
        OwnerKind::OutsideAllocator => OWNER_NAMES[5],
        OwnerKind::Gradients | OwnerKind::Buffer => &r.owner,
    }
}

fn owners(run: &Run) -> Option<String> {
    let p = run.memory.prints_peak.as_ref()?;
    let b: &Breakdown = run
        .ranks
        .iter()
        .find(|r| r.rank == p.rank)?
        .breakdown
        .as_ref()?;
    let rank = run.ranks.iter().find(|r| r.rank == p.rank)?;
    let mut parts: Vec<(&str, i64)> = match &rank.owners {
        // Every owner of the peak, the buffers named by what they are (from the snapshot).
        Some(o) => o
            .owners
            .iter()
            .filter(|r| r.within.is_none())
            .filter_map(|r| Some((short_owner(r), r.bytes?)))
            .collect(),
        None => super::parts::breakdown_parts(b)
            .iter()
            .zip(OWNER_NAMES)
            .filter_map(|((_, bytes), name)| Some((name, (*bytes)?)))
            .collect(),
    };
    parts.retain(|&(_, bytes)| bytes > 0);
    parts.sort_by_key(|&(_, bytes)| std::cmp::Reverse(bytes));
    if parts.is_empty() || b.total <= 0 {
        return None;
    }
    let shown: Vec<String> = parts
        .iter()
        .take(TOP_OWNERS)
        .map(|&(name, bytes)| {
            format!(
                "{name} {} GiB ({:.0}%)",
                gib(bytes),
                bytes as f64 * 100.0 / b.total as f64
            )
        })
        .collect();
    Some(shown.join(", "))
}

fn stages(run: &Run) -> Option<String> {
    let imb = run.summary.imbalance.as_ref()?;
    Some(format!(
        "pp={} peaks at {} GiB, pp={} at {} GiB: {} GiB apart ({:.0}% of the highest)",
        imb.highest_pp,
        gib(imb.highest),
        imb.lowest_pp,
        gib(imb.lowest),
        gib(imb.spread),
        imb.ratio * 100.0
    ))
}

fn steps(run: &Run) -> Option<String> {
    let t = run.training.as_ref()?;
    let (peak, at) = (t.peak_gpu_memory?, t.peak_step?);
    let mut text = format!("peak-gpu-memory up to {} GiB at step {at}", gib(peak));
    if let Some(first) = t.first_step_peak_gpu_memory
        && at != t.first_step
    {
        text += &format!(" (step {}: {} GiB)", t.first_step, gib(first));
    }
    Some(text)
}

/// The summary as markdown: per run a bold name and a list of `topic: line` items.
pub fn markdown(summary: &Summary) -> String {
    let mut out = String::new();
    let several = summary.runs.len() > 1;
    for run in &summary.runs {
        if several {
            let _ = writeln!(out, "**{}**\n", escape::markdown(&run.name));
        }
        for line in &run.lines {
            let _ = writeln!(
                out,
                "- **{}**: {}",
                line.topic.name(),
                escape::markdown(&line.text)
            );
        }
        out.push('\n');
    }
    out
}

/// The summary as HTML: per run a definition list of topics and lines.
pub fn html(summary: &Summary) -> String {
    let mut out = String::new();
    let several = summary.runs.len() > 1;
    for run in &summary.runs {
        if several {
            let _ = writeln!(out, "<p><strong>{}</strong></p>", escape::html(&run.name));
        }
        out.push_str("<dl class=\"summary\">\n");
        for line in &run.lines {
            let _ = writeln!(
                out,
                "<dt>{}</dt><dd>{}</dd>",
                line.topic.name(),
                escape::html(&line.text)
            );
        }
        out.push_str("</dl>\n");
    }
    out
}

/// The summary as terminal text: per run its name (when there are several) and its lines under
/// their topic names, wrapped to `width` with a hanging indent, at most `max_lines` lines in
/// all; runs that do not fit are counted in a last line.
pub fn text(summary: &Summary, width: Option<usize>, max_lines: usize) -> Vec<String> {
    let indent = " ".repeat(Topic::WIDTH + 3);
    let several = summary.runs.len() > 1;
    let mut out: Vec<String> = Vec::new();
    for (n, run) in summary.runs.iter().enumerate() {
        let mut lines = Vec::new();
        if several {
            let title = format!("Run {}: {}", n + 1, run.name);
            match width {
                Some(width) => lines.extend(
                    textwrap::wrap(&title, width.max(20))
                        .into_iter()
                        .map(String::from),
                ),
                None => lines.push(title),
            }
        }
        for line in &run.lines {
            let first = format!("  {:<w$} ", line.topic.name(), w = Topic::WIDTH);
            let text = format!("{first}{}", line.text);
            match width {
                Some(width) => {
                    // Never at a hyphen: `peak-gpu-memory` is a name.
                    let options = textwrap::Options::new(width.max(indent.len() + 20))
                        .subsequent_indent(&indent)
                        .word_splitter(textwrap::WordSplitter::NoHyphenation);
                    lines.extend(textwrap::wrap(&text, options).into_iter().map(String::from));
                }
                None => lines.push(text),
            }
        }
        let later = summary.runs.len() - n - 1;
        // Room for this run, and for the line that counts the runs left out after it.
        let room = max_lines.saturating_sub(out.len() + usize::from(later > 0));
        if lines.len() > room {
            // The first run is always shown, as much of it as fits.
            let left_out = if n == 0 {
                lines.truncate(room);
                out.extend(lines);
                later
            } else {
                later + 1
            };
            if left_out > 0 {
                out.push(format!(
                    "  … and {}: see each run's section below",
                    plural(left_out as u64, "more run", "more runs")
                ));
            }
            return out;
        }
        out.extend(lines);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(runs: usize) -> Summary {
        let run = |n: usize| RunSummary {
            name: format!("node{n}.log"),
            lines: vec![
                Line {
                    topic: Topic::Status,
                    text: "3 steps logged (step 1 to 3 of 3), no out-of-memory error".to_owned(),
                },
                Line {
                    topic: Topic::Peak,
                    text: "11.42 GiB allocated on rank 2 (pp=1) at Step2 i=1 forward_chunk(1), \
                           step 1; the device held 13.32 GiB"
                        .to_owned(),
                },
            ],
        };
        Summary {
            runs: (0..runs).map(run).collect(),
        }
    }

    #[test]
    fn lines_wrap_under_their_topic_with_a_hanging_indent() {
        let lines = text(&summary(1), Some(60), MAX_LINES);
        // Never broken at a hyphen.
        assert_eq!(lines[0], "  status   3 steps logged (step 1 to 3 of 3), no");
        assert_eq!(lines[1], "           out-of-memory error");
        assert!(lines.iter().all(|l| l.chars().count() <= 60), "{lines:#?}");
        assert!(lines[2].starts_with("  peak     11.42 GiB"), "{lines:#?}");
        assert!(lines[3].starts_with("           "), "{lines:#?}");
    }

    #[test]
    fn runs_that_do_not_fit_are_counted_in_a_last_line() {
        let lines = text(&summary(5), Some(200), 8);
        // Two runs of three lines each, then the count of the three left out.
        assert_eq!(lines.len(), 7, "{lines:#?}");
        assert_eq!(lines[0], "Run 1: node0.log");
        assert_eq!(
            lines[6],
            "  … and 3 more runs: see each run's section below"
        );
    }

    #[test]
    fn the_first_run_is_shown_as_far_as_it_fits() {
        let lines = text(&summary(1), Some(200), 1);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].starts_with("  status "));
    }
}
