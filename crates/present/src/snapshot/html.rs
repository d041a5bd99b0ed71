//! `memprints snapshot` and `memprints snapshot diff` as one self-contained HTML page each:
//! per device a summary, the interactive timeline of allocated and reserved memory
//! ([`crate::timeline`]), the OOMs and the stacks live at the peak (each unfolding to
//! its whole stack, the frame it is grouped by in bold).
//!
//! Contract: the pages are [`Layout::Compact`]; every text from the file is escaped; a device
//! whose trace has no events gets a note instead of a timeline, and so does a report loaded
//! without timelines.

use std::fmt::Write as _;

use serde::Serialize;

use super::{diff_table, duration, oom_time, peak_time, rank_table};
use crate::escape;
use crate::html::{self, Layout};
use crate::numbers::{bytes, signed_bytes};
use crate::table::Table;
use crate::timeline::{self as chart, Chart};
use memprints_snapshot::analyze::DeviceReport;
use memprints_snapshot::diff::SnapshotDiff;
use memprints_snapshot::timeline::{DeviceTimeline, Overview};
use memprints_snapshot::{FailedInput, SnapshotReport};

/// The HTML report: per snapshot a summary, the timeline, the top stacks and the OOMs.
pub fn report(reports: &[SnapshotReport], errors: &[FailedInput], top: usize) -> String {
    let mut body = String::from("<h1>GPU memory snapshots</h1>");
    if reports.len() > 1 {
        body.push_str("<h2>Peak allocated per rank</h2>");
        body.push_str(&html::table(Layout::Compact, &rank_table(reports)));
    }
    for e in errors {
        let _ = write!(
            body,
            "<p><strong>error:</strong> {}</p>",
            escape::html(&e.error)
        );
    }
    let mut charts = 0;
    for (k, r) in reports.iter().enumerate() {
        let rank = r.rank.map_or_else(String::new, |k| format!(" (rank {k})"));
        let _ = write!(
            body,
            "<h2><code>{}</code>{rank}</h2>",
            escape::html(&r.path)
        );
        for (j, d) in r.devices.iter().enumerate() {
            let id = format!("timeline-{k}-{}", d.device);
            charts += usize::from(device(&mut body, d, r.timelines.get(j), &id, top));
        }
    }
    if charts > 0 {
        body.push_str(chart::ASSETS);
    }
    html::page(Layout::Compact, "memprints snapshot", &body)
}

/// Writes one device's section; `true` when it holds a chart.
fn device(
    body: &mut String,
    d: &DeviceReport,
    timeline: Option<&DeviceTimeline>,
    id: &str,
    top: usize,
) -> bool {
    let _ = write!(
        body,
        "<h3>Device {}</h3><p>Peak allocated <strong>{}</strong> at {}; there active {}, reserved {} · {} trace events · {} live before the trace began.<br>At the end: reserved {}, allocated {}, active {}; free (cached) {}: <strong>{}</strong> stranded in {} partly used segments ({:.0}% of them), {} in {} empty segments (released before an OOM).</p>",
        d.device,
        bytes(d.peak_allocated_bytes),
        escape::html(&peak_time(d)),
        bytes(d.peak_active_bytes),
        bytes(d.peak_reserved_bytes),
        d.events,
        bytes(d.live_before_trace_bytes),
        bytes(d.reserved_bytes),
        bytes(d.allocated_bytes),
        bytes(d.active_bytes),
        bytes(d.free_bytes),
        bytes(d.stranded_free_bytes),
        d.segments - d.empty_segments,
        d.fragmentation * 100.0,
        bytes(d.empty_segment_bytes),
        d.empty_segments,
    );
    let charted = match timeline {
        Some(t) if t.events > 0 => {
            body.push_str(&timeline_chart(d, t, id));
            true
        }
        _ => {
            body.push_str("<p>(no trace events to plot)</p>");
            false
        }
    };
    if !d.ooms.is_empty() {
        body.push_str("<h4>OOM events</h4>");
        let mut ooms = Table::new(&[
            ("at", true),
            ("requested", true),
            ("device free", true),
            ("allocated", true),
            ("reserved", true),
        ]);
        ooms.rows = d
            .ooms
            .iter()
            .map(|o| {
                vec![
                    oom_time(d, o.time_us),
                    bytes(o.requested_bytes),
                    bytes(o.device_free_bytes),
                    bytes(o.allocated_bytes),
                    bytes(o.reserved_bytes),
                ]
            })
            .collect();
        body.push_str(&html::table(Layout::Compact, &ooms));
    }
    if !d.peak_stacks.is_empty() {
        let _ = write!(
            body,
            "<h4>Top {} stacks live at the peak</h4>",
            top.min(d.peak_stacks.len())
        );
        body.push_str("<table><tr><th>bytes</th><th>count</th><th>frame</th></tr>");
        for g in d.peak_stacks.iter().take(top) {
            let mut stack = String::new();
            for (i, f) in g.stack.iter().enumerate() {
                if Some(i) == g.key_frame {
                    let _ = writeln!(stack, "<b>{}</b>", escape::html(f));
                } else {
                    let _ = writeln!(stack, "{}", escape::html(f));
                }
            }
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td><details><summary><code>{}</code></summary><pre>{}</pre></details></td></tr>",
                bytes(g.bytes),
                g.count,
                escape::html(&g.frame),
                stack.trim_end()
            );
        }
        body.push_str("</table>");
    }
    charted
}

/// What the page's script reads before it unpacks the events (see `present/timeline.js`).
#[derive(Serialize)]
struct Meta<'a> {
    events: usize,
    has_times: bool,
    span_us: u64,
    span_label: String,
    start_allocated: u64,
    start_reserved: u64,
    peak_event: Option<usize>,
    peak_x_us: u64,
    peak_label: String,
    by_event: &'a Overview,
    by_time: &'a Overview,
}

fn timeline_chart(d: &DeviceReport, t: &DeviceTimeline, id: &str) -> String {
    let meta = Meta {
        events: t.events,
        has_times: t.has_times,
        span_us: t.span_us,
        span_label: duration(t.span_us as i64),
        start_allocated: t.start_allocated,
        start_reserved: t.start_reserved,
        peak_event: t.peak_event,
        peak_x_us: t.peak_x_us,
        peak_label: bytes(d.peak_allocated_bytes),
        by_event: &t.by_event,
        by_time: &t.by_time,
    };
    chart::chart(&Chart {
        id,
        meta: &meta,
        packed: &t.packed,
        symbols: &t.symbols,
    })
}

/// The diff as a small HTML page.
pub fn diff(d: &SnapshotDiff, top: usize) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>Snapshot diff</h1><p>A: <code>{}</code><br>B: <code>{}</code></p><p>Peak allocated: {} → {} ({})</p>",
        escape::html(&d.a),
        escape::html(&d.b),
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
        let table = diff_table(rows, top, "count A→B");
        body.push_str(&html::table(Layout::Compact, &table));
    }
    html::page(Layout::Compact, "memprints snapshot diff", &body)
}
