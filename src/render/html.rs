//! The report as one self-contained HTML page: inline CSS, no scripts, no network. Two SVG
//! charts (memory over the pipeline schedule per rank; the breakdown at the peak per rank) come
//! before the same document the text renderer prints.

use std::fmt::Write;

use super::doc::{Block, Table, Tone, breakdown_parts};
use super::svg::{Series, esc, line_chart, stacked_bars};
use crate::report::Report;

const GIB: f64 = (1u64 << 30) as f64;

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;\
color:#222;padding:0 1em}table{border-collapse:collapse;margin:.5em 0 1.2em;font-size:13px}\
th,td{border:1px solid #ddd;padding:2px 8px}th{background:#f4f4f4}td.num{text-align:right;\
font-variant-numeric:tabular-nums}.note{padding:.5em 1em;border-left:4px solid}\
.warning{border-color:#e0a000;background:#fff8e1}.error{border-color:#c62828;background:#fdecea}\
svg.chart{max-width:100%;height:auto}h2{border-bottom:1px solid #ddd;padding-bottom:.2em}";

/// Renders the page: charts first, then `doc`.
pub fn render(report: &Report, doc: &[Block]) -> String {
    let mut out =
        String::from("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(
        out,
        "<title>memprints report</title>\n<style>{STYLE}</style>\n</head>\n<body>"
    );
    let first_section = doc
        .iter()
        .position(|b| matches!(b, Block::Heading { level: 2, .. }))
        .unwrap_or(doc.len());
    for block in &doc[..first_section] {
        block_html(block, &mut out);
    }
    charts(report, &mut out);
    for block in &doc[first_section..] {
        block_html(block, &mut out);
    }
    out.push_str("</body>\n</html>\n");
    out
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
            values: r
                .pipeline
                .iter()
                .map(|e| e.allocated as f64 / GIB)
                .collect(),
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
            let values = breakdown_parts(b)
                .iter()
                .map(|(_, v)| *v as f64 / GIB)
                .collect();
            Some((format!("rank {}", r.rank), values))
        })
        .collect();
    if !rows.is_empty() {
        let parts: Vec<&str> = breakdown_parts(
            &report
                .ranks
                .iter()
                .find_map(|r| r.breakdown.clone())
                .unwrap_or_else(zero),
        )
        .iter()
        .map(|(n, _)| *n)
        .collect();
        out.push_str("<h2>Where the memory went at each rank's peak</h2>\n");
        out.push_str(&stacked_bars("breakdown-chart", &rows, &parts, "GiB"));
        out.push('\n');
    }
}

fn zero() -> crate::report::model::Breakdown {
    crate::report::model::Breakdown {
        weights: 0,
        optimizer_state: 0,
        other_static: 0,
        activations: 0,
        cached: 0,
        non_pytorch: 0,
        total: 0,
    }
}

fn block_html(block: &Block, out: &mut String) {
    match block {
        Block::Heading { level, text } => {
            let _ = writeln!(out, "<h{level}>{}</h{level}>", esc(text));
        }
        Block::Text(text) => {
            let _ = writeln!(out, "<p>{}</p>", esc(text));
        }
        Block::Note { tone, text } => {
            let class = match tone {
                Tone::Warning => "warning",
                Tone::Error => "error",
            };
            let _ = writeln!(out, "<p class=\"note {class}\">{}</p>", esc(text));
        }
        Block::Table(table) => table_html(table, out),
    }
}

fn table_html(table: &Table, out: &mut String) {
    out.push_str("<table>\n<thead><tr>");
    for h in &table.header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let class = if table.numeric.get(i) == Some(&true) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}>{}</td>", esc(cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}
