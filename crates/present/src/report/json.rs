//! The report as JSON: indented for a person, or on one line for scripts.
//!
//! Contract: [`write()`] writes exactly what `serde_json::to_writer` (or `to_writer_pretty`)
//! writes for the report, and a newline. On one line, the ranks of each run, nearly all of the
//! bytes, are rendered on all cores, [`BATCH`] ranks at a time, into raw JSON values as the
//! writer reaches them ([`Report::try_map_ranks`] into [`Batched`]), and the document is
//! written around them: a rank's JSON on one line does not depend on where it sits, so the
//! document is the same byte for byte, and what is held at once is one batch, not the whole
//! output (a run of 10,000 ranks is hundreds of MB of JSON). [`schema`] is the JSON Schema of
//! that output, generated from the report's types (`schema/report.schema.json`).

use std::cell::RefCell;
use std::io::{self, Write as _};

use rayon::prelude::*;
use serde_json::value::RawValue;

use memprints_log::Report;
use memprints_log::schema::RankReport;
use serde::{Serialize, Serializer};

use crate::json_schema;

/// What the report's JSON is, for the schema's readers; the types' doc comments say the rest.
const DESCRIPTION: &str = "Output of `memprints report --format json`. All sizes are integers in \
    bytes, converted from the printed GiB (×1024³) or MB (×1024², really MiB) and rounded half \
    away from zero, or printed as bytes. A figure nobody measured is null, never 0. Fields are \
    never removed within one schema_version; new optional fields may appear. Version 3: every \
    pipeline pass of a rank (one per profiled step) is summarised under `passes`, and its \
    `pipeline`, `layers`, `experts` and `saved_tensors` hold the passes kept in detail (the \
    first, the highest, the last), each entry naming its `pass`. Version 2 (memprints 0.1, \
    reporttruth): one entry per run under `runs`; version 1 had one run's fields at the top \
    level.";

/// The JSON Schema of what [`write()`] writes (`schema/report.schema.json`).
pub fn schema() -> schemars::Schema {
    let root = json_schema::generator().into_root_schema_for::<Report>();
    json_schema::document(root, "report.schema.json", "memprints report", DESCRIPTION)
}

/// Writes `report` as JSON and a newline (see the module doc).
pub fn write(report: &Report, pretty: bool, out: impl io::Write) -> io::Result<()> {
    let mut text = io::BufWriter::with_capacity(1 << 20, out);
    if pretty {
        serde_json::to_writer_pretty(&mut text, report)?;
    } else {
        let runs: Vec<Batches> = report.runs.iter().map(|r| Batches::new(&r.ranks)).collect();
        let mut run = 0;
        let ahead = report.try_map_ranks(|ranks| {
            let batches = &runs[run];
            run += 1;
            Ok::<_, io::Error>(
                (0..ranks.len())
                    .map(|index| Batched { batches, index })
                    .collect(),
            )
        })?;
        serde_json::to_writer(&mut text, &ahead)?;
    }
    text.write_all(b"\n")?;
    text.flush()
}

/// How many ranks' JSON is rendered at once, on all cores.
const BATCH: usize = 256;

/// One run's ranks, rendered a batch at a time as the writer asks for them (in order).
struct Batches<'a> {
    ranks: &'a [RankReport],
    /// The first rank of the batch rendered, and its ranks' JSON.
    rendered: RefCell<(usize, Vec<Box<RawValue>>)>,
}

impl<'a> Batches<'a> {
    fn new(ranks: &'a [RankReport]) -> Self {
        Batches {
            ranks,
            rendered: RefCell::new((0, Vec::new())),
        }
    }
}

/// Rank `index` of a run, written as its batch's raw JSON.
struct Batched<'a> {
    batches: &'a Batches<'a>,
    index: usize,
}

impl Serialize for Batched<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut rendered = self.batches.rendered.borrow_mut();
        let (start, json) = &mut *rendered;
        if !(*start..*start + json.len()).contains(&self.index) {
            // The previous batch goes before the next is made: one is held at a time.
            json.clear();
            let end = (self.index + BATCH).min(self.batches.ranks.len());
            *json = self.batches.ranks[self.index..end]
                .par_iter()
                .map(serde_json::value::to_raw_value)
                .collect::<serde_json::Result<Vec<_>>>()
                .map_err(serde::ser::Error::custom)?;
            *start = self.index;
        }
        json[self.index - *start].serialize(serializer)
    }
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
