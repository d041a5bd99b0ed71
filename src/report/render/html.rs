//! The report as one self-contained HTML page: inline CSS, no scripts, no network. Two SVG
//! charts (memory over the pipeline schedule per rank; the breakdown at the peak per rank) come
//! before the same document the text renderer prints.
//!
//! Contract: the page is [`crate::present::html::Layout::Document`]; the opening heading and
//! paragraphs come first, then the charts (left out when no rank has a pipeline or a
//! breakdown), then the document's sections. Every text is escaped.

use std::fmt::Write;

use super::doc::{BREAKDOWN_PARTS, Block, Tone, breakdown_parts};
use crate::present::escape;
use crate::present::html::{self, Layout};
use crate::present::numbers::in_gib;
use crate::present::svg::{Series, line_chart, stacked_bars};
use crate::report::Report;

/// Renders the page: charts first, then `doc`.
pub fn render(report: &Report, doc: &[Block]) -> String {
    let mut body = String::new();
    let first_section = doc
        .iter()
        .position(|b| matches!(b, Block::Heading { level: 2, .. }))
        .unwrap_or(doc.len());
    for block in &doc[..first_section] {
        block_html(block, &mut body);
    }
    charts(report, &mut body);
    for block in &doc[first_section..] {
        block_html(block, &mut body);
    }
    html::page(Layout::Document, "memprints report", &body)
}

fn charts(report: &Report, out: &mut String) {
    let series: Vec<Series> = report
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
            "pipeline-chart",
            &series,
            "pipeline print (schedule order)",
            "allocated GiB",
        ));
        out.push('\n');
    }
    let rows: Vec<(String, Vec<f64>)> = report
        .ranks
        .iter()
        .filter_map(|r| {
            let b = r.breakdown.as_ref()?;
            let values = breakdown_parts(b).iter().map(|(_, v)| in_gib(*v)).collect();
            Some((format!("rank {}", r.rank), values))
        })
        .collect();
    if !rows.is_empty() {
        out.push_str("<h2>Where the memory went at each rank's peak</h2>\n");
        out.push_str(&stacked_bars(
            "breakdown-chart",
            &rows,
            &BREAKDOWN_PARTS,
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
    }
}
