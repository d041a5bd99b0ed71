//! The reference scanner: one line at a time through `BufRead`, the contract of [`super`] and
//! nothing else. The fast engines ([`super::Streamed`], [`super::Serial`], [`super::Chunked`],
//! [`super::many`]) are tested against it (`tests/report_scan.rs`).
//!
//! Each line is read to its `\n` (at most [`LINE_CAP`] of its bytes kept, the rest counted);
//! its needles are those its kept bytes hold ([`super::needles`]). In [`Mode::FoldSteps`] a
//! step line is read with [`step_and_oom::parse_step_ascii`] into the pending [`StepRun`],
//! handed over before the next item (or at the end); a plain print line is read with
//! [`super::lines::pre_read`]. Memory: the reader's buffer and one line of at most
//! [`LINE_CAP`] bytes.

use std::io::{self, BufRead, BufReader};

use super::lines::pre_read;
use super::{
    Input, Item, LINE_CAP, Mode, Needles, RANK_BIT, STEP_BIT, ScanCounts, Scanner, Sink, needles,
};
use crate::step_and_oom::{self, StepRun};

/// The line-by-line scanner.
#[derive(Debug, Clone, Copy, Default)]
pub struct LineByLine;

impl Scanner for LineByLine {
    fn scan(
        &self,
        mut input: Input<'_>,
        mode: Mode,
        sink: &mut dyn Sink,
    ) -> io::Result<ScanCounts> {
        let mut reader = BufReader::with_capacity(64 * 1024, input.reader());
        let mut counts = ScanCounts::default();
        let mut line = Vec::with_capacity(1024);
        let mut steps: Option<StepRun> = None;
        while read_line(&mut reader, &mut line, &mut counts)? {
            let found = needles(&line);
            if found != 0 {
                one_line(&line, found, mode, &mut steps, sink);
            }
        }
        if let Some(run) = steps {
            sink.item(Item::Steps(&run));
        }
        Ok(counts)
    }
}

/// Reads the next line into `line` without its `\n`, at most [`LINE_CAP`] bytes of it, and
/// counts it; `false` at the end of the input.
fn read_line(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    counts: &mut ScanCounts,
) -> io::Result<bool> {
    line.clear();
    let mut len = 0usize;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            if len == 0 {
                return Ok(false);
            }
            break;
        }
        let (part, used, ended) = match memchr::memchr(b'\n', buf) {
            Some(p) => (&buf[..p], p + 1, true),
            None => (buf, buf.len(), false),
        };
        let room = LINE_CAP.saturating_sub(line.len());
        line.extend_from_slice(&part[..part.len().min(room)]);
        len += part.len();
        reader.consume(used);
        if ended {
            break;
        }
    }
    counts.lines += 1;
    if len > LINE_CAP {
        counts.long_lines += 1;
        counts.cut_bytes += (len - LINE_CAP) as u64;
    }
    Ok(true)
}

/// Hands one line holding the needles `found` over as the contract says.
fn one_line(
    line: &[u8],
    found: Needles,
    mode: Mode,
    steps: &mut Option<StepRun>,
    sink: &mut dyn Sink,
) {
    if mode == Mode::FoldSteps && found == STEP_BIT {
        let text = line.strip_suffix(b"\r").unwrap_or(line);
        if text.is_ascii() && memchr::memchr(0x1b, text).is_none() {
            if let Some(step) = step_and_oom::parse_step_ascii(text) {
                match steps {
                    // A step number that does not go up is a new launch's: a stretch of its own.
                    Some(run) if step.step > run.last_step => run.add(&step),
                    Some(run) => {
                        sink.item(Item::Steps(run));
                        *steps = Some(StepRun::new(step.line()));
                    }
                    None => *steps = Some(StepRun::new(step.line())),
                }
            }
            return;
        }
    }
    if let Some(run) = steps.take() {
        sink.item(Item::Steps(&run));
    }
    if mode == Mode::FoldSteps
        && found == RANK_BIT
        && let Some(read) = pre_read(line)
    {
        sink.item(Item::Print(read));
        return;
    }
    sink.item(Item::Line(line, found));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(text: &[u8], mode: Mode) -> (Vec<String>, ScanCounts) {
        let mut seen = Vec::new();
        let mut reader = text;
        let counts = LineByLine
            .scan(Input::Reader(&mut reader), mode, &mut |item: Item<'_>| {
                seen.push(format!("{item:?}"))
            })
            .unwrap();
        (seen, counts)
    }

    #[test]
    fn a_cut_off_last_line_counts_and_an_empty_input_has_no_lines() {
        assert_eq!(scan(b"", Mode::EveryLine).1.lines, 0);
        let (seen, counts) = scan(b"noise\n[rank=0] x", Mode::EveryLine);
        assert_eq!((seen.len(), counts.lines), (1, 2));
    }

    #[test]
    fn step_lines_fold_into_one_aggregate_until_the_next_item() {
        let step = |n: u32| {
            format!(
                "t | INFO | step {n:08}/00000010 | step-time 0.2 sec | peak-gpu-memory 0.5 GB\n"
            )
        };
        let text = format!("{}noise\n{}[rank=0] x\n{}", step(1), step(2), step(3));
        let (seen, counts) = scan(text.as_bytes(), Mode::FoldSteps);
        assert_eq!(counts.lines, 5);
        assert_eq!(seen.len(), 3, "{seen:?}");
        assert!(seen[0].starts_with("Steps(StepRun { lines: 2"), "{seen:?}");
        assert!(seen[1].starts_with("Line("), "{seen:?}");
        assert!(seen[2].starts_with("Steps(StepRun { lines: 1"), "{seen:?}");
    }

    #[test]
    fn a_line_over_the_cap_is_cut_and_counted() {
        let mut text = vec![b'x'; LINE_CAP + 10];
        text.extend_from_slice(b"[rank=0] late\n[rank=1] x\n");
        let (seen, counts) = scan(&text, Mode::EveryLine);
        assert_eq!(
            (counts.lines, counts.long_lines, counts.cut_bytes),
            (2, 1, 23)
        );
        assert_eq!(seen.len(), 1);
    }
}
