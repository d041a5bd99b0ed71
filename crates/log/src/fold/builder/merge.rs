//! One file's fold, made on its own by the worker that scanned it, merged into the report's
//! fold in input order, as if the file's items had been fed to it one by one.
//!
//! Why the result is the same: what one file's items read of the fold before them is the
//! progress and the state of the ranks they print for in the run they go on (whether a setup
//! print relaunches, what a print is compared with), and the step figures of that run. The
//! rest a file reads is its own: whether its step lines go up, whether it logged steps before
//! a setup print ([`super::runs`]). So a file whose first run prints for no rank that the run
//! it goes on already has folds alike on its own; its first run's step lines are folded again
//! into the run's figures, and its counts add up. Its ranks are closed on the worker (the
//! costly part of a report: reading the kept passes in detail), which is right as long as no
//! later file goes on with them, and a later file that does is itself such an overlap: either
//! way the merge says [`Overlap`] and the caller folds the files one after the other instead.

use super::{
    BTreeSet, ReportBuilder, RunState, RunStats, Stats, UNPARSED_EXAMPLES, backed, extend_training,
};

/// A file printed for a rank that the run it goes on already has (or went on with a rank
/// closed when its own file was merged): its fold on its own is not the one wanted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap;

impl ReportBuilder {
    /// A builder for one file of several, folded alone as input 0 ([`Self::merge`] renumbers
    /// it), that launches or not ([`Self::begin_source_launching`]).
    pub fn for_one_file(only: Option<BTreeSet<u32>>, launches: bool) -> Self {
        let mut builder = ReportBuilder::new(only);
        builder.begin_source_launching(0, launches);
        builder
    }

    /// Closes every rank fed so far, as [`Self::finish`] would (on the worker, where the
    /// memory of the raw prints is freed for the next file's; their text and shapes are the
    /// worker's shared copies, [`super::super::intern::text`]), and lets go of the input's
    /// bytes ([`crate::scan::Sink::backing`]): nothing reads them after.
    pub fn close_ranks(&mut self) {
        let map = self.map.take();
        for run in &mut self.runs {
            for state in run.ranks.values_mut().filter(|s| !s.closed) {
                state.close(backed(&map));
                state.settle();
                state.closed = true;
            }
        }
    }

    /// Merges `part` (a file folded by a [`Self::for_one_file`] builder, its ranks closed) as
    /// input `index`, the next one; `Err(Overlap)` (and this builder left half merged) when
    /// the file goes on with a rank of the current run (see the module doc).
    pub fn merge(&mut self, part: ReportBuilder, index: usize) -> Result<(), Overlap> {
        let ReportBuilder { runs, stats, .. } = part;
        let mut runs = runs.into_iter();
        if let Some(mut first) = runs.next() {
            renumber(&mut first, index);
            // Where the file's items go first ([`Self::begin_source_launching`]): a file that
            // launches (its first run is marked so, [`Self::for_one_file`]) begins a run of its
            // own after a run that has a launching file.
            match self.runs.last_mut() {
                Some(run) if !(first.launched && run.launched) => {
                    let overlap = first
                        .ranks
                        .ranks()
                        .chain(first.progress.ranks())
                        .any(|r| run.ranks.get(r).is_some() || run.progress.get(r).is_some());
                    if overlap {
                        return Err(Overlap);
                    }
                    absorb(run, first);
                }
                _ => self.runs.push(first),
            }
        }
        for mut run in runs {
            renumber(&mut run, index);
            self.runs.push(run);
        }
        // Every field named, so that one added is not forgotten here.
        let Stats {
            lines_read,
            memory_lines,
            unparsed_memory_lines,
            unparsed_examples,
            detail_prints_not_read,
            long_lines,
            cut_bytes,
        } = stats;
        let all = &mut self.stats;
        all.lines_read += lines_read;
        all.memory_lines += memory_lines;
        all.unparsed_memory_lines += unparsed_memory_lines;
        add_examples(&mut all.unparsed_examples, unparsed_examples);
        all.detail_prints_not_read += detail_prints_not_read;
        all.long_lines += long_lines;
        all.cut_bytes += cut_bytes;
        Ok(())
    }
}

/// Makes input 0 of `run`, folded alone, input `index`.
fn renumber(run: &mut RunState, index: usize) {
    let at = |s: &mut usize| *s = index;
    run.sources = std::mem::take(&mut run.sources)
        .into_iter()
        .map(|_| index)
        .collect();
    run.noted_source.as_mut().map(at);
    run.steps_source.as_mut().map(at);
    run.step_parts.iter_mut().for_each(|p| p.source = index);
    for state in run.ranks.values_mut() {
        state.source = index;
        for snapshot in &mut state.report.snapshots {
            snapshot.source = index;
        }
    }
}

/// Adds `part`, the first run of a file folded alone, to `run`, the run the file goes on,
/// which has none of its ranks.
fn absorb(run: &mut RunState, part: RunState) {
    let RunState {
        ranks,
        progress,
        stats,
        training,
        oom,
        oom_ranks,
        exception,
        sources,
        noted_source,
        launched,
        steps_source,
        step_parts,
    } = part;
    for (rank, state) in ranks.into_entries() {
        run.ranks.get_or_insert_with(rank, || state);
    }
    for (rank, progress) in progress.into_entries() {
        run.progress.get_or_insert_with(rank, || progress);
    }
    add_run_stats(&mut run.stats, stats);
    // The file's step lines go on from the run's, as folding them after the run's would.
    match (&mut run.training, training) {
        (Some(t), Some(more)) => extend_training(t, &more),
        (t, more) => *t = t.take().or(more),
    }
    // The first OOM line's figures, and every line counted.
    if let Some(more) = oom {
        if let Some(kept) = run.oom.as_mut() {
            kept.lines += more.lines;
        } else {
            run.oom = Some(more);
        }
    }
    run.oom_ranks.extend(oom_ranks);
    if exception.is_some() {
        run.exception = exception;
    }
    run.sources.extend(sources);
    run.noted_source = noted_source.or(run.noted_source);
    run.launched |= launched;
    run.steps_source = steps_source.or(run.steps_source);
    run.step_parts.extend(step_parts);
}

fn add_run_stats(stats: &mut RunStats, more: RunStats) {
    let RunStats {
        memory_lines,
        unparsed_memory_lines,
        unparsed_examples,
        detail_prints_not_read,
    } = more;
    stats.memory_lines += memory_lines;
    stats.unparsed_memory_lines += unparsed_memory_lines;
    add_examples(&mut stats.unparsed_examples, unparsed_examples);
    stats.detail_prints_not_read += detail_prints_not_read;
}

/// The first few unparsed prints of all, those before first ([`super::count_unparsed`]).
fn add_examples(examples: &mut Vec<String>, more: Vec<String>) {
    let room = UNPARSED_EXAMPLES.saturating_sub(examples.len());
    examples.extend(more.into_iter().take(room));
}
