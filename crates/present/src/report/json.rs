//! The report as JSON: indented for a person, or on one line for scripts.
//!
//! Contract: [`write`] writes exactly what `serde_json::to_writer` (or `to_writer_pretty`)
//! writes for the report, and a newline. On one line, the ranks of each run, nearly all of the
//! bytes, are rendered on all cores first ([`Report::try_map_ranks`] into raw JSON values) and
//! the document is then written around them: a rank's JSON on one line does not depend on where
//! it sits, so the document is the same byte for byte.

use std::io::{self, Write as _};

use rayon::prelude::*;
use serde_json::value::RawValue;

use memprints_log::Report;

/// Writes `report` as JSON and a newline (see the module doc).
pub fn write(report: &Report, pretty: bool, out: impl io::Write) -> io::Result<()> {
    let mut text = io::BufWriter::with_capacity(1 << 20, out);
    if pretty {
        serde_json::to_writer_pretty(&mut text, report)?;
    } else {
        let ahead: Report<Box<RawValue>> = report.try_map_ranks(|ranks| {
            ranks
                .par_iter()
                .map(serde_json::value::to_raw_value)
                .collect::<serde_json::Result<Vec<_>>>()
        })?;
        serde_json::to_writer(&mut text, &ahead)?;
    }
    text.write_all(b"\n")?;
    text.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use memprints_log::ReportBuilder;

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
        let mut pretty = Vec::new();
        write(&report, true, &mut pretty).unwrap();
        let mut want = serde_json::to_vec_pretty(&report).unwrap();
        want.push(b'\n');
        assert_eq!(pretty, want);
    }
}
