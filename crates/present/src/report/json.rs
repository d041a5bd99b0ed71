//! The report as JSON: indented for a person, or on one line for scripts.
//!
//! Contract: [`write()`] writes exactly what `serde_json::to_writer` (or `to_writer_pretty`)
//! writes for the report, and a newline. On one line, the ranks of each run, nearly all of the
//! bytes, are rendered on all cores, [`BATCH`] ranks at a time, into raw JSON values, the next
//! batch while the writer writes one ([`Report::try_map_ranks`] into [`Batched`]), and the
//! document is written around them: a rank's JSON on one line does not depend on where it
//! sits, so the document is the same byte for byte, and what is held at once is two batches,
//! not the whole output (a run of 10,000 ranks is hundreds of MB of JSON). [`schema`] is the
//! JSON Schema of that output, generated from the report's types (`schema/report.schema.json`).

use std::cell::RefCell;
use std::io::{self, Write as _};
use std::sync::mpsc;

use rayon::prelude::*;
use serde_json::value::RawValue;

use memprints_log::Report;
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
        std::thread::scope(|scope| -> io::Result<()> {
            // Rendezvous: the next batch waits, rendered, for the writer to take it.
            let (tx, rx) = mpsc::sync_channel(0);
            scope.spawn(move || render_batches(report, &tx));
            // Dropped before the scope waits for the renderer: a write that fails ends it.
            let batches = Batches {
                next: rx,
                rendered: RefCell::new(Vec::new()),
            };
            let ahead = report.try_map_ranks(|ranks| {
                Ok::<_, io::Error>(
                    (0..ranks.len())
                        .map(|index| Batched {
                            batches: &batches,
                            index,
                        })
                        .collect(),
                )
            })?;
            serde_json::to_writer(&mut text, &ahead)?;
            Ok(())
        })?;
    }
    text.write_all(b"\n")?;
    text.flush()
}

/// How many ranks' JSON is rendered at once, on all cores: few enough that the first batch
/// (which the writer waits for) is soon there and two held batches are little memory, enough to
/// keep every core busy.
const BATCH: usize = 64;

/// A batch of one run's ranks as raw JSON: ranks `k·BATCH..` of the run, for some `k`.
type Rendered = Vec<Box<RawValue>>;

/// Renders every run's ranks, [`BATCH`] at a time on all cores, in the order the writer takes
/// them, and hands each batch over; stops when the writer is gone.
fn render_batches(report: &Report, tx: &mpsc::SyncSender<serde_json::Result<Rendered>>) {
    for r in &report.runs {
        for start in (0..r.ranks.len()).step_by(BATCH) {
            let end = (start + BATCH).min(r.ranks.len());
            let json = r.ranks[start..end]
                .par_iter()
                .map(serde_json::value::to_raw_value)
                .collect::<serde_json::Result<Vec<_>>>();
            if tx.send(json).is_err() {
                return;
            }
        }
    }
}

/// The ranks' JSON, batch after batch, as the writer asks for them (in order).
struct Batches {
    next: mpsc::Receiver<serde_json::Result<Rendered>>,
    /// The batch being written.
    rendered: RefCell<Rendered>,
}

/// Rank `index` of its run, written as its batch's raw JSON. The writer asks for the ranks in
/// the order they were rendered, so a rank that starts a batch (`index` a multiple of
/// [`BATCH`], each run's first among them) is the one to take the next batch.
struct Batched<'a> {
    batches: &'a Batches,
    index: usize,
}

impl Serialize for Batched<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut rendered = self.batches.rendered.borrow_mut();
        if self.index.is_multiple_of(BATCH) {
            // The batch written goes before the next is taken: two are held at a time, this
            // one and the one being rendered.
            *rendered = Vec::new();
            *rendered = self
                .batches
                .next
                .recv()
                .map_err(|_| serde::ser::Error::custom("the rendering of the ranks stopped"))?
                .map_err(serde::ser::Error::custom)?;
        }
        rendered[self.index % BATCH].serialize(serializer)
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
    fn ranks_of_many_batches_and_runs_are_written_as_serde_json_writes_them() {
        let mut b = ReportBuilder::new(None);
        for launch in 0..2 {
            for rank in 0..(BATCH as u32 * 2 + 3) {
                b.line(format!("[rank={rank}] init_process_group | cuda_ctx=0.50 after_nccl_world=1.00 nccl_world_cost=0.50").as_bytes());
                b.line(format!("[rank={rank} pp=0] Before pipeline: 1.{launch}0 GiB | alloc=1.{launch}0 cached=0.00 non-pt=1.00").as_bytes());
            }
        }
        let report = b.finish(vec!["a.log".into()]);
        assert_eq!(report.runs.len(), 2);
        let mut ours = Vec::new();
        write(&report, false, &mut ours).unwrap();
        let mut want = serde_json::to_vec(&report).unwrap();
        want.push(b'\n');
        assert!(ours == want);
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
