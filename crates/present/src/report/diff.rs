//! `memprints report diff A B` rendered: the [`RunDiff`] as a document of headings and tables
//! ([`build`]), printed as text or markdown by the report's own renderers, as a simple HTML page
//! ([`fn@html`]) in the report's page shell, or as JSON ([`json`]).
//!
//! Contract: sizes print in GiB with two decimals (MiB with two for snapshot owners), deltas
//! with a sign; a figure one run did not measure is [`NOT_MEASURED`] and its delta
//! [`NOT_APPLICABLE`]. Sections with no rows are left out, with a sentence saying why for the
//! steps and the snapshots.

use std::fmt::Write;

use super::doc::{Block, NOT_APPLICABLE, NOT_MEASURED, Tone};
use crate::escape;
use crate::html::{self, Layout};
use crate::numbers::{gib, signed_gib};
use crate::table::Table;
use memprints_log::diff::{Pair, RunDiff, Side};

const MIB: f64 = (1u64 << 20) as f64;

fn mib(bytes: i64) -> String {
    format!("{:.2}", bytes as f64 / MIB)
}

fn signed_mib(bytes: i64) -> String {
    format!("{:+.2}", bytes as f64 / MIB)
}

/// The three cells of a pair: A, B, B − A.
fn cells(p: Pair, f: fn(i64) -> String, signed: fn(i64) -> String) -> [String; 3] {
    let side = |v: Option<i64>| v.map_or_else(|| NOT_MEASURED.to_owned(), f);
    [
        side(p.a),
        side(p.b),
        p.delta.map_or_else(|| NOT_APPLICABLE.to_owned(), signed),
    ]
}

fn side_text(tag: &str, s: &Side) -> String {
    let mut text = format!("{tag}: {}", s.name);
    if s.runs > 1 {
        text += &format!(" (run {} of the {} runs in its input)", s.run, s.runs);
    }
    text
}

/// The document of `d`.
pub fn build(d: &RunDiff) -> Vec<Block> {
    let mut out = vec![
        Block::Heading {
            level: 1,
            text: "Memory report diff".to_owned(),
        },
        Block::Text(side_text("A", &d.a)),
        Block::Text(side_text("B", &d.b)),
    ];
    for s in [&d.a, &d.b] {
        if s.runs > 1 {
            out.push(Block::Note {
                tone: Tone::Warning,
                text: format!(
                    "{} holds {} runs; this is run {} (the last unless --run says): each run is \
                     compared on its own.",
                    s.sources.join(", "),
                    s.runs,
                    s.run
                ),
            });
        }
    }
    out.push(Block::Text(
        "GiB; B − A is run B's figure minus run A's (positive: B needs more).".to_owned(),
    ));
    if !d.ranks.is_empty() {
        let mut t = Table::new(&[
            ("rank", true),
            ("peak A", true),
            ("peak B", true),
            ("B − A", true),
            ("device A", true),
            ("device B", true),
            ("B − A", true),
        ]);
        for r in &d.ranks {
            let mut row = vec![r.rank.to_string()];
            row.extend(cells(r.allocated, gib, signed_gib));
            row.extend(cells(r.device, gib, signed_gib));
            t.rows.push(row);
        }
        out.push(Block::Heading {
            level: 2,
            text: "Peak allocated and device total per rank".to_owned(),
        });
        out.push(Block::Table(t));
    }
    if !d.components.is_empty() {
        let mut t = Table::new(&[
            ("rank", true),
            ("component", false),
            ("A", true),
            ("B", true),
            ("B − A", true),
        ]);
        for c in &d.components {
            let name = match c.component {
                "non_pytorch" => "outside allocator".to_owned(),
                other => other.replace('_', " "),
            };
            let mut row = vec![c.rank.to_string(), name];
            row.extend(cells(c.bytes, gib, signed_gib));
            t.rows.push(row);
        }
        out.push(Block::Heading {
            level: 2,
            text: "Where the memory went at each rank's peak".to_owned(),
        });
        out.push(Block::Table(t));
    }
    if !d.layers.is_empty() {
        let mut t = Table::new(&[
            ("rank", true),
            ("layer", true),
            ("saved A", true),
            ("saved B", true),
            ("B − A", true),
            ("grew A", true),
            ("grew B", true),
            ("B − A", true),
        ]);
        for l in &d.layers {
            let mut row = vec![l.rank.to_string(), l.layer.to_string()];
            row.extend(cells(l.saved, mib, signed_mib));
            row.extend(cells(l.growth, mib, signed_mib));
            t.rows.push(row);
        }
        out.push(Block::Heading {
            level: 2,
            text: "Detail layers".to_owned(),
        });
        out.push(Block::Text(
            "MiB. saved: tensors the layer saved for backward in the first pass; grew: what \
             allocated memory grew by over the layer's probes (printed in GiB with two \
             decimals)."
                .to_owned(),
        ));
        out.push(Block::Table(t));
    }
    out.push(Block::Heading {
        level: 2,
        text: "PithTrain's step lines".to_owned(),
    });
    if d.steps.is_empty() {
        out.push(Block::Text(
            "Not compared: a run logged no step lines.".to_owned(),
        ));
    } else {
        let mut t = Table::new(&[("figure", false), ("A", true), ("B", true), ("B − A", true)]);
        let step = |s: Option<u64>| s.map_or_else(String::new, |s| format!(" (step {s})"));
        for s in &d.steps {
            let [a, b, delta] = cells(s.bytes, gib, signed_gib);
            t.rows.push(vec![
                s.figure.to_owned(),
                format!("{a}{}", step(s.step_a)),
                format!("{b}{}", step(s.step_b)),
                delta,
            ]);
        }
        out.push(Block::Table(t));
    }
    out.push(Block::Heading {
        level: 2,
        text: "Memory snapshots".to_owned(),
    });
    if d.snapshots.is_empty() {
        out.push(Block::Text(
            "Not compared: no rank has a read memory snapshot in both runs (--snapshots-a, \
             --snapshots-b)."
                .to_owned(),
        ));
    } else {
        let mut t = Table::new(&[
            ("rank", true),
            ("held at the peak by", false),
            ("MiB A", true),
            ("MiB B", true),
            ("B − A", true),
        ]);
        for s in &d.snapshots {
            let mut row = vec![s.rank.to_string(), s.owner.clone()];
            row.extend(cells(s.bytes, mib, signed_mib));
            t.rows.push(row);
        }
        out.push(Block::Table(t));
    }
    out
}

/// `d` as one self-contained HTML page (the report's page shell, no charts).
pub fn html(d: &RunDiff) -> String {
    let mut body = String::new();
    for block in build(d) {
        match block {
            Block::Heading { level, text } => {
                let _ = writeln!(body, "<h{level}>{}</h{level}>", escape::html(&text));
            }
            Block::Text(text) => {
                let _ = writeln!(body, "<p>{}</p>", escape::html(&text));
            }
            Block::Note { text, .. } => {
                let _ = writeln!(
                    body,
                    "<p class=\"note warning\">{}</p>",
                    escape::html(&text)
                );
            }
            Block::Table(t) => body.push_str(&html::table(Layout::Document, &t)),
            Block::Summary(_) | Block::Charts { .. } => {}
        }
    }
    html::page(Layout::Document, "memprints report diff", &body)
}

/// `d` as JSON with a trailing newline: indented when `pretty`, else on one line.
pub fn json(d: &RunDiff, pretty: bool) -> String {
    // Plain data with string keys: serialising cannot fail.
    let mut out = if pretty {
        serde_json::to_string_pretty(d)
    } else {
        serde_json::to_string(d)
    }
    .expect("the diff serialises");
    out.push('\n');
    out
}
