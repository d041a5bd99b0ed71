//! The document's "what to change" and "what-if" blocks (see `memprints_log::whatif`).
//!
//! Contract: [`what_to_change_section`] adds the ranked actions of a run that has a pipeline
//! peak, or one line saying that none would save memory; [`top_actions`] gives the first few as
//! one line each, for a summary. [`what_if_section`] adds nothing without `--what-if`; when no
//! prediction could be made it adds one warning with the reason. Every predicted figure is
//! called a prediction.

use crate::numbers::{gib, gib_unit, signed_gib, signed_gib_unit};
use crate::table::Table;
use memprints_log::schema::Run;
use memprints_log::whatif::{Action, Settings, WhatIfSection};

use super::block::{Block, NOT_MEASURED, Tone};

/// One action as a line: `halve the micro-batch (2 → 1): saves 1.20 GiB — set
/// training.micro_batch_size=1 (keep …)`.
pub fn action_line(a: &Action) -> String {
    format!(
        "{}: saves {} — set {} ({})",
        a.action,
        gib_unit(a.saves_bytes),
        a.setting,
        a.cost
    )
}

/// The first `n` actions of `run`, largest saving first, one line each; empty when none would
/// save memory or the run has no pipeline peak.
pub fn top_actions(run: &Run, n: usize) -> Vec<String> {
    run.what_to_change
        .as_ref()
        .map(|w| w.actions.iter().take(n).map(action_line).collect())
        .unwrap_or_default()
}

/// Adds the ranked list of what to change.
pub fn what_to_change_section(run: &Run, out: &mut Vec<Block>) {
    let Some(w) = &run.what_to_change else {
        return;
    };
    out.push(Block::Heading {
        level: 2,
        text: "What to change".to_owned(),
    });
    if w.actions.is_empty() {
        out.push(Block::Text(format!(
            "No change memprints can compute would lower rank {}'s {} GiB at the steady-state \
             peak.",
            w.worst_rank,
            gib(w.worst_device_bytes)
        )));
    } else {
        out.push(Block::Text(format!(
            "Predicted savings on rank {} (the worst: {} GiB on the device at the steady-state \
             peak), by the what-if engine; predictions, not measurements.",
            w.worst_rank,
            gib(w.worst_device_bytes)
        )));
        let mut table = Table::new(&[
            ("#", true),
            ("action", false),
            ("saves", true),
            ("device after", true),
            ("setting", false),
            ("also", false),
        ]);
        for (i, a) in w.actions.iter().enumerate() {
            table.rows.push(vec![
                (i + 1).to_string(),
                a.action.clone(),
                gib_unit(a.saves_bytes),
                gib_unit(a.predicted_device_bytes),
                a.setting.clone(),
                a.cost.clone(),
            ]);
        }
        out.push(Block::Table(table));
    }
    if !w.not_offered.is_empty() {
        out.push(Block::Text(format!(
            "Not offered: {}.",
            w.not_offered.join("; ")
        )));
    }
}

fn settings_text(s: &Settings) -> String {
    format!(
        "sequence-length {}, micro-batch-size {}, global-batch-size {}, pp {}, ep {}, cp {}",
        s.sequence_length,
        s.micro_batch_size,
        s.global_batch_size,
        s.pipeline_parallel_size,
        s.expert_parallel_size,
        s.context_parallel_size
    )
}

/// Adds the `--what-if` prediction, if one was asked for.
pub fn what_if_section(run: &Run, out: &mut Vec<Block>) {
    let Some(w) = &run.what_if else {
        return;
    };
    out.push(Block::Heading {
        level: 2,
        text: format!("What if {}", w.settings.changes.join(", ")),
    });
    if let Some(error) = &w.error {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!("No prediction: {error}."),
        });
        return;
    }
    settings_lines(w, out);
    for r in &w.ranks {
        out.push(Block::Heading {
            level: 3,
            text: format!(
                "rank {}{}: steady-state peak {} → {} GiB predicted ({} GiB); device {} → {} GiB",
                r.rank,
                r.pp.map_or_else(String::new, |p| format!(" (pp {p})")),
                gib(r.peak.measured_bytes),
                gib(r.peak.predicted_bytes),
                signed_gib(r.peak.predicted_bytes - r.peak.measured_bytes),
                gib(r.device.measured_bytes),
                gib(r.device.predicted_bytes),
            ),
        });
        if let (Some(capacity), Some(headroom), Some(status)) = (
            r.capacity_bytes,
            r.predicted_headroom_bytes,
            r.predicted_status,
        ) {
            out.push(Block::Text(format!(
                "Predicted device total {} on a GPU of {}: {} (headroom {}).",
                gib_unit(r.device.predicted_bytes),
                gib_unit(capacity),
                super::doc::fit_word(status),
                signed_gib_unit(headroom),
            )));
        }
        let mut table = Table::new(&[
            ("component", false),
            ("measured", true),
            ("predicted", true),
            ("rule", false),
            ("measured from", false),
        ]);
        for c in &r.components {
            let name = if c.in_peak {
                c.name.to_owned()
            } else {
                format!("{} (device only)", c.name)
            };
            table.rows.push(vec![
                name,
                c.measured_bytes
                    .map_or_else(|| NOT_MEASURED.to_owned(), gib_unit),
                c.predicted_bytes
                    .map_or_else(|| NOT_MEASURED.to_owned(), gib_unit),
                c.rule.clone(),
                c.measured_from.clone(),
            ]);
        }
        out.push(Block::Table(table));
    }
    for note in &w.notes {
        out.push(Block::Text(format!("Note: {note}.")));
    }
}

fn settings_lines(w: &WhatIfSection, out: &mut Vec<Block>) {
    if let (Some(from), Some(to)) = (&w.settings.measured, &w.settings.predicted) {
        out.push(Block::Text(format!(
            "Measured at {}; predicted at {}. {}.",
            settings_text(from),
            settings_text(to),
            w.method
        )));
    }
}
