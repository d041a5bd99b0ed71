//! The report as one self-contained HTML page: inline CSS, no scripts, no network. The same
//! document the text renderer prints, under a table of contents (every run and its sections),
//! with two SVG charts per run (memory over the pipeline schedule per rank; the breakdown at
//! the peak per rank) where the document marks them.
//!
//! The schedule chart puts the ranks on one x axis of schedule points (`Before pipeline`,
//! `Step1 F0 i=0`, …, `After Step8`): the union of every rank's prints in schedule order, so
//! the same point sits at the same x on every rank and a rank that did not print a point
//! leaves a gap there. Points are keyed by pass, kind and loop index, not by the count an
//! `After StepK (N …)` print carries (it differs between stages); their tooltips say it.
//!
//! Contract: the page is [`crate::html::Layout::Document`]; headings of level 1 to 3 get ids
//! (their text made a slug, unique in the page) and the contents list the level 1 and 2 ones
//! after the page's title; each
//! [`Block::Charts`] becomes its run's charts (left out when no rank has a pipeline or a
//! breakdown). The breakdown chart draws the parts every charted rank measured; a part some
//! rank did not measure is added to "other static" for all of them, as the breakdown itself
//! does for that rank, so no bar shows a figure nobody measured. Chart ids are
//! `pipeline-chart` and `breakdown-chart` for the first run, with `-N` for run N > 1. Every text
//! is escaped.

use std::fmt::Write;

use super::doc::{BREAKDOWN_PARTS, Block, Tone, breakdown_parts};
use crate::escape;
use crate::html::{self, Layout};
use crate::numbers::in_gib;
use crate::numbers::{bytes, signed_bytes};
use crate::svg::{Series, Slot, schedule_chart, stacked_bars};
use memprints_log::Report;
use memprints_log::parse::PipelineKind;
use memprints_log::schema::{PipelineEntry, RankReport, Run};

/// Where "other static" sits in [`BREAKDOWN_PARTS`].
const OTHER_STATIC: usize = 2;

/// Renders the page: `doc`, with each run's charts where it marks them.
pub fn render(report: &Report, doc: &[Block]) -> String {
    let mut body = String::new();
    let mut headings = Headings::default();
    // The contents go after the page's title, the first block when it is a heading.
    let mut title_end = 0;
    for (k, block) in doc.iter().enumerate() {
        match block {
            Block::Charts { run } => {
                if let Some(r) = report.runs.get(*run) {
                    charts(r, *run, &mut body, &mut headings);
                }
            }
            Block::Heading { level, text } => heading(*level, text, &mut body, &mut headings),
            block => block_html(block, &mut body),
        }
        if k == 0 && matches!(block, Block::Heading { level: 1, .. }) {
            title_end = body.len();
            headings.entries.clear();
        }
    }
    body.insert_str(title_end, &headings.contents());
    html::page(Layout::Document, "memprints report", &body)
}

/// The page's headings: the ids given so far and the entries of the contents.
#[derive(Default)]
struct Headings {
    ids: std::collections::HashSet<String>,
    /// `(level, id, text)` of every level 1 and 2 heading.
    entries: Vec<(u8, String, String)>,
}

impl Headings {
    /// A unique id for a heading saying `text`: its slug, then `-2`, `-3`, … on repeats.
    fn id_for(&mut self, text: &str) -> String {
        let mut slug = String::new();
        for c in text.chars().flat_map(char::to_lowercase) {
            if c.is_ascii_alphanumeric() {
                slug.push(c);
            } else if !slug.is_empty() && !slug.ends_with('-') {
                slug.push('-');
            }
        }
        let slug = match slug.trim_end_matches('-') {
            "" => "section".to_owned(),
            s => s.to_owned(),
        };
        let mut id = slug.clone();
        let mut n = 1;
        while !self.ids.insert(id.clone()) {
            n += 1;
            id = format!("{slug}-{n}");
        }
        id
    }

    /// The table of contents: runs, each with its sections.
    fn contents(&self) -> String {
        if self.entries.is_empty() {
            return String::new();
        }
        let mut out =
            String::from("<nav class=\"toc\" id=\"contents\">\n<strong>Contents</strong>\n<ul>\n");
        let mut open = false;
        for (level, id, text) in &self.entries {
            let link = format!("<a href=\"#{id}\">{}</a>", escape::html(text));
            match (level, open) {
                (1, true) => {
                    let _ = writeln!(out, "</ul></li>\n<li>{link}<ul>");
                }
                (1, false) => {
                    let _ = writeln!(out, "<li>{link}<ul>");
                    open = true;
                }
                _ => {
                    let _ = writeln!(out, "<li>{link}</li>");
                }
            }
        }
        if open {
            out.push_str("</ul></li>\n");
        }
        out.push_str("</ul>\n</nav>\n");
        out
    }
}

fn heading(level: u8, text: &str, out: &mut String, headings: &mut Headings) {
    let id = headings.id_for(text);
    if level <= 2 {
        headings.entries.push((level, id.clone(), text.to_owned()));
    }
    let _ = writeln!(
        out,
        "<h{level} id=\"{id}\">{}</h{level}>",
        escape::html(text)
    );
}

/// Where a pipeline print sits in the schedule, comparable across ranks: pass, step, the
/// `After StepK` print after the loop's, loop index, then the print's place in the loop body.
fn schedule_key(e: &PipelineEntry) -> (u32, u8, bool, u32, u8) {
    let after = matches!(
        e.kind,
        PipelineKind::AfterStep1
            | PipelineKind::AfterStep2
            | PipelineKind::AfterStep3
            | PipelineKind::AfterStep4
            | PipelineKind::AfterStep8
    );
    (e.pass, e.kind.step(), after, e.i.unwrap_or(0), e.kind as u8)
}

/// The axis label of a schedule point: the print's label, without the count of an `After
/// StepK` (it differs between ranks; the tooltip has it).
fn slot_label(e: &PipelineEntry, passes: usize) -> String {
    let label = match e.kind {
        PipelineKind::AfterStep8 => "After Step8".to_owned(),
        _ if e.count.is_some() => e.label().split(" (").next().unwrap_or("").to_owned(),
        _ => e.label(),
    };
    if passes > 1 {
        format!("pass {} · {label}", e.pass)
    } else {
        label
    }
}

/// The band a schedule point belongs to: its step, named by what the step runs.
fn slot_group(e: &PipelineEntry, passes: usize) -> String {
    let step = match e.kind.step() {
        0 => "Before".to_owned(),
        1 => "Step 1 (F0)".to_owned(),
        2 => "Step 2 (F0F1)".to_owned(),
        3 => "Step 3 (B1W1F1)".to_owned(),
        4 => "Step 4 (F0B1F1B0)".to_owned(),
        8 => "End".to_owned(),
        k => format!("Step {k}"),
    };
    if passes > 1 {
        format!("pass {} · {step}", e.pass)
    } else {
        step
    }
}

fn rank_name(r: &RankReport) -> String {
    match r.pp {
        Some(pp) => format!("rank {} (pp={pp})", r.rank),
        None => format!("rank {}", r.rank),
    }
}

/// The schedule's points over every rank, in order, and each rank's line on them.
fn aligned(ranks: &[&RankReport]) -> (Vec<Slot>, Vec<Series>) {
    let mut keys: Vec<_> = ranks
        .iter()
        .flat_map(|r| r.pipeline.iter().map(|e| (schedule_key(e), e)))
        .collect();
    keys.sort_by_key(|(k, _)| *k);
    keys.dedup_by_key(|(k, _)| *k);
    let mut passes: Vec<u32> = keys.iter().map(|(k, _)| k.0).collect();
    passes.dedup();
    let slots = keys
        .iter()
        .map(|(_, e)| Slot {
            label: slot_label(e, passes.len()),
            group: slot_group(e, passes.len()),
        })
        .collect();
    let series = ranks
        .iter()
        .map(|r| {
            let name = rank_name(r);
            let mut points: Vec<Option<(f64, String)>> = vec![None; keys.len()];
            for e in &r.pipeline {
                let Ok(k) = keys.binary_search_by_key(&schedule_key(e), |(k, _)| *k) else {
                    continue;
                };
                let change = e.change.map_or_else(String::new, |c| {
                    format!(", {} since the print before", signed_bytes(c))
                });
                let tip = format!(
                    "{name} · {}: allocated {}, cached {}, outside PyTorch {}{change}",
                    e.label(),
                    bytes(e.allocated.max(0) as u64),
                    bytes(e.cached.max(0) as u64),
                    bytes(e.non_pytorch.max(0) as u64),
                );
                // A point printed twice in one pass keeps its last print.
                points[k] = Some((in_gib(e.allocated), tip));
            }
            Series { name, points }
        })
        .collect();
    (slots, series)
}

fn charts(run: &Run, n: usize, out: &mut String, headings: &mut Headings) {
    let suffix = if n == 0 {
        String::new()
    } else {
        format!("-{}", n + 1)
    };
    // The ranks whose sections the page shows: a line or a bar for each of 10,000 ranks is
    // tens of MB of SVG nobody can tell apart.
    let shown = super::doc::shown_ranks(run);
    let ranks: Vec<&RankReport> = shown
        .iter()
        .copied()
        .filter(|r| !r.pipeline.is_empty())
        .collect();
    if !ranks.is_empty() {
        let (slots, series) = aligned(&ranks);
        heading(2, "Memory over the pipeline schedule", out, headings);
        out.push_str(&schedule_chart(
            &format!("pipeline-chart{suffix}"),
            &slots,
            &series,
            "allocated GiB",
        ));
        out.push('\n');
    }
    let breakdowns: Vec<_> = shown
        .iter()
        .filter_map(|r| Some((r.rank, breakdown_parts(r.breakdown.as_ref()?))))
        .collect();
    let drawn: Vec<bool> = (0..BREAKDOWN_PARTS.len())
        .map(|k| breakdowns.iter().all(|(_, parts)| parts[k].1.is_some()))
        .collect();
    let rows: Vec<(String, Vec<f64>)> = breakdowns
        .iter()
        .map(|(rank, parts)| {
            let mut values: Vec<f64> = parts.iter().map(|(_, v)| v.map_or(0.0, in_gib)).collect();
            for k in (0..values.len()).filter(|&k| !drawn[k]) {
                values[OTHER_STATIC] += std::mem::take(&mut values[k]);
            }
            let values = values
                .into_iter()
                .enumerate()
                .filter(|(k, _)| drawn[*k])
                .map(|(_, v)| v)
                .collect();
            (format!("rank {rank}"), values)
        })
        .collect();
    if !rows.is_empty() {
        let names: Vec<&str> = BREAKDOWN_PARTS
            .iter()
            .zip(&drawn)
            .filter(|(_, d)| **d)
            .map(|(name, _)| *name)
            .collect();
        heading(
            2,
            "Where the memory went at each rank's peak",
            out,
            headings,
        );
        out.push_str(&stacked_bars(
            &format!("breakdown-chart{suffix}"),
            &rows,
            &names,
            "GiB",
        ));
        out.push('\n');
    }
}

fn block_html(block: &Block, out: &mut String) {
    match block {
        Block::Heading { .. } | Block::Charts { .. } => {}
        Block::Text(text) => {
            let _ = writeln!(out, "<p>{}</p>", escape::html(text));
        }
        Block::Note { tone, text } => {
            let class = match tone {
                Tone::Warning => "warning",
                Tone::Error => "error",
            };
            let _ = writeln!(out, "<p class=\"note {class}\">{}</p>", escape::html(text));
        }
        Block::Table(table) => out.push_str(&html::table(Layout::Document, table)),
        Block::Summary(summary) => out.push_str(&super::summary::html(summary)),
    }
}
