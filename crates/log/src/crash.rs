//! The exception that ended a run: Python's last traceback in the end of a log.
//!
//! Contract: the line scanner hands over only lines holding its needles, and a traceback's
//! lines hold none; so every log's last [`TAIL_BYTES`] are kept as they are read
//! ([`TailKeeper`]), and [`last_exception`] reads the last traceback in them. A dying process
//! prints its traceback last, so a run that crashed has it at the end of its log; a crash in the
//! middle of a file (a launch followed by another) is seen only through its OOM line.
//!
//! [`last_exception`] takes the tail's lines with ANSI escapes and the launcher's rank prefix
//! (`[rank1]:`, `[default1]:`, `1: `) removed; the last `Traceback (most recent call last):`
//! whose exception is not the launcher's own (torchrun's `ChildFailedError`, which only says a
//! child failed) opens the traceback; its indented lines (of the same prefix, since ranks
//! interleave) are the frames, and the first unindented line after them is the exception
//! (`RuntimeError: Dataset is too small`). The last [`FRAME_LINES`] frame lines are kept, each
//! cut to [`LINE_CHARS`] characters; the exception line is kept whole.

use std::io::{self, Read};

use super::step_and_oom::launcher_rank;
use crate::parse;

/// How much of the end of each log is kept to find the exception that ended it.
pub const TAIL_BYTES: usize = 256 * 1024;
/// Traceback lines kept before the exception (its innermost frames).
pub const FRAME_LINES: usize = 8;
/// Characters kept of one frame line.
pub const LINE_CHARS: usize = 240;

/// The last [`TAIL_BYTES`] of a plain file (one a scanner mapped rather than streamed), read
/// with one positioned read.
pub fn file_tail(file: &std::fs::File) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let start = len.saturating_sub(TAIL_BYTES as u64);
    let mut tail = vec![0; (len - start) as usize];
    file.read_exact_at(&mut tail, start)?;
    Ok(tail)
}

/// A reader that keeps the last [`TAIL_BYTES`] of what it read.
pub struct TailKeeper<R> {
    inner: R,
    kept: Vec<u8>,
}

impl<R: Read> TailKeeper<R> {
    /// Wraps `inner`.
    pub fn new(inner: R) -> Self {
        TailKeeper {
            inner,
            kept: Vec::new(),
        }
    }

    /// The last [`TAIL_BYTES`] read (fewer when the input was shorter).
    pub fn tail(&self) -> &[u8] {
        &self.kept[self.kept.len().saturating_sub(TAIL_BYTES)..]
    }
}

impl<R: Read> Read for TailKeeper<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        // Kept up to twice the tail, then cut back: each byte is copied about twice at most.
        if self.kept.len() + n > 2 * TAIL_BYTES {
            let keep = TAIL_BYTES.saturating_sub(n).min(self.kept.len());
            self.kept.drain(..self.kept.len() - keep);
        }
        self.kept
            .extend_from_slice(&buf[n.saturating_sub(TAIL_BYTES)..n]);
        Ok(n)
    }
}

/// The exception a traceback ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exception {
    /// The launcher's rank prefix on its lines.
    pub rank: Option<u32>,
    /// The exception line: `RuntimeError: Dataset is too small`.
    pub line: String,
    /// The traceback lines before it, innermost last (at most [`FRAME_LINES`]).
    pub frames: Vec<String>,
}

impl Exception {
    /// The exception's type: the line up to its first `:` (`torch.OutOfMemoryError`), or the
    /// whole line when it has none (`KeyboardInterrupt`).
    pub fn kind(&self) -> &str {
        self.line.split_once(':').map_or(&self.line, |(k, _)| k)
    }
}

const TRACEBACK: &str = "Traceback (most recent call last):";

/// The last exception of `tail` that is not the launcher's (see the module doc).
pub fn last_exception(tail: &[u8]) -> Option<Exception> {
    // Most logs end without a traceback: those are told at memmem speed, not line by line. A
    // tail with escape bytes takes the long way, as colours may split the header.
    if memchr::memmem::find(tail, TRACEBACK.as_bytes()).is_none()
        && memchr::memchr(0x1b, tail).is_none()
    {
        return None;
    }
    let mut scratch = Vec::new();
    let lines: Vec<(Option<u32>, String)> = tail
        .split(|&b| b == b'\n')
        .map(|raw| {
            let line = String::from_utf8_lossy(parse::clean(raw, &mut scratch)).into_owned();
            let rank = launcher_rank(&line);
            (rank, strip_prefix(&line).to_owned())
        })
        .collect();
    let starts = lines
        .iter()
        .enumerate()
        .filter(|(_, (_, l))| l.trim_start() == TRACEBACK)
        .map(|(i, _)| i);
    let found: Vec<Exception> = starts.filter_map(|i| read_traceback(&lines, i)).collect();
    found
        .into_iter()
        .rev()
        .find(|e| !e.kind().ends_with("ChildFailedError"))
}

/// The traceback opened at `lines[start]`: its frames and exception line, read from the lines
/// of the same rank prefix.
fn read_traceback(lines: &[(Option<u32>, String)], start: usize) -> Option<Exception> {
    let (rank, _) = lines[start];
    let indent = lines[start].1.len() - lines[start].1.trim_start().len();
    let mut frames: Vec<String> = Vec::new();
    for (r, line) in &lines[start + 1..] {
        if *r != rank {
            continue;
        }
        let own_indent = line.len() - line.trim_start().len();
        if line.trim().is_empty() {
            continue;
        }
        if own_indent > indent {
            if frames.len() == FRAME_LINES {
                frames.remove(0);
            }
            frames.push(line.trim_end().chars().take(LINE_CHARS).collect());
            continue;
        }
        if line.trim_start() == TRACEBACK {
            return None;
        }
        return Some(Exception {
            rank,
            line: line.trim().to_owned(),
            frames,
        });
    }
    None
}

/// `line` without the launcher's rank prefix (`[rank1]:`, `[default1]:`, `1: `).
fn strip_prefix(line: &str) -> &str {
    for open in ["[rank", "[default"] {
        if let Some(rest) = line.strip_prefix(open) {
            let n = rest.bytes().take_while(u8::is_ascii_digit).count();
            if n > 0
                && let Some(rest) = rest[n..].strip_prefix("]:")
            {
                return rest;
            }
        }
    }
    let n = line.bytes().take_while(u8::is_ascii_digit).count();
    match line[n..].strip_prefix(": ") {
        Some(rest) if n > 0 => rest,
        _ => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_traceback_gives_the_exception_and_its_frames() {
        let log = b"step 1\nTraceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    main()\n  File \"b.py\", line 9, in main\n    raise RuntimeError(\"Dataset is too small\")\nRuntimeError: Dataset is too small\n";
        let e = last_exception(log).unwrap();
        assert_eq!(e.line, "RuntimeError: Dataset is too small");
        assert_eq!(e.kind(), "RuntimeError");
        assert_eq!(e.frames.len(), 4);
        assert_eq!(e.frames[2], "  File \"b.py\", line 9, in main");
    }

    #[test]
    fn torchruns_own_traceback_is_passed_over_and_ranks_are_kept_apart() {
        let log = "[rank1]:Traceback (most recent call last):\n\
                   [rank0]:[rank=0] x: alloc=1.00\n\
                   [rank1]:  File \"pithtrain/dualpipe/dualpipev.py\", line 612, in step\n\
                   [rank1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n\
                   Traceback (most recent call last):\n  File \"/usr/bin/torchrun\", line 8, in <module>\n\
                   torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n\
                   ====\n";
        let e = last_exception(log.as_bytes()).unwrap();
        assert_eq!(e.rank, Some(1));
        assert_eq!(e.kind(), "torch.OutOfMemoryError");
        assert_eq!(
            e.frames,
            ["  File \"pithtrain/dualpipe/dualpipev.py\", line 612, in step"]
        );
    }

    #[test]
    fn a_log_without_a_traceback_or_cut_inside_one_has_no_exception() {
        assert_eq!(last_exception(b"step 1\nstep 2\n"), None);
        assert_eq!(
            last_exception(b"Traceback (most recent call last):\n  File \"a.py\", line 1"),
            None
        );
    }

    #[test]
    fn the_tail_keeper_keeps_the_last_bytes_read() {
        let data: Vec<u8> = (0..3 * TAIL_BYTES + 17).map(|i| (i % 251) as u8).collect();
        let mut keeper = TailKeeper::new(&data[..]);
        let mut sink = Vec::new();
        let mut buf = vec![0; 100_000];
        loop {
            let n = keeper.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            sink.extend_from_slice(&buf[..n]);
        }
        assert_eq!(sink, data);
        assert_eq!(keeper.tail(), &data[data.len() - TAIL_BYTES..]);
    }
}
