//! One big plain log file scanned by chunks on all cores, with the result of [`lines::scan`].
//!
//! Contract: [`scan_file`] cuts the file into [`CHUNK`]-sized pieces read with positioned reads
//! (`pread`: no shared file offset, no memory map, so a file truncated meanwhile is a read error,
//! not a crash). Chunk `k` *owns* the lines that start inside it: it skips the bytes before the
//! first line start (the end of a line the previous chunk owns) and reads past its end until its
//! last line ends, keeping at most [`LINE_CAP`] bytes of it. Every line is owned by exactly one
//! chunk, so the line counts, the long lines, the needle lines and the folded step lines of the
//! chunks, handed to the sink in chunk order by [`many::ordered`], are those of a scan of the
//! whole file in one stream. At most two chunks per worker wait to be folded, and their
//! buffers are reused: memory does not grow with the file.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use memchr::memmem;

use super::lines::{Batch, CHUNK, Item, LINE_CAP, Mode, NEEDLES, ScanCounts};
use super::many;

/// Files smaller than this are read in one stream: threads would not pay for themselves.
pub const MIN_SIZE: u64 = 16 * CHUNK as u64;

/// Scans the `size` bytes of `file` on all cores and calls `sink` with what [`lines::scan`]
/// would hand it, in file order, on the calling thread.
///
/// [`lines::scan`]: super::lines::scan
pub fn scan_file(
    file: &File,
    size: u64,
    mode: Mode,
    mut sink: impl FnMut(Item<'_>),
) -> io::Result<ScanCounts> {
    let chunks = usize::try_from(size.div_ceil(CHUNK as u64)).map_err(io::Error::other)?;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spare: Mutex<Vec<Batch>> = Mutex::new(Vec::new());
    let mut counts = ScanCounts::default();
    many::ordered(
        chunks,
        workers,
        2,
        |k| {
            let batch = spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
            scan_chunk(file, size, k, mode, batch.unwrap_or_else(chunk_batch))
        },
        |_, batch: io::Result<Batch>| -> io::Result<()> {
            let batch = batch?;
            batch.finish(&mut counts, &mut sink);
            spare.lock().unwrap_or_else(|e| e.into_inner()).push(batch);
            Ok(())
        },
    )?;
    Ok(counts)
}

/// A batch with room for a chunk, the byte before it, and the kept part of its last line.
fn chunk_batch() -> Batch {
    let mut batch = Batch::new();
    batch.buf.resize(CHUNK + 1 + LINE_CAP + 1, 0);
    batch
}

/// Reads and scans chunk `k`: the lines that start in `[k·CHUNK, (k+1)·CHUNK)`.
fn scan_chunk(file: &File, size: u64, k: usize, mode: Mode, mut batch: Batch) -> io::Result<Batch> {
    let chunk_start = k as u64 * CHUNK as u64;
    let chunk_end = (chunk_start + CHUNK as u64).min(size);
    // From the byte before the chunk, to see whether a line starts at its first byte.
    let read_from = chunk_start.saturating_sub(1);
    let n = (chunk_end - read_from) as usize;
    let buf = &mut batch.buf;
    file.read_exact_at(&mut buf[..n], read_from)?;
    let begin = if k == 0 {
        0
    } else {
        memchr::memchr(b'\n', &buf[..n]).map_or(n, |p| p + 1)
    };
    batch.begin = begin;
    batch.len = begin;
    batch.at_eof = false;
    if begin >= n {
        // No line starts here: the chunk is inside a line an earlier chunk owns.
        batch.counts = ScanCounts::default();
        batch.scan(&finders(), mode);
        return Ok(batch);
    }
    let mut len = n;
    let mut tail = ScanCounts::default();
    let at_file_end = chunk_end == size;
    let mut at_eof = at_file_end;
    if !at_file_end && buf[n - 1] != b'\n' {
        // The last line goes on past the chunk: read it to its end, keeping LINE_CAP bytes.
        let line_start = memchr::memrchr(b'\n', &buf[begin..n]).map_or(begin, |p| begin + p + 1);
        let in_chunk = n - line_start;
        let mut line_len = in_chunk;
        let mut at = chunk_end;
        let mut piece = [0u8; 16 * 1024];
        loop {
            let got = match file.read_at(&mut piece, at) {
                Ok(got) => got,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if got == 0 {
                at_eof = true;
                break;
            }
            at += got as u64;
            let newline = memchr::memchr(b'\n', &piece[..got]);
            let take = newline.unwrap_or(got);
            let keep = take.min(LINE_CAP.saturating_sub(line_len));
            buf[len..len + keep].copy_from_slice(&piece[..keep]);
            len += keep;
            tail.cut_bytes += (take - keep) as u64;
            line_len += take;
            if newline.is_some() {
                buf[len] = b'\n';
                len += 1;
                break;
            }
        }
        // A line already longer than the cap inside the chunk is counted by the scan.
        if line_len > LINE_CAP && in_chunk <= LINE_CAP {
            tail.long_lines = 1;
        }
    }
    batch.len = len;
    batch.at_eof = at_eof;
    batch.scan(&finders(), mode);
    batch.counts.add(tail);
    Ok(batch)
}

fn finders() -> [memmem::Finder<'static>; 3] {
    NEEDLES.map(memmem::Finder::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::lines;
    use std::io::Write;

    /// What `lines::scan` hands over and counts, as owned values.
    fn streamed(text: &[u8]) -> (Vec<String>, ScanCounts) {
        let mut seen = Vec::new();
        let counts =
            lines::scan(text, Mode::FoldSteps, |item| seen.push(format!("{item:?}"))).unwrap();
        (seen, counts)
    }

    fn chunked(text: &[u8]) -> (Vec<String>, ScanCounts) {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text).unwrap();
        let mut seen = Vec::new();
        let counts = scan_file(&file, text.len() as u64, Mode::FoldSteps, |item| {
            seen.push(format!("{item:?}"))
        })
        .unwrap();
        (seen, counts)
    }

    #[test]
    fn chunks_give_what_one_stream_gives_whatever_falls_on_their_edges() {
        // Lines of every kind and length, some longer than the cap, one longer than a chunk,
        // landing on chunk edges in every way; with and without a last newline.
        let mut text = Vec::new();
        let mut i = 0u64;
        while text.len() < 9 * CHUNK {
            i += 1;
            let line = match i % 11 {
                0 => format!(
                    "[rank={} pp=0] Step4 i=0: 1.00 GiB | alloc=1.00 cached=0.00 non-pt=1.00",
                    i % 8
                ),
                1 | 2 => format!(
                    "t | INFO | step {i:08}/99999999 | step-time 0.2 sec | peak-gpu-memory 0.{} GB",
                    i % 97
                ),
                3 if i % 7 == 3 => "x".repeat(LINE_CAP + (i as usize % 3) * 1000 - 1),
                4 if i % 1000 == 4 => format!("{}[rank=1] late", "y".repeat(CHUNK + 77)),
                5 => String::new(),
                6 => format!("[rank3]: torch.OutOfMemoryError: CUDA out of memory. {i}"),
                _ => format!(
                    "node0:4712:4790 [0] NCCL INFO Channel {i:02}/16 = {}",
                    "z".repeat(i as usize % 300)
                ),
            };
            text.extend_from_slice(line.as_bytes());
            text.push(b'\n');
        }
        for cut in [0, 1, 1234] {
            let text = &text[..text.len() - cut];
            let (want, want_counts) = streamed(text);
            let (got, got_counts) = chunked(text);
            assert_eq!(got_counts, want_counts, "cut {cut}");
            assert!(want == got, "items differ, cut {cut}");
            assert!(want_counts.long_lines > 3, "{want_counts:?}");
        }
    }

    #[test]
    fn a_file_of_one_line_longer_than_many_chunks_is_one_cut_line() {
        let mut text = vec![b'q'; 5 * CHUNK + 3];
        text.extend_from_slice(b"[rank=0] far\n[rank=1] near");
        assert_eq!(chunked(&text), streamed(&text));
        let (seen, counts) = chunked(&text);
        assert_eq!((counts.lines, counts.long_lines, seen.len()), (2, 1, 1));
    }

    #[test]
    fn a_file_that_shrinks_while_read_is_an_error() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&vec![b'\n'; 2 * CHUNK]).unwrap();
        let err = scan_file(&file, 4 * CHUNK as u64, Mode::FoldSteps, |_| {}).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }
}
