//! Writes reports as text, JSON or a self-contained HTML page with a hand-written SVG.
//!
//! JSON follows `schema/snapshot.schema.json` (`schema_version` 1): the snapshot-level fields
//! are the primary device's (the one with the highest peak), `devices` lists every device, and
//! stack lists are cut to the `--top` largest. Text and HTML show the same numbers; with more
//! than one snapshot they add a per-rank peak table. Byte counts in text and HTML are binary
//! units (`1.50 GiB`); JSON keeps exact integers.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::SnapshotReport;
use super::analyze::{DeviceReport, OomEvent, StackGroup};
use super::diff::{DiffRow, SnapshotDiff};

pub const SCHEMA_VERSION: u32 = 1;

/// A file that could not be read, reported next to those that could.
#[derive(Debug, Clone, Serialize)]
pub struct FailedInput {
    pub path: String,
    pub error: String,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    schema_version: u32,
    snapshots: Vec<JsonSnapshot<'a>>,
    errors: &'a [FailedInput],
}

#[derive(Serialize)]
struct JsonSnapshot<'a> {
    path: &'a str,
    rank: Option<u32>,
    file_bytes: u64,
    events: usize,
    #[serde(flatten)]
    primary: JsonDevice<'a>,
    devices: Vec<JsonDeviceEntry<'a>>,
    allocator_settings: BTreeMap<&'a str, &'a str>,
}

#[derive(Serialize)]
struct JsonDeviceEntry<'a> {
    events: usize,
    #[serde(flatten)]
    device: JsonDevice<'a>,
}

#[derive(Serialize)]
struct JsonDevice<'a> {
    device: i64,
    segments: usize,
    blocks: usize,
    reserved_bytes: u64,
    allocated_bytes: u64,
    active_bytes: u64,
    requested_bytes: u64,
    free_bytes: u64,
    largest_free_block_bytes: u64,
    fragmentation: f64,
    peak_allocated_bytes: u64,
    peak_time_us: Option<i64>,
    peak_event_index: Option<usize>,
    live_before_trace_bytes: u64,
    top_stacks: &'a [StackGroup],
    end_stacks: &'a [StackGroup],
    ooms: &'a [OomEvent],
}

fn json_device(d: &DeviceReport, top: usize) -> JsonDevice<'_> {
    JsonDevice {
        device: d.device,
        segments: d.segments,
        blocks: d.blocks,
        reserved_bytes: d.reserved_bytes,
        allocated_bytes: d.allocated_bytes,
        active_bytes: d.active_bytes,
        requested_bytes: d.requested_bytes,
        free_bytes: d.free_bytes,
        largest_free_block_bytes: d.largest_free_block_bytes,
        fragmentation: d.fragmentation,
        peak_allocated_bytes: d.peak_allocated_bytes,
        peak_time_us: d.peak_time_us,
        peak_event_index: d.peak_event_index,
        live_before_trace_bytes: d.live_before_trace_bytes,
        top_stacks: &d.peak_stacks[..top.min(d.peak_stacks.len())],
        end_stacks: &d.end_stacks[..top.min(d.end_stacks.len())],
        ooms: &d.ooms,
    }
}

/// The JSON report, pretty-printed, with a trailing newline.
pub fn json(reports: &[SnapshotReport], errors: &[FailedInput], top: usize) -> String {
    let snapshots = reports
        .iter()
        .map(|r| JsonSnapshot {
            path: &r.path,
            rank: r.rank,
            file_bytes: r.file_bytes,
            events: r.events,
            primary: json_device(r.primary(), top),
            devices: r
                .devices
                .iter()
                .map(|d| JsonDeviceEntry {
                    events: d.events,
                    device: json_device(d, top),
                })
                .collect(),
            allocator_settings: r
                .allocator_settings
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect(),
        })
        .collect();
    let report = JsonReport {
        schema_version: SCHEMA_VERSION,
        snapshots,
        errors,
    };
    let mut out = serde_json::to_string_pretty(&report).expect("report serializes");
    out.push('\n');
    out
}

/// `1536` → `1.50 KiB`; below 1 KiB, plain bytes.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

fn signed_bytes(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "+" };
    format!("{sign}{}", bytes(n.unsigned_abs()))
}

fn time(t: Option<i64>) -> String {
    t.map_or_else(|| "-".into(), |t| format!("time_us {t}"))
}

fn table(header: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING)
        .set_content_arrangement(comfy_table::ContentArrangement::Disabled)
        .set_header(header.iter().copied());
    for row in rows {
        t.add_row(row);
    }
    for &i in right {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    t.lines()
        .map(|l| l.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn stack_rows(groups: &[StackGroup], top: usize) -> Vec<Vec<String>> {
    groups
        .iter()
        .take(top)
        .map(|g| vec![bytes(g.bytes), g.count.to_string(), g.frame.clone()])
        .collect()
}

/// The plain-text report. Failed inputs are not listed: the caller prints them on stderr.
pub fn text(reports: &[SnapshotReport], top: usize) -> String {
    let mut out = String::new();
    for r in reports {
        let rank = r.rank.map_or_else(String::new, |k| format!("rank {k}, "));
        let _ = writeln!(out, "== {} ({rank}{} trace events)", r.path, r.events);
        for d in &r.devices {
            text_device(&mut out, d, top);
        }
        out.push('\n');
    }
    if reports.len() > 1 {
        let _ = writeln!(out, "Peak allocated per rank:");
        let _ = writeln!(
            out,
            "{}\n",
            table(
                &["rank", "peak", "at", "reserved", "OOMs", "file"],
                rank_rows(reports),
                &[0, 1, 3, 4]
            )
        );
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

fn rank_rows(reports: &[SnapshotReport]) -> Vec<Vec<String>> {
    reports
        .iter()
        .map(|r| {
            let d = r.primary();
            vec![
                r.rank.map_or_else(|| "-".into(), |k| k.to_string()),
                bytes(d.peak_allocated_bytes),
                time(d.peak_time_us),
                bytes(d.reserved_bytes),
                d.ooms.len().to_string(),
                r.path.clone(),
            ]
        })
        .collect()
}

fn text_device(out: &mut String, d: &DeviceReport, top: usize) {
    let _ = writeln!(
        out,
        "device {}: reserved {}, allocated {}, active {}, free (cached) {} (largest block {}, fragmentation {:.0}%)",
        d.device,
        bytes(d.reserved_bytes),
        bytes(d.allocated_bytes),
        bytes(d.active_bytes),
        bytes(d.free_bytes),
        bytes(d.largest_free_block_bytes),
        d.fragmentation * 100.0
    );
    let at = match d.peak_event_index {
        Some(i) => format!("{} (after event {i} of {})", time(d.peak_time_us), d.events),
        None if d.events == 0 => "the end (no trace: what segments hold)".into(),
        None => "before the first event".into(),
    };
    let _ = writeln!(
        out,
        "peak allocated {} at {at}; {} live before the trace began",
        bytes(d.peak_allocated_bytes),
        bytes(d.live_before_trace_bytes)
    );
    for o in &d.ooms {
        let _ = writeln!(
            out,
            "OOM at time_us {}: requested {}, device free {}, allocated {}, reserved {}",
            o.time_us,
            bytes(o.requested_bytes),
            bytes(o.device_free_bytes),
            bytes(o.allocated_bytes),
            bytes(o.reserved_bytes)
        );
    }
    if !d.peak_stacks.is_empty() {
        let _ = writeln!(
            out,
            "top {} stacks live at the peak:",
            top.min(d.peak_stacks.len())
        );
        let _ = writeln!(
            out,
            "{}",
            table(
                &["bytes", "count", "frame"],
                stack_rows(&d.peak_stacks, top),
                &[0, 1]
            )
        );
    }
}

/// The plain-text diff.
pub fn diff_text(d: &SnapshotDiff, top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}\nB: {}", d.a, d.b);
    let _ = writeln!(
        out,
        "peak allocated: {} -> {} ({})",
        bytes(d.a_peak_allocated_bytes),
        bytes(d.b_peak_allocated_bytes),
        signed_bytes(d.peak_delta_bytes)
    );
    for (title, rows) in [
        ("at the peak", &d.at_peak),
        ("in blocks allocated at the end", &d.at_end),
    ] {
        let _ = writeln!(out, "\nstacks whose bytes changed {title}:");
        if rows.is_empty() {
            let _ = writeln!(out, "(none)");
            continue;
        }
        let _ = writeln!(
            out,
            "{}",
            table(
                &["change", "A", "B", "count A->B", "frame"],
                diff_rows(rows, top),
                &[0, 1, 2, 3]
            )
        );
    }
    out
}

fn diff_rows(rows: &[DiffRow], top: usize) -> Vec<Vec<String>> {
    rows.iter()
        .take(top)
        .map(|r| {
            vec![
                signed_bytes(r.delta_bytes),
                bytes(r.a_bytes),
                bytes(r.b_bytes),
                format!("{}->{}", r.a_count, r.b_count),
                r.frame.clone(),
            ]
        })
        .collect()
}

/// The JSON diff: `{"schema_version": 1, "diff": {...}}` with rows cut to `top`.
pub fn diff_json(d: &SnapshotDiff, top: usize) -> String {
    let mut d = d.clone();
    d.at_peak.truncate(top);
    d.at_end.truncate(top);
    let value = serde_json::json!({ "schema_version": SCHEMA_VERSION, "diff": d });
    let mut out = serde_json::to_string_pretty(&value).expect("diff serializes");
    out.push('\n');
    out
}

/// The diff as a small HTML page.
pub fn diff_html(d: &SnapshotDiff, top: usize) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Snapshot diff</h1><p>A: <code>{}</code><br>B: <code>{}</code></p><p>Peak allocated: {} → {} ({})</p>",
        esc(&d.a),
        esc(&d.b),
        bytes(d.a_peak_allocated_bytes),
        bytes(d.b_peak_allocated_bytes),
        signed_bytes(d.peak_delta_bytes)
    );
    for (title, rows) in [
        ("Stacks that changed at the peak", &d.at_peak),
        (
            "Stacks that changed in what is allocated at the end",
            &d.at_end,
        ),
    ] {
        let _ = write!(body, "<h2>{title}</h2>");
        body.push_str(&html_table(
            &["change", "A", "B", "count A→B", "frame"],
            &diff_rows(rows, top),
        ));
    }
    page("memprints snapshot diff", &body)
}

pub use crate::render::svg::esc;

fn html_table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = String::from("<table><tr>");
    for h in header {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", esc(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title><style>\
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}\
table{{border-collapse:collapse;margin:.5em 0}}td,th{{padding:2px 10px;border-bottom:1px solid #ddd;text-align:left}}\
td:not(:last-child){{text-align:right;white-space:nowrap}}code{{font-size:90%}}\
details{{margin:.3em 0}}</style></head><body>\n{}\n</body></html>\n",
        esc(title),
        body
    )
}

/// The HTML report: per snapshot a summary, the SVG timeline, the top stacks and the OOMs.
pub fn html(reports: &[SnapshotReport], errors: &[FailedInput], top: usize) -> String {
    let mut body = String::from("<h1>GPU memory snapshots</h1>");
    if reports.len() > 1 {
        body.push_str("<h2>Peak allocated per rank</h2>");
        body.push_str(&html_table(
            &["rank", "peak", "at", "reserved", "OOMs", "file"],
            &rank_rows(reports),
        ));
    }
    for e in errors {
        let _ = write!(body, "<p><strong>error:</strong> {}</p>", esc(&e.error));
    }
    for r in reports {
        let rank = r.rank.map_or_else(String::new, |k| format!(" (rank {k})"));
        let _ = write!(body, "<h2><code>{}</code>{rank}</h2>", esc(&r.path));
        for d in &r.devices {
            let _ = write!(
                body,
                "<h3>Device {}</h3><p>Reserved {}, allocated {}, active {}, free (cached) {} in blocks up to {} (fragmentation {:.0}%).<br>Peak allocated <strong>{}</strong> at {} · {} trace events · {} live before the trace began.</p>",
                d.device,
                bytes(d.reserved_bytes),
                bytes(d.allocated_bytes),
                bytes(d.active_bytes),
                bytes(d.free_bytes),
                bytes(d.largest_free_block_bytes),
                d.fragmentation * 100.0,
                bytes(d.peak_allocated_bytes),
                esc(&time(d.peak_time_us)),
                d.events,
                bytes(d.live_before_trace_bytes)
            );
            body.push_str(&svg(d));
            if !d.ooms.is_empty() {
                body.push_str("<h4>OOM events</h4>");
                let rows: Vec<_> = d
                    .ooms
                    .iter()
                    .map(|o| {
                        vec![
                            o.time_us.to_string(),
                            bytes(o.requested_bytes),
                            bytes(o.device_free_bytes),
                            bytes(o.allocated_bytes),
                            bytes(o.reserved_bytes),
                        ]
                    })
                    .collect();
                body.push_str(&html_table(
                    &[
                        "time_us",
                        "requested",
                        "device free",
                        "allocated",
                        "reserved",
                    ],
                    &rows,
                ));
            }
            if !d.peak_stacks.is_empty() {
                let _ = write!(
                    body,
                    "<h4>Top {} stacks live at the peak</h4>",
                    top.min(d.peak_stacks.len())
                );
                body.push_str("<table><tr><th>bytes</th><th>count</th><th>frame</th></tr>");
                for g in d.peak_stacks.iter().take(top) {
                    let _ = write!(
                        body,
                        "<tr><td>{}</td><td>{}</td><td><details><summary><code>{}</code></summary><pre>{}</pre></details></td></tr>",
                        bytes(g.bytes),
                        g.count,
                        esc(&g.frame),
                        esc(&g.stack.join("\n"))
                    );
                }
                body.push_str("</table>");
            }
        }
    }
    page("memprints snapshot", &body)
}

/// Allocated bytes over the trace as an SVG line, the peak marked in blue, OOMs in red.
fn svg(d: &DeviceReport) -> String {
    const W: f64 = 900.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 80.0;
    const BOTTOM: f64 = 30.0;
    if d.timeline.len() < 2 {
        return "<p>(no trace events to plot)</p>".into();
    }
    // Times come from the file: plot in f64 so hostile extremes cannot overflow.
    let x0 = d.timeline.first().map_or(0.0, |p| p.0 as f64);
    let x1 = d.timeline.last().map_or(1.0, |p| p.0 as f64).max(x0 + 1.0);
    let y_max = d.peak_allocated_bytes.max(1) as f64;
    let px = |x: f64| LEFT + (x - x0) / (x1 - x0) * (W - LEFT - 10.0);
    let py = |y: u64| 10.0 + (1.0 - y as f64 / y_max) * (H - BOTTOM - 10.0);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-size=\"11\">"
    );
    let _ = write!(
        out,
        "<line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#888\"/><line x1=\"{LEFT}\" y1=\"10\" x2=\"{LEFT}\" y2=\"{}\" stroke=\"#888\"/>",
        H - BOTTOM,
        W - 10.0,
        H - BOTTOM,
        H - BOTTOM
    );
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"14\" text-anchor=\"end\">{}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">0</text>",
        LEFT - 4.0,
        esc(&bytes(d.peak_allocated_bytes)),
        LEFT - 4.0,
        H - BOTTOM
    );
    let axis = if d.time_axis { "time_us" } else { "event" };
    let _ = write!(
        out,
        "<text x=\"{LEFT}\" y=\"{}\">{x0}</text><text x=\"{}\" y=\"{}\" text-anchor=\"end\">{x1} ({axis})</text>",
        H - 12.0,
        W - 10.0,
        H - 12.0
    );
    let points: Vec<String> = d
        .timeline
        .iter()
        .map(|&(x, y)| format!("{:.1},{:.1}", px(x as f64), py(y)))
        .collect();
    let _ = write!(
        out,
        "<polyline fill=\"none\" stroke=\"#2b6cb0\" stroke-width=\"1.2\" points=\"{}\"/>",
        points.join(" ")
    );
    for o in &d.ooms {
        let x = if d.time_axis {
            o.time_us as f64
        } else {
            o.event_index as f64
        };
        let _ = write!(
            out,
            "<line x1=\"{0:.1}\" y1=\"10\" x2=\"{0:.1}\" y2=\"{1}\" stroke=\"#c53030\" stroke-dasharray=\"4 3\"><title>OOM: requested {2}</title></line><text x=\"{0:.1}\" y=\"22\" fill=\"#c53030\" text-anchor=\"end\">OOM </text>",
            px(x),
            H - BOTTOM,
            esc(&bytes(o.requested_bytes))
        );
    }
    if let Some(i) = d.peak_event_index {
        let x = if d.time_axis {
            d.peak_time_us.map_or(x0, |t| t as f64)
        } else {
            i as f64
        };
        let _ = write!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#2b6cb0\"><title>peak {}</title></circle><text x=\"{:.1}\" y=\"{:.1}\" fill=\"#2b6cb0\">peak</text>",
            px(x),
            py(d.peak_allocated_bytes),
            esc(&bytes(d.peak_allocated_bytes)),
            px(x) + 6.0,
            py(d.peak_allocated_bytes) + 12.0
        );
    }
    out.push_str("</svg>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(signed_bytes(-2048), "-2.00 KiB");
    }

    #[test]
    fn escaping_covers_markup() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }
}
