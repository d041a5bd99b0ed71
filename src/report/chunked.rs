//! One big plain log file scanned by chunks on all cores, with the result of [`lines::scan`].
//!
//! Contract: [`scan_file`] maps the file read-only ([`Mapped`]: no copy of its bytes, which is
//! most of what reading a page-cached log costs) and cuts it into 1 MiB pieces.
//! Chunk `k` *owns* the lines that start inside it: it skips the bytes before its first line
//! start (the end of a line the previous chunk owns) and runs past its end to the end of its
//! last line. Every line is owned by exactly one chunk, so the line counts, the long lines
//! (cut to [`super::lines::LINE_CAP`] by the scan), the needle lines and the folded step lines of the chunks,
//! handed to the sink in chunk order by [`many::ordered`], are those of one scan of the whole
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

use super::lines::{CHUNK, Found, Item, Mode, NEEDLES, ScanCounts};
use super::many;
use super::mapped::Mapped;

/// Files smaller than this are read in one stream: threads would not pay for themselves.
pub const MIN_SIZE: u64 = 16 * CHUNK as u64;

/// Scans `file` (named `name` in the message of a bus error) on all cores and calls `sink`
/// with what [`lines::scan`] would hand it, in file order, on the calling thread.
///
/// [`lines::scan`]: super::lines::scan
pub fn scan_file(
    file: &File,
    name: &str,
    mode: Mode,
    mut sink: impl FnMut(Item<'_>),
) -> io::Result<ScanCounts> {
    let map = Mapped::new(file, name)?;
    let bytes = map.bytes();
    let chunks = bytes.len().div_ceil(CHUNK);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = ScanCounts::default();
    many::ordered(
        chunks,
        workers,
        2,
        |k| scan_chunk(bytes, k, mode),
        |k, (region, found): (std::ops::Range<usize>, Found)| -> io::Result<()> {
            found.finish(&bytes[region], &mut counts, &mut sink);
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

/// Scans chunk `k` of `bytes`: the lines that start in `[k·CHUNK, (k+1)·CHUNK)`. Returns the
/// region of those lines and what it holds.
fn scan_chunk(bytes: &[u8], k: usize, mode: Mode) -> (std::ops::Range<usize>, Found) {
    let chunk_start = k * CHUNK;
    let chunk_end = (chunk_start + CHUNK).min(bytes.len());
    // A line starts at the chunk's first byte when the byte before it ends a line.
    let begin = if k == 0 {
        0
    } else {
        memchr::memchr(b'\n', &bytes[chunk_start - 1..chunk_end])
            .map_or(chunk_end, |p| chunk_start + p)
    };
    let end = if begin >= chunk_end || bytes[chunk_end - 1] == b'\n' {
        chunk_end.max(begin)
    } else {
        memchr::memchr(b'\n', &bytes[chunk_end..]).map_or(bytes.len(), |p| chunk_end + p + 1)
    };
    let mut found = Found::default();
    let region = &bytes[begin..end];
    let finders = NEEDLES.map(memmem::Finder::new);
    found.scan(region, end == bytes.len(), &finders, mode);
    (begin..end, found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::lines::{self, LINE_CAP};
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
    fn a_file_of_one_line_longer_than_many_chunks_is_one_cut_line() {
        let mut text = vec![b'q'; 5 * CHUNK + 3];
        text.extend_from_slice(b"[rank=0] far\n[rank=1] near");
        assert_eq!(chunked(&text), streamed(&text));
        let (seen, counts) = chunked(&text);
        assert_eq!((counts.lines, counts.long_lines, seen.len()), (2, 1, 1));
    }
}
