//! The document's section on PithTrain's memory estimator: per profiled pp rank the verdict,
//! the corrections of bookkeeping made before pairing, the events and components side by side,
//! the peak, and the estimate's notes.
//!
//! Contract: [`render`] adds nothing without `--estimate`; when the estimate could not
//! be made it adds one warning with the reason and nothing else. An absent side prints as
//! "not estimated" / "not measured", never as 0.

use crate::numbers::{gib, gib_unit, signed_gib, signed_gib_unit};
use crate::table::Table;
use memprints_estimate::compare::{Component, Direction, EstimatorFit, Pair};
use memprints_estimate::corrections::{Correction, DYNAMIC_AT_PEAK, NON_PYTORCH, PEAK, Side};
use memprints_estimate::figures::Status;
use memprints_log::estimate_section::{EstimateSection, RankEstimate};
use memprints_log::schema::{RankReport, Run};

use super::block::{Block, NOT_APPLICABLE, NOT_MEASURED, Tone};

const NOT_ESTIMATED: &str = "not estimated";

/// Adds the run's estimate section, if `--estimate` made one.
pub fn render(run: &Run, out: &mut Vec<Block>) {
    let Some(section) = &run.estimate else {
        return;
    };
    out.push(Block::Heading {
        level: 2,
        text: "PithTrain's memory estimator beside the prints".to_owned(),
    });
    if let Some(error) = &section.error {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!("No estimate: {error}."),
        });
        return;
    }
    out.push(Block::Text(settings_line(section)));
    for rank in &section.ranks {
        let ours = run.ranks.iter().find(|r| r.rank == rank.rank);
        rank_blocks(rank, ours, out);
    }
}

/// The estimator's STATUS and headroom beside the report's own for the same rank.
fn fit_line(fit: &EstimatorFit, ours: Option<&RankReport>) -> String {
    let status = match fit.status {
        Some(Status::Ok) => "STATUS: OK",
        Some(Status::Tight) => "STATUS: TIGHT",
        Some(Status::Oom) => "STATUS: OOM",
        None => "no STATUS line",
    };
    let theirs = format!(
        "PithTrain's estimator says {status}: TOTAL {} of {} (headroom {})",
        gib_unit(fit.total_bytes),
        gib_unit(fit.capacity_bytes),
        signed_gib_unit(fit.headroom_bytes)
    );
    let ours = ours.and_then(|r| {
        Some((
            r.status?,
            r.capacity?,
            r.headroom_bytes?,
            r.breakdown.as_ref()?.total,
        ))
    });
    let ours = match ours {
        Some((status, capacity, headroom, peak)) => format!(
            "memprints: {} at the prints' peak, {} of {} (headroom {})",
            super::doc::fit_word(status),
            gib_unit(peak),
            gib_unit(capacity.bytes),
            signed_gib_unit(headroom)
        ),
        None => "memprints: no capacity known (pass --gpu-memory GIB)".to_owned(),
    };
    format!("Fit: {theirs}; {ours}.")
}

fn settings_line(section: &EstimateSection) -> String {
    let tree = section.tree.as_deref().unwrap_or("?");
    let Some(s) = &section.settings else {
        return format!("Estimated by the memory estimator of {tree}.");
    };
    format!(
        "Estimated by {tree}/tools/memory_estimator for {}: sequence {}, micro-batch {}, global \
         batch {}, pp {}, ep {}, cp {}, {} GPUs{}.",
        s.model_config.display(),
        s.sequence_length,
        s.micro_batch_size,
        s.global_batch_size,
        s.pp,
        s.ep,
        s.cp,
        s.world,
        if s.world_assumed { " (assumed)" } else { "" }
    )
}

/// `4.86 MiB`: saved tensors are MiB-sized.
fn mib_unit(bytes: i64) -> String {
    format!("{:.2} MiB", bytes as f64 / f64::from(1 << 20))
}

/// `+1.20 MiB`.
fn signed_mib_unit(bytes: i64) -> String {
    format!("{:+.2} MiB", bytes as f64 / f64::from(1 << 20))
}

/// The cells of one pair, sizes written with `size` and `signed`: estimated, measured,
/// difference, %, off.
fn pair_cells(pair: &Pair, size: fn(i64) -> String, signed: fn(i64) -> String) -> [String; 5] {
    [
        pair.estimated_bytes
            .map_or_else(|| NOT_ESTIMATED.to_owned(), size),
        pair.measured_bytes
            .map_or_else(|| NOT_MEASURED.to_owned(), size),
        pair.diff_bytes
            .map_or_else(|| NOT_APPLICABLE.to_owned(), signed),
        pair.diff_pct
            .map_or_else(|| NOT_APPLICABLE.to_owned(), |p| format!("{p:+.0}%")),
        match pair.off {
            Some(Direction::Over) => "over".to_owned(),
            Some(Direction::Under) => "under".to_owned(),
            None => String::new(),
        },
    ]
}

const EVENT_PAIR_COLUMNS: [(&str, bool); 5] = [
    ("estimated GiB", true),
    ("measured GiB", true),
    ("difference GiB", true),
    ("%", true),
    ("off", false),
];

const PAIR_COLUMNS: [(&str, bool); 5] = [
    ("estimated", true),
    ("measured", true),
    ("difference", true),
    ("%", true),
    ("off", false),
];

fn rank_blocks(r: &RankEstimate, ours: Option<&RankReport>, out: &mut Vec<Block>) {
    let c = &r.comparison;
    out.push(Block::Heading {
        level: 3,
        text: format!("pp rank {} (the prints of rank {})", c.pp_rank, r.rank),
    });
    out.push(Block::Text(format!("Verdict: {}.", c.verdict.line)));
    let p = &c.peak;
    let seen = p.print_at_estimator_peak.as_deref().map_or_else(
        || "which no print sees".to_owned(),
        |l| format!("seen by {l}"),
    );
    let measured = match (&p.measured_print, p.pair.measured_bytes) {
        (Some(label), Some(bytes)) => format!("the prints at {label} ({} GiB)", gib(bytes)),
        _ => "the prints: not measured".to_owned(),
    };
    out.push(Block::Text(format!(
        "Peak: the estimator at {} ({} GiB, {seen}); {measured}.",
        p.estimator_event,
        p.pair
            .estimated_bytes
            .map_or_else(|| NOT_ESTIMATED.to_owned(), gib),
    )));
    out.push(Block::Text(fit_line(&c.estimator_fit, ours)));
    for correction in &c.corrections {
        out.push(correction_block(correction));
    }
    let mut events = Table::new(
        &[
            [("print", false), ("estimator event", false)].as_slice(),
            &EVENT_PAIR_COLUMNS,
        ]
        .concat(),
    );
    for e in &c.events {
        let mut row = vec![
            e.print.clone().unwrap_or_else(|| NOT_APPLICABLE.to_owned()),
            e.estimator_event
                .clone()
                .unwrap_or_else(|| NOT_APPLICABLE.to_owned()),
        ];
        row.extend(pair_cells(&e.pair, gib, signed_gib));
        events.rows.push(row);
    }
    out.push(Block::Table(events));
    let mut components = Table::new(&[[("component", false)].as_slice(), &PAIR_COLUMNS].concat());
    for comp in &c.components {
        let mut row = vec![comp.label.clone()];
        row.extend(if comp.component == Component::SavedTensors {
            pair_cells(&comp.pair, mib_unit, signed_mib_unit)
        } else {
            pair_cells(&comp.pair, gib_unit, signed_gib_unit)
        });
        components.rows.push(row);
    }
    out.push(Block::Table(components));
    for note in &c.notes {
        out.push(Block::Text(format!(
            "Note: {}.",
            note.trim_end_matches('.')
        )));
    }
}

/// `0.06 GiB (64.00 MiB)`.
fn gib_and_mib(bytes: i64) -> String {
    format!("{} ({})", gib_unit(bytes), mib_unit(bytes))
}

/// The figures a correction changed, in a few words: the named ones as they are, the prints or
/// estimator events counted, with the first and the last.
fn figures_summary(c: &Correction) -> String {
    let named = [PEAK, DYNAMIC_AT_PEAK, NON_PYTORCH];
    let rows: Vec<&str> = c
        .figures
        .iter()
        .map(String::as_str)
        .filter(|f| !named.contains(f))
        .collect();
    let what = match c.side {
        Side::Measured => "print",
        Side::Estimated => "estimator event",
    };
    let mut parts: Vec<String> = Vec::new();
    if c.figures.iter().any(|f| f == PEAK) {
        parts.push("the peak".to_owned());
    }
    match rows.as_slice() {
        [] => {}
        [one] => parts.push(format!("the {what} {one}")),
        [first, .., last] => parts.push(format!("{} {what}s ({first} to {last})", rows.len())),
    }
    for name in [DYNAMIC_AT_PEAK, NON_PYTORCH] {
        if c.figures.iter().any(|f| f == name) {
            parts.push(name.to_owned());
        }
    }
    parts.join(", ")
}

/// One correction as a paragraph; one that could not be made as a warning.
fn correction_block(c: &Correction) -> Block {
    let side = match c.side {
        Side::Measured => "measured side",
        Side::Estimated => "estimated side",
    };
    let why = c.why.trim_end_matches('.');
    if c.applied {
        Block::Text(format!(
            "Corrected ({}, {side}): moved {} from {} to {}; changed: {}. Why: {why}.",
            c.what,
            gib_and_mib(c.bytes),
            c.from,
            c.to,
            figures_summary(c),
        ))
    } else {
        Block::Note {
            tone: Tone::Warning,
            text: format!(
                "Not corrected ({}, {side}): may skew the comparison by up to {}. Why: {why}.",
                c.what,
                gib_and_mib(c.bytes),
            ),
        }
    }
}
