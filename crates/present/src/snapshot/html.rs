//! `memprints snapshot` and `memprints snapshot diff` as one self-contained HTML page each:
//! per device a summary, the interactive timeline of allocated memory in bands by owner (the
//! library or model file that allocated it, [`memprints_snapshot::owner`]) and reserved
//! memory ([`crate::timeline`]), with its legend, the segments reserved at the peak, the OOMs
//! and the stacks live at the peak (each unfolding to its whole stack, the frame it is grouped
//! by in bold). The diff page draws the owners' bytes at each peak side by side.
//!
//! Contract: the pages are [`Layout::Compact`]; every text from the file is escaped; a device
//! whose trace has no events gets a note instead of a timeline, and so does a report loaded
//! without timelines. Every timeline of a page shares one y scale (the page's highest
//! allocated or reserved) and counts time in milliseconds from its first event.

use std::fmt::Write as _;

use serde::Serialize;

use super::{diff_table, duration, oom_time, rank_table, released_before_oom};
use crate::escape;
use crate::html::{self, Layout};
use crate::numbers::{bytes, signed_bytes};
use crate::svg::stacked_bars;
use crate::table::Table;
use crate::timeline::{self as chart, Chart};
use memprints_snapshot::analyze::DeviceReport;
use memprints_snapshot::diff::SnapshotDiff;
use memprints_snapshot::timeline::{Band, DeviceTimeline, Overview, PeakSegment};

/// The colours of a timeline's owner bands, in band order; `other` is the last band when
/// there is one, and it is grey.
const BAND_COLORS: [&str; 12] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#4b4b8f", "#d37295", "#bab0ac",
];

fn band_color(bands: &[Band], k: usize) -> &'static str {
    if bands[k].name == memprints_snapshot::timeline::OTHER {
        BAND_COLORS[BAND_COLORS.len() - 1]
    } else {
        BAND_COLORS[k % (BAND_COLORS.len() - 1)]
    }
}

/// Milliseconds, as the timelines count them: `8319.2 ms`, `0.013 ms`.
fn ms(us: u64) -> String {
    let v = us as f64 / 1e3;
    if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.3} ms")
    }
}
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
    // One y scale over every chart of the page.
    let y_max = reports
        .iter()
        .flat_map(|r| &r.timelines)
        .flat_map(|t| {
            t.by_event
                .allocated_max
                .iter()
                .chain(&t.by_event.reserved_max)
        })
        .copied()
        .max()
        .unwrap_or(0);
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
            charts += usize::from(device(&mut body, d, r.timelines.get(j), &id, top, y_max));
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
    y_max: u64,
) -> bool {
    let at = match (d.peak_since_start_us(), d.peak_event_index) {
        (Some(since), _) => format!("{} from the first event", ms(since.max(0) as u64)),
        (None, Some(i)) => format!("event {i}"),
        (None, None) => "the start".to_owned(),
    };
    let _ = write!(
        body,
        "<h3>Device {}</h3><p>Peak allocated <strong>{}</strong> at {}; there active {}, reserved {} · {} trace events · {} live before the trace began.<br>At the end: reserved {}, allocated {}, active {}; free (cached) {}: <strong>{}</strong> stranded in {} partly used segments ({:.0}% of them), {} in {} empty segments{}.</p>",
        d.device,
        bytes(d.peak_allocated_bytes),
        escape::html(&at),
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
        released_before_oom(d),
    );
    let charted = match timeline {
        Some(t) if t.events > 0 => {
            body.push_str(&timeline_chart(d, t, id, y_max));
            body.push_str(&legend(&t.bands));
            body.push_str(&segments(
                &t.peak_segments,
                &t.bands,
                &format!("{id}-segments"),
            ));
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
        body.push_str(
            "<table><tr><th>bytes</th><th>count</th><th>owner</th><th>asked for by</th></tr>",
        );
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
                "<tr><td>{}</td><td>{}</td><td>{}</td><td><details><summary><code>{}</code></summary><pre>{}</pre></details></td></tr>",
                bytes(g.bytes),
                g.count,
                escape::html(&g.owner),
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
    bands: Vec<&'a str>,
    band_colors: Vec<&'static str>,
    before_band: u32,
    y_max: u64,
}

/// The owner bands' legend: colour, owner, bytes at the peak.
fn legend(bands: &[Band]) -> String {
    let mut out = String::from("<div class=\"mp-legend\">");
    for (k, b) in bands.iter().enumerate() {
        let _ = write!(
            out,
            "<span><i style=\"background:{}\"></i>{} <b>{}</b></span>",
            band_color(bands, k),
            escape::html(&b.name),
            bytes(b.peak_bytes)
        );
    }
    out.push_str("</div>");
    out
}

/// The segments reserved at the peak as a memory map: one box per segment, its width its
/// size, filled as far as traced blocks use it, in the colour of the band that uses most.
fn segments(list: &[PeakSegment], bands: &[Band], id: &str) -> String {
    if list.is_empty() {
        return String::new();
    }
    let total: u64 = list.iter().map(|s| s.size).sum();
    let traced: u64 = list.iter().map(|s| s.traced_bytes).sum();
    let (width, row_h, gap, rows) = (1000.0, 22.0, 2.0, 3.0);
    let scale = width * rows / total.max(1) as f64;
    let mut boxes = String::new();
    let (mut x, mut y) = (0.0f64, 0.0f64);
    for s in list {
        let w = (s.size as f64 * scale).clamp(3.0, width);
        if x > 0.0 && x + w > width {
            x = 0.0;
            y += row_h + gap;
        }
        let used = w * (s.traced_bytes as f64 / s.size.max(1) as f64).min(1.0);
        let owner = s.band.map_or("", |b| bands[b as usize].name.as_str());
        let color = s.band.map_or("#ccc", |b| band_color(bands, b as usize));
        let _ = write!(
            boxes,
            "<g class=\"segment\"><title>segment 0x{:x}: {}, {} in traced blocks{}</title><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{row_h}\" fill=\"#eceff3\" stroke=\"#fff\"/><rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{used:.1}\" height=\"{row_h}\" fill=\"{color}\"/></g>",
            s.address,
            bytes(s.size),
            bytes(s.traced_bytes),
            if owner.is_empty() {
                String::new()
            } else {
                format!(", most of them {}", escape::html(owner))
            },
            (w - 1.0).max(1.0),
        );
        x += w;
    }
    let height = y + row_h;
    format!(
        "<h4>Segments reserved at the peak</h4><p>{} segments, {} reserved; {} of it in blocks allocated during the trace (coloured by owner; grey: free, or held by blocks older than the trace). Each box is a segment, its width its size.</p><svg id=\"{}\" class=\"mp-segments\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\">{boxes}</svg>",
        list.len(),
        bytes(total),
        bytes(traced),
        escape::html(id),
    )
}

fn timeline_chart(d: &DeviceReport, t: &DeviceTimeline, id: &str, y_max: u64) -> String {
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
        bands: t.bands.iter().map(|b| b.name.as_str()).collect(),
        band_colors: (0..t.bands.len())
            .map(|k| band_color(&t.bands, k))
            .collect(),
        before_band: t.before_band,
        y_max,
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
    body.push_str(&owners_chart(d));
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

/// What each owner held at A's peak and at B's, as two stacked bars on one scale.
fn owners_chart(d: &SnapshotDiff) -> String {
    let (a, b) = (&d.a_owners_at_peak, &d.b_owners_at_peak);
    if a.is_empty() && b.is_empty() {
        return String::new();
    }
    // Owners by their larger side, the first nine drawn, the rest as one grey "other" (the
    // bars' palette has ten colours).
    let mut names: Vec<(&str, u64)> = Vec::new();
    for (name, bytes) in a.iter().chain(b) {
        match names.iter_mut().find(|n| n.0 == name) {
            Some(n) => n.1 = n.1.max(*bytes),
            None => names.push((name, *bytes)),
        }
    }
    names.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    let mut parts: Vec<&str> = names.iter().take(9).map(|n| n.0).collect();
    if names.len() > 9 {
        parts.push("other");
    }
    let row = |side: &[(String, u64)]| -> Vec<f64> {
        let mut v = vec![0.0; parts.len()];
        for (name, bytes) in side {
            let k = parts
                .iter()
                .position(|p| p == name)
                .unwrap_or(parts.len() - 1);
            v[k] += *bytes as f64 / (1u64 << 20) as f64;
        }
        v
    };
    let rows = vec![("A".to_owned(), row(a)), ("B".to_owned(), row(b))];
    format!(
        "<h2>Who held the memory at each peak</h2>{}",
        stacked_bars("owners-chart", &rows, &parts, "MiB at the peak, by owner")
    )
}
