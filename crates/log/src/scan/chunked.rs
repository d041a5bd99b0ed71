//! One big plain log file scanned by chunks on all cores, with the result of [`lines::scan`].
//!
//! Contract: [`scan_file`] maps the file read-only ([`Mapped`]: no copy of its bytes, which is
//! most of what reading a page-cached log costs) and cuts it into 1 MiB pieces.
//! Chunk `k` *owns* the lines that start inside it: it skips the bytes before its first line
//! start (the end of a line the previous chunk owns) and runs past its end to the end of its
//! last line. Every line is owned by exactly one chunk, so the line counts, the long lines
//! (cut to [`super::LINE_CAP`] by the scan), the needle lines and the folded step lines of the chunks,
//! handed to the sink in chunk order by [`ordered::ordered`], are those of one scan of the whole
//! file. At most two chunks per worker wait to be folded; each holds only its hits, and the
//! pages of a folded chunk are released ([`Mapped::release`]), so the resident size stays a few
//! chunks whatever the file's size.
//!
//! A file that shrinks while mapped makes the next access past its new end a bus error: the
//! process then stops with one line naming the file (see [`Mapped`]), never reads garbage.
//!
//! [`lines::scan`]: super::lines::scan

use std::fs::File;
use std::io;

use memchr::memmem;

use super::lines::Found;
use super::mapped::Mapped;
use super::{CHUNK, Input, Item, LINE_CAP, Mode, NEEDLES, ScanCounts, Scanner, Sink, ordered};

/// Files smaller than this are read in one stream: threads would not pay for themselves.
pub const MIN_SIZE: u64 = 16 * CHUNK as u64;

/// [`scan_map`] of a plain file ([`Input::File`]), mapped; the sink gets the map
/// ([`Sink::backing`]), which detail prints point into. A stream ([`Input::Reader`]) is scanned
/// by [`super::Streamed`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Chunked;

impl Scanner for Chunked {
    fn scan(&self, input: Input<'_>, mode: Mode, sink: &mut dyn Sink) -> io::Result<ScanCounts> {
        let (file, name) = match input {
            Input::File(file, name) => (file, name),
            reader @ Input::Reader(_) => return super::Streamed.scan(reader, mode, sink),
        };
        let map = std::sync::Arc::new(Mapped::new(file, name)?);
        sink.backing(map.clone());
        scan_map(&map, mode, |item| sink.item(item))
    }
}

/// Scans `file` (named `name` in the message of a bus error) on all cores and calls `sink`
/// with what [`lines::scan`] would hand it, in file order, on the calling thread.
///
/// [`lines::scan`]: super::lines::scan
pub fn scan_file(
    file: &File,
    name: &str,
    mode: Mode,
    sink: impl FnMut(Item<'_>),
) -> io::Result<ScanCounts> {
    scan_map(&Mapped::new(file, name)?, mode, sink)
}

/// [`scan_file`] of a file already mapped; detail prints come with their offset in the map
/// ([`super::PreRead::Detail`]), so that they can be read again from it.
pub fn scan_map(
    map: &Mapped,
    mode: Mode,
    mut sink: impl FnMut(Item<'_>),
) -> io::Result<ScanCounts> {
    let bytes = map.bytes();
    let chunks = bytes.len().div_ceil(CHUNK);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = ScanCounts::default();
    // Folded chunks' buffers, for the next chunks: fresh ones would cost the kernel a page
    // clear per page of hits.
    let spare = std::sync::Mutex::new(Vec::<Found>::new());
    let take = || spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
    ordered::ordered(
        chunks,
        workers,
        2,
        |k| scan_chunk(map, k, mode, take().unwrap_or_default()),
        |k, (region, found): (std::ops::Range<usize>, Found)| -> io::Result<()> {
            let base = region.start;
            found.finish(&bytes[region], Some(base), &mut counts, &mut sink);
            spare.lock().unwrap_or_else(|e| e.into_inner()).push(found);
            // The chunk before is done with: chunk `k`, folded, has read its last byte, and no
            // later chunk reads it. Its pages need not stay resident. (Releasing chunk `k`
            // itself now would let chunk `k + 1` map its last pages again, for good.)
            if k > 0 {
                map.release((k - 1) * CHUNK..k * CHUNK);
            }
            Ok(())
        },
    )?;
    Ok(counts)
}

/// Scans chunk `k` of the map: the lines that start in `[k·CHUNK, (k+1)·CHUNK)`. Returns the
/// region scanned and what it holds.
///
/// The chunk's last line may go on far past it: it is walked to its end a chunk at a time,
/// and when it is longer than [`LINE_CAP`] only its first `LINE_CAP` bytes are scanned, the
/// rest counted, and the pages walked past them released at once, so that one huge line does
/// not keep itself resident.
fn scan_chunk(
    map: &Mapped,
    k: usize,
    mode: Mode,
    mut found: Found,
) -> (std::ops::Range<usize>, Found) {
    let bytes = map.bytes();
    let len = bytes.len();
    let chunk_start = k * CHUNK;
    let chunk_end = (chunk_start + CHUNK).min(len);
    map.populate(chunk_start..chunk_end);
    // A line starts at the chunk's first byte when the byte before it ends a line.
    let begin = if k == 0 {
        0
    } else {
        memchr::memchr(b'\n', &bytes[chunk_start - 1..chunk_end])
            .map_or(chunk_end, |p| chunk_start + p)
    };
    let finders = NEEDLES.map(memmem::Finder::new);
    if begin >= chunk_end || bytes[chunk_end - 1] == b'\n' {
        let end = chunk_end.max(begin);
        found.scan(&bytes[begin..end], end == len, &finders, mode);
        return (begin..end, found);
    }
    // The last line goes on past the chunk: find its end.
    let line_start =
        memchr::memrchr(b'\n', &bytes[begin..chunk_end]).map_or(begin, |p| begin + p + 1);
    let kept_end = (line_start + LINE_CAP).max(chunk_end);
    let mut at = chunk_end;
    let line_end = loop {
        let step_end = (at + CHUNK).min(len);
        if let Some(p) = memchr::memchr(b'\n', &bytes[at..step_end]) {
            break Some(at + p);
        }
        if step_end == len {
            break None;
        }
        map.release(kept_end.max(at)..step_end);
        at = step_end;
    };
    let line_len = line_end.unwrap_or(len) - line_start;
    if line_len <= LINE_CAP {
        let end = line_end.map_or(len, |e| e + 1);
        found.scan(&bytes[begin..end], end == len, &finders, mode);
        return (begin..end, found);
    }
    // A long last line: scan up to the kept bytes (the scan counts the line as a cut one
    // only when the chunk alone holds more than LINE_CAP of it), and count the rest here.
    let end = kept_end.min(len);
    found.scan(&bytes[begin..end], line_end.is_none(), &finders, mode);
    let scanned = end - line_start;
    if scanned <= LINE_CAP {
        found.counts.long_lines += 1;
        found.counts.cut_bytes += (line_len - LINE_CAP) as u64;
    } else {
        found.counts.cut_bytes += (line_len - scanned) as u64;
    }
    if line_end.is_some() {
        // Its line end lies past the region.
        found.counts.lines += 1;
    }
    (begin..end, found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scan::lines;
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
        let counts = scan_file(&file, "t.log", Mode::FoldSteps, |item| {
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
    fn long_last_lines_of_a_chunk_are_cut_as_one_stream_cuts_them() {
        // The chunk holds less, or more, of the long line than the cap; it ends with a line
        // end, or at the end of the file.
        for before_end in [LINE_CAP / 2, 2 * LINE_CAP] {
            for terminated in [true, false] {
                let padding: Vec<u8> = (0..CHUNK - before_end)
                    .map(|i| if i % 100 == 99 { b'\n' } else { b'p' })
                    .collect();
                let mut text = padding;
                text.push(b'\n');
                text.extend_from_slice(b"[rank=0] long ");
                text.extend(std::iter::repeat_n(b'w', 3 * CHUNK));
                text.extend_from_slice(b"[rank=1] late");
                if terminated {
                    text.extend_from_slice(b"\n[rank=2] after\n");
                }
                let (want, want_counts) = streamed(&text);
                let (got, got_counts) = chunked(&text);
                let case = format!("{before_end} before the end, terminated {terminated}");
                assert_eq!(got_counts, want_counts, "{case}");
                assert_eq!(got, want, "{case}");
                assert_eq!(want_counts.long_lines, 1, "{case}");
            }
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
}
