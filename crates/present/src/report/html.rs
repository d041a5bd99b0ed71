//! The report as one self-contained HTML page: inline CSS, no scripts, no network. The same
//! document the text renderer prints, with two SVG charts per run (memory over the pipeline
//! schedule per rank; the breakdown at the peak per rank) where the document marks them.
//!
//! Contract: the page is [`crate::html::Layout::Document`]; each
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
use crate::svg::{Series, line_chart, stacked_bars};
use memprints_log::Report;
use memprints_log::schema::Run;

/// Where "other static" sits in [`BREAKDOWN_PARTS`].
const OTHER_STATIC: usize = 2;

/// Renders the page: `doc`, with each run's charts where it marks them.
pub fn render(report: &Report, doc: &[Block]) -> String {
    let mut body = String::new();
    for block in doc {
        match block {
            Block::Charts { run } => {
                if let Some(r) = report.runs.get(*run) {
                    charts(r, *run, &mut body);
                }
            }
            block => block_html(block, &mut body),
        }
    }
    html::page(Layout::Document, "memprints report", &body)
}

fn charts(run: &Run, n: usize, out: &mut String) {
    let suffix = if n == 0 {
        String::new()
    } else {
        format!("-{}", n + 1)
    };
    let series: Vec<Series> = run
        .ranks
        .iter()
        .filter(|r| !r.pipeline.is_empty())
        .map(|r| Series {
            name: match r.pp {
                Some(pp) => format!("rank {} (pp={pp})", r.rank),
                None => format!("rank {}", r.rank),
            },
            values: r.pipeline.iter().map(|e| in_gib(e.allocated)).collect(),
        })
        .collect();
    if !series.is_empty() {
        out.push_str("<h2>Memory over the pipeline schedule</h2>\n");
        out.push_str(&line_chart(
            &format!("pipeline-chart{suffix}"),
            &series,
            "pipeline print (schedule order)",
            "allocated GiB",
        ));
        out.push('\n');
    }
    let breakdowns: Vec<_> = run
        .ranks
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
        out.push_str("<h2>Where the memory went at each rank's peak</h2>\n");
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
        Block::Heading { level, text } => {
            let _ = writeln!(out, "<h{level}>{}</h{level}>", escape::html(text));
        }
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
        Block::Charts { .. } => {}
    }
}
