//! `memprints snapshot` and `memprints snapshot diff` as one self-contained HTML page each:
//! per device a summary, the timeline of allocated memory, the OOMs and the stacks live at the
//! peak (each unfolding to its example stack).
//!
//! Contract: the pages are [`Layout::Compact`]; every text from the file is escaped; a device
//! whose trace has fewer than two points gets a note instead of a timeline.

use std::fmt::Write as _;

use super::{diff_table, rank_table, time};
use crate::present::escape;
use crate::present::html::{self, Layout};
use crate::present::numbers::{bytes, signed_bytes};
use crate::present::svg::{self, Mark, Timeline};
use crate::present::table::Table;
use crate::snapshot::analyze::DeviceReport;
use crate::snapshot::diff::SnapshotDiff;
use crate::snapshot::{FailedInput, SnapshotReport};

/// The HTML report: per snapshot a summary, the SVG timeline, the top stacks and the OOMs.
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
    for r in reports {
        let rank = r.rank.map_or_else(String::new, |k| format!(" (rank {k})"));
        let _ = write!(
            body,
            "<h2><code>{}</code>{rank}</h2>",
            escape::html(&r.path)
        );
        for d in &r.devices {
            device(&mut body, d, top);
        }
    }
    html::page(Layout::Compact, "memprints snapshot", &body)
}

fn device(body: &mut String, d: &DeviceReport, top: usize) {
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
        escape::html(&time(d.peak_time_us)),
        d.events,
        bytes(d.live_before_trace_bytes)
    );
    body.push_str(&timeline(d));
    if !d.ooms.is_empty() {
        body.push_str("<h4>OOM events</h4>");
        let mut ooms = Table::new(&[
            ("time_us", true),
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
                    o.time_us.to_string(),
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
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td><details><summary><code>{}</code></summary><pre>{}</pre></details></td></tr>",
                bytes(g.bytes),
                g.count,
                escape::html(&g.frame),
                escape::html(&g.stack.join("\n"))
            );
        }
        body.push_str("</table>");
    }
}

/// Allocated bytes over the trace, the peak marked in blue, OOMs in red.
fn timeline(d: &DeviceReport) -> String {
    if d.timeline.len() < 2 {
        return "<p>(no trace events to plot)</p>".into();
    }
    let x_of = |time_us: i64, index: usize| {
        if d.time_axis {
            time_us as f64
        } else {
            index as f64
        }
    };
    let peak = d.peak_event_index.map(|i| Mark {
        // Without a peak time the dot sits at the start of the axis.
        x: x_of(d.peak_time_us.unwrap_or(d.timeline[0].0), i),
        title: format!("peak {}", bytes(d.peak_allocated_bytes)),
    });
    let ooms = d
        .ooms
        .iter()
        .map(|o| Mark {
            x: x_of(o.time_us, o.event_index),
            title: format!("OOM: requested {}", bytes(o.requested_bytes)),
        })
        .collect();
    let y_max_label = bytes(d.peak_allocated_bytes);
    svg::timeline(&Timeline {
        points: &d.timeline,
        x_unit: if d.time_axis { "time_us" } else { "event" },
        y_max: d.peak_allocated_bytes,
        y_max_label: &y_max_label,
        peak,
        ooms,
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
