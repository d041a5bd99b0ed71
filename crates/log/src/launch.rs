//! Which launch of which log a run of the report is, for what the report's scan does not keep
//! per run (PithTrain's config line, its `Load checkpoint:` line), read per log and per launch.
//!
//! Contract: [`launch_of`] gives run `n` the k-th launch of its first source when the run is
//! that source's k-th run and the source has that many launches, else the first launch of the
//! first of its sources that has one; `None` when none has.

use crate::schema::Report;

/// The source and the index of run `n`'s launch in it; `launches(source)`: how many launches
/// (config lines) that log holds.
pub fn launch_of(
    report: &Report,
    n: usize,
    launches: impl Fn(&str) -> usize,
) -> Option<(&str, usize)> {
    let run = &report.runs[n];
    let first = run.sources.first()?;
    let earlier = report.runs[..n]
        .iter()
        .filter(|r| r.sources.first() == Some(first))
        .count();
    if earlier < launches(first) {
        return Some((first, earlier));
    }
    run.sources
        .iter()
        .find(|s| launches(s) > 0)
        .map(|s| (s.as_str(), 0))
}
