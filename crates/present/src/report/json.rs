//! The report as JSON: indented for a person, or on one line for scripts.
//!
//! Contract: [`write`] writes exactly what `serde_json::to_writer` (or `to_writer_pretty`)
//! writes for the report, and a newline. On one line, the ranks of each run, nearly all of the
//! bytes, are rendered on all cores first and set in place as they are reached
//! ([`serialize_ranks`], the `serialize_with` of [`Run::ranks`]): a rank's JSON on one line
//! does not depend on where it sits, so the document is the same byte for byte.
//!
//! [`Run::ranks`]: crate::report::schema::Run::ranks

use std::cell::RefCell;
use std::io::{self, Write as _};

use rayon::prelude::*;
use serde::Serializer;
use serde_json::value::RawValue;

use crate::report::Report;
use crate::report::schema::RankReport;

/// A run's ranks rendered ahead: the address of the run's ranks, and each rank's JSON.
type Ahead = (*const RankReport, Vec<Box<RawValue>>);

thread_local! {
    /// The ranks [`write`] rendered ahead, while it writes.
    static RENDERED: RefCell<Vec<Ahead>> = const { RefCell::new(Vec::new()) };
}

/// Writes `report` as JSON and a newline (see the module doc).
pub fn write(report: &Report, pretty: bool, out: impl io::Write) -> io::Result<()> {
    let mut text = io::BufWriter::with_capacity(1 << 20, out);
    if pretty {
        serde_json::to_writer_pretty(&mut text, report)?;
    } else {
        let rendered = report
            .runs
            .iter()
            .filter(|run| !run.ranks.is_empty())
            .map(|run| {
                let ranks = run
                    .ranks
                    .par_iter()
                    .map(serde_json::value::to_raw_value)
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((run.ranks.as_ptr(), ranks))
            })
            .collect::<serde_json::Result<Vec<_>>>()?;
        RENDERED.with(|r| *r.borrow_mut() = rendered);
        let written = serde_json::to_writer(&mut text, report);
        RENDERED.with(|r| r.borrow_mut().clear());
        written?;
    }
    text.write_all(b"\n")?;
    text.flush()
}

/// Serialises a run's ranks: as [`write`] rendered them ahead, when it did, else one by one.
pub fn serialize_ranks<S: Serializer>(ranks: &[RankReport], s: S) -> Result<S::Ok, S::Error> {
    let ahead = RENDERED.with(|r| {
        let mut r = r.borrow_mut();
        let at = r.iter().position(|(p, _)| *p == ranks.as_ptr())?;
        Some(r.swap_remove(at).1)
    });
    match ahead {
        Some(raw) if raw.len() == ranks.len() => s.collect_seq(raw),
        _ => s.collect_seq(ranks),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::ReportBuilder;

    /// A report of three runs of five ranks.
    fn report() -> Report {
        let mut b = ReportBuilder::new(None);
        for launch in 0..3 {
            for rank in 0..5 {
                b.line(format!("[rank={rank}] init_process_group | cuda_ctx=0.50 after_nccl_world=1.00 nccl_world_cost=0.50").as_bytes());
                b.line(format!("[rank={rank}] setup_model | weights: alloc={launch}.50 cached=0.10 non-pt=1.00").as_bytes());
                b.line(format!("[rank={rank} pp={rank}] Before pipeline: 1.{launch}0 GiB | alloc=1.{launch}0 cached=0.00 non-pt=1.00").as_bytes());
                b.line(format!("[rank={rank}]   layer0 after stage1: alloc=1.{rank}0").as_bytes());
            }
        }
        b.finish(vec!["a.log".into()])
    }

    #[test]
    fn one_line_json_is_what_serde_json_writes() {
        let report = report();
        assert_eq!(report.runs.len(), 3);
        assert!(report.runs.iter().all(|r| r.ranks.len() == 5));
        let mut ours = Vec::new();
        write(&report, false, &mut ours).unwrap();
        let mut want = serde_json::to_vec(&report).unwrap();
        want.push(b'\n');
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(want).unwrap()
        );
        // Nothing is left behind for a later serialisation.
        assert!(RENDERED.with(|r| r.borrow().is_empty()));
        let mut pretty = Vec::new();
        write(&report, true, &mut pretty).unwrap();
        let mut want = serde_json::to_vec_pretty(&report).unwrap();
        want.push(b'\n');
        assert_eq!(pretty, want);
    }
}
