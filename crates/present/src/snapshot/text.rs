//! `memprints snapshot` and `memprints snapshot diff` as plain text for a terminal: a summary
//! line per device, the stacks live at the peak, borderless tables.
//!
//! Contract: failed inputs are not listed (the caller prints them on stderr); the text ends with
//! exactly one newline.

use std::fmt::Write as _;

use super::{diff_table, oom_time, peak_time, rank_table, released_before_oom};
use crate::numbers::{bytes, signed_bytes};
use crate::table::{Border, Table};
use memprints_snapshot::SnapshotReport;
use memprints_snapshot::analyze::DeviceReport;
use memprints_snapshot::diff::SnapshotDiff;

/// The plain-text report of `reports`, with `top` stacks per device.
pub fn report(reports: &[SnapshotReport], top: usize) -> String {
    let mut out = String::new();
    for r in reports {
        let rank = r.rank.map_or_else(String::new, |k| format!("rank {k}, "));
        let _ = writeln!(out, "== {} ({rank}{} trace events)", r.path, r.events);
        for d in &r.devices {
            device(&mut out, d, top);
        }
        out.push('\n');
    }
    if reports.len() > 1 {
        let _ = writeln!(out, "Peak allocated per rank:");
        let _ = writeln!(out, "{}\n", rank_table(reports).to_text(Border::None));
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

fn device(out: &mut String, d: &DeviceReport, top: usize) {
    let _ = writeln!(
        out,
        "device {}: at the end reserved {}, allocated {}, active {}; free (cached) {}: {} stranded in {} partly used segments ({:.0}% of them), {} in {} empty segments{}",
        d.device,
        bytes(d.reserved_bytes),
        bytes(d.allocated_bytes),
        bytes(d.active_bytes),
        bytes(d.free_bytes),
        bytes(d.stranded_free_bytes),
        d.segments - d.empty_segments,
        d.fragmentation * 100.0,
        bytes(d.empty_segment_bytes),
        d.empty_segments,
        released_before_oom(d)
    );
    let at = match d.peak_event_index {
        Some(i) => format!("{} after event {i} of {}", peak_time(d), d.events),
        None if d.events == 0 => "the end (no trace: what segments hold)".into(),
        None => "before the first event".into(),
    };
    let _ = writeln!(
        out,
        "peak allocated {} at {at}; there active {}, reserved {}; {} live before the trace began",
        bytes(d.peak_allocated_bytes),
        bytes(d.peak_active_bytes),
        bytes(d.peak_reserved_bytes),
        bytes(d.live_before_trace_bytes)
    );
    for o in &d.ooms {
        let _ = writeln!(
            out,
            "OOM at {}: requested {}, device free {}, allocated {}, reserved {}",
            oom_time(d, o.time_us),
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
        let mut stacks = Table::new(&[
            ("bytes", true),
            ("count", true),
            ("owner", false),
            ("asked for by", false),
        ]);
        stacks.rows = d
            .peak_stacks
            .iter()
            .take(top)
            .map(|g| {
                vec![
                    bytes(g.bytes),
                    g.count.to_string(),
                    g.owner.clone(),
                    g.frame.clone(),
                ]
            })
            .collect();
        let _ = writeln!(out, "{}", stacks.to_text(Border::None));
    }
    if !d.peak_owners.is_empty() {
        let _ = writeln!(out, "owners at the peak: {}", owners_line(d));
    }
}

/// Every owner's bytes at the peak, largest first, then the allocator's unused reserve there.
fn owners_line(d: &DeviceReport) -> String {
    let mut parts: Vec<String> = d
        .peak_owners
        .iter()
        .map(|o| format!("{} {}", o.owner, bytes(o.bytes)))
        .collect();
    parts.push(format!(
        "{} {} (reserved − allocated)",
        memprints_snapshot::owner::UNUSED_RESERVE,
        bytes(d.peak_reserved_bytes.saturating_sub(d.peak_allocated_bytes))
    ));
    parts.join(", ")
}

/// The plain-text diff, with `top` rows per comparison.
pub fn diff(d: &SnapshotDiff, top: usize) -> String {
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
        let table = diff_table(rows, top, "count A->B");
        let _ = writeln!(out, "{}", table.to_text(Border::None));
    }
    out
}
