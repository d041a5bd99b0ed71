//! The document's "memory seen three ways" section: the prints' peak, the step-0 snapshots and
//! PithTrain's step lines side by side, with a sentence on what each gap means
//! ([`memprints_log::joined`] explains what each figure covers).
//!
//! Contract: [`memory_view`] adds nothing when the run has no pipeline print. A gap within
//! rounding is said to be within it, not read as a finding: the prints and the step lines print
//! GiB with two decimals, so a printed figure is up to half of 0.01 GiB from the truth, and two
//! printed figures up to 0.01 GiB from each other; a snapshot's figures are exact.

use crate::numbers::gib;
use crate::table::Table;
use memprints_log::schema::{Run, SnapshotView, StepsView};

use super::block::{Block, NOT_APPLICABLE, Tone};

const MIB: f64 = (1u64 << 20) as f64;
/// How far apart two figures printed as GiB with two decimals (prints, step lines) can be
/// although the bytes they stand for are equal.
const ROUNDING: i64 = (1 << 30) / 100;
/// How far one figure printed as GiB with two decimals can be from the exact bytes.
const HALF_ROUNDING: i64 = ROUNDING / 2;

fn mib(bytes: i64) -> String {
    format!("{:.2} MiB", bytes as f64 / MIB)
}

/// Adds the section for `run`.
pub fn memory_view(run: &Run, out: &mut Vec<Block>) {
    let view = &run.memory;
    let Some(prints) = &view.prints_peak else {
        return;
    };
    out.push(Block::Heading {
        level: 2,
        text: "Memory seen three ways".to_owned(),
    });
    let mut table = Table::new(&[
        ("source", false),
        ("what it sees", false),
        ("peak GiB", true),
        ("where", false),
    ]);
    let passes = run.ranks.iter().map(|r| r.passes.len()).max().unwrap_or(0);
    let sees = if passes > 1 {
        format!("allocated at the schedule points of {passes} profiled steps' pipelines")
    } else {
        "allocated at the schedule points of the first step's pipeline".to_owned()
    };
    table.rows.push(vec![
        "memory prints".to_owned(),
        sees,
        gib(prints.allocated),
        format!("rank {}, {}", prints.rank, prints.label),
    ]);
    for s in &view.snapshots {
        if let Some(peak) = s.peak_allocated {
            table.rows.push(vec![
                snapshot_name(s),
                "every allocation of the first step's model.step()".to_owned(),
                gib(peak),
                mib(peak),
            ]);
        }
    }
    if let Some(steps) = &view.steps {
        step_rows(steps, &mut table);
    }
    out.push(Block::Table(table));
    let failed: Vec<&SnapshotView> = view
        .snapshots
        .iter()
        .filter(|s| s.error.is_some())
        .collect();
    if failed.len() > SNAPSHOT_WARNINGS {
        // One warning for many ranks' snapshots (a folder of per-rank logs whose snapshots
        // were not copied along), not one each.
        let first = failed[0];
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!(
                "{} of the run's {} memory snapshots were not read; the first, the {}: {}.",
                failed.len(),
                view.snapshots.len(),
                snapshot_name(first),
                first.error.as_deref().unwrap_or_default(),
            ),
        });
    }
    for s in &view.snapshots {
        if s.error.is_none() || failed.len() <= SNAPSHOT_WARNINGS {
            snapshot_blocks(s, out);
        }
    }
    if view.snapshots.is_empty() {
        out.push(Block::Text(
            "No memory snapshot: the log names none (group 7 writes one after the first step) \
             and none was given with --snapshots."
                .to_owned(),
        ));
    }
    if let Some(steps) = &view.steps {
        // Every print of the run is one rank's: no other rank to explain a gap with.
        let one_rank = matches!(&run.ranks[..], [r] if r.memory_lines == run.stats.memory_lines);
        step_blocks(
            steps,
            view.snapshots.iter().find_map(|s| s.peak_allocated),
            one_rank,
            out,
        );
    }
}

/// How many snapshots that were not read get a warning each; more get one for all.
const SNAPSHOT_WARNINGS: usize = 3;

fn snapshot_name(s: &SnapshotView) -> String {
    match s.rank {
        Some(rank) => format!("memory snapshot, rank {rank}"),
        None => "memory snapshot".to_owned(),
    }
}

fn step_rows(steps: &StepsView, table: &mut Table) {
    table.rows.push(vec![
        format!(
            "PithTrain's step line of the first step (step {})",
            steps.profiled_step
        ),
        "max_memory_allocated over the whole train_step, highest rank".to_owned(),
        steps
            .profiled_step_peak
            .map_or_else(|| "not printed".to_owned(), gib),
        NOT_APPLICABLE.to_owned(),
    ]);
    if let (Some(peak), Some(at)) = (steps.peak, steps.peak_step)
        && at != steps.profiled_step
    {
        table.rows.push(vec![
            "PithTrain's step lines, highest".to_owned(),
            "the same, over every step logged".to_owned(),
            gib(peak),
            format!("step {at}"),
        ]);
    }
}

fn snapshot_blocks(s: &SnapshotView, out: &mut Vec<Block>) {
    let who = snapshot_name(s);
    if let Some(error) = &s.error {
        out.push(Block::Note {
            tone: Tone::Warning,
            text: format!("The {who}: {error}."),
        });
        return;
    }
    let (Some(peak), Some(path)) = (s.peak_allocated, &s.path) else {
        return;
    };
    let when = if s.after_oom {
        "written after the out-of-memory error"
    } else {
        "of the first step"
    };
    let mut text = format!("The {who} ({path}, {when}) peaks at {}", mib(peak));
    match (s.gap_to_prints, s.prints_peak) {
        (Some(gap), Some(prints)) if gap.abs() <= HALF_ROUNDING => {
            text += &format!(
                ", the rank's highest print ({} GiB) within the prints' rounding",
                gib(prints)
            );
        }
        (Some(gap), Some(prints)) => {
            let side = if gap > 0 { "above" } else { "below" };
            text += &format!(
                ", {} {side} the rank's highest print ({} GiB",
                mib(gap.abs()),
                gib(prints)
            );
            if gap.abs() <= ROUNDING {
                text += &format!(
                    ", of which up to {} may be its rounding",
                    mib(HALF_ROUNDING)
                );
            }
            text.push(')');
            if gap > 0 {
                text += ": memory allocated and freed again between two prints, which the \
                         prints cannot see";
            }
        }
        _ => text += "; this rank printed no pipeline figure to set it beside",
    }
    text.push('.');
    if let (Some(freed), Some(end)) = (s.freed_after_peak, s.allocated_at_end) {
        text += &format!(
            " Of the peak, {} was freed again before the step ended ({} still allocated when the \
             snapshot was taken).",
            mib(freed),
            mib(end)
        );
    }
    if let Some(pairing) = &s.pairing {
        let mut chars = pairing.chars();
        if let Some(first) = chars.next() {
            text += &format!(" {}{}.", first.to_uppercase(), chars.as_str());
        }
    }
    out.push(Block::Text(text));
    if !s.top_stacks.is_empty() {
        let mut t = Table::new(&[
            ("held at the snapshot's peak by", false),
            ("asked for by", false),
            ("MiB", true),
            ("blocks", true),
        ]);
        for g in &s.top_stacks {
            t.rows.push(vec![
                g.owner.clone(),
                g.frame.clone(),
                format!("{:.2}", g.bytes as f64 / MIB),
                g.count.to_string(),
            ]);
        }
        out.push(Block::Table(t));
    }
}

/// `one_rank`: the run's prints are all one rank's, so no gap is put down to another rank.
fn step_blocks(
    steps: &StepsView,
    snapshot_peak: Option<i64>,
    one_rank: bool,
    out: &mut Vec<Block>,
) {
    let every_rank = if one_rank { "" } else { " on every rank" };
    let or_another_rank = if one_rank { "" } else { " or on another rank" };
    let Some(peak) = steps.profiled_step_peak else {
        return;
    };
    let n = steps.profiled_step;
    let mut text = format!(
        "PithTrain's step line of the first step (step {n}), the step the prints measured, reports {} GiB",
        gib(peak)
    );
    match steps.unseen_by_prints {
        Some(gap) if gap.abs() <= ROUNDING => {
            text += ", the prints' peak within rounding.";
        }
        Some(gap) if gap > 0 => {
            text += &format!(
                ", {} GiB above the prints' peak: torch.cuda.max_memory_allocated() covers the \
                 whole train_step{every_rank} (allocations between prints, gradient clipping \
                 and the optimizer step), the prints only their schedule points",
                gib(gap)
            );
            if let Some(snap) = snapshot_peak {
                let outside = peak - snap;
                text += &if outside.abs() <= HALF_ROUNDING {
                    "; the snapshot of the pipeline accounts for all of it within rounding"
                        .to_owned()
                } else if outside > 0 {
                    format!(
                        "; {} GiB of it lies beyond the snapshot of the pipeline too: outside \
                         model.step(){or_another_rank}",
                        gib(outside)
                    )
                } else {
                    "; the snapshot's rank went higher than the step line says, which the step \
                     line's rounding cannot explain"
                        .to_owned()
                };
            }
            text.push('.');
        }
        Some(gap) => {
            text += &format!(", {} GiB below the prints' peak.", gib(-gap));
        }
        None => text.push('.'),
    }
    out.push(Block::Text(text));
    if let (Some(above), Some(at), Some(top)) =
        (steps.later_steps_above, steps.peak_step, steps.peak)
    {
        out.push(Block::Text(if above > ROUNDING {
            format!(
                "A later step peaks higher: {} GiB at step {at}, {} GiB above step {n}. The prints \
                 saw only step {n}; later steps also hold what the first optimizer step created \
                 (its state) and can reach peaks the prints never measured.",
                gib(top),
                gib(above)
            )
        } else {
            format!("No later step peaks higher than step {n} beyond rounding.")
        }));
    }
}
