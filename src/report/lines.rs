//! Reading log files: decompression, chunked scanning, and cutting out the lines worth parsing.
//!
//! Contract:
//! - [`open`] sniffs the first bytes of a file: gzip (`1f 8b`) and zstd (`28 b5 2f fd`) are
//!   decompressed on the fly (concatenated gzip members included); anything else is read as is.
//! - [`scan`] reads any [`Read`] in large chunks and calls the sink once for every *physical*
//!   line that contains one of the [`NEEDLES`], in file order. The slice it gets has no `\n`;
//!   a trailing `\r` (CRLF logs) is still there for the caller to strip. A last line without a
//!   terminator (a log cut off mid-write) is passed like any other.
//! - Lines without a needle are only counted: the scan is memchr/memmem over whole chunks, the
//!   way grep works, so its cost barely depends on how much noise the log holds.
//! - Memory is one chunk buffer (1 MiB), grown only while a single line is longer than it.
//! - [`split_prints`] cuts a line into memory prints: every `[rank=` tag starts one, and it runs
//!   to the next tag or the end of the line, so two prints that ran together on one physical
//!   line come apart. Text before the first tag (timestamps, `srun --label`/`torchrun --tee`
//!   prefixes) is dropped.
//! - [`clean`] removes ANSI escape sequences and the trailing `\r`, reusing a caller's buffer.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use memchr::memmem;

/// The tag that starts every memory print.
pub const RANK_TAG: &[u8] = b"[rank=";
/// PithTrain's rank-0 training step line: `... | INFO | step 00000001/00004096 | ...`.
pub const STEP_NEEDLE: &[u8] = b"| step ";
/// The message of `torch.OutOfMemoryError`.
pub const OOM_NEEDLE: &[u8] = b"CUDA out of memory";
/// A line is handed to the sink when it contains any of these.
pub const NEEDLES: [&[u8]; 3] = [RANK_TAG, STEP_NEEDLE, OOM_NEEDLE];

const CHUNK: usize = 1 << 20;

/// Opens `path`, decompressing gzip or zstd when the magic bytes say so.
pub fn open(path: &Path) -> io::Result<Box<dyn Read>> {
    let mut reader = BufReader::with_capacity(64 * 1024, File::open(path)?);
    let head = reader.fill_buf()?;
    if head.starts_with(&[0x1f, 0x8b]) {
        Ok(Box::new(flate2::read::MultiGzDecoder::new(reader)))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Ok(Box::new(zstd::stream::read::Decoder::with_buffer(reader)?))
    } else {
        Ok(Box::new(reader))
    }
}

/// Bit `k` of a [`Needles`] set says the line holds `NEEDLES[k]`.
pub type Needles = u8;

/// Reads `reader` to the end, calls `sink` with each line holding a needle and the set of
/// needles it holds, and returns the number of lines read (a cut-off last line counts as one).
pub fn scan<R: Read>(mut reader: R, mut sink: impl FnMut(&[u8], Needles)) -> io::Result<u64> {
    let finders = NEEDLES.map(memmem::Finder::new);
    let mut buf = vec![0u8; CHUNK];
    // `buf[..filled]` holds bytes not yet processed; they never contain a complete line
    // at the top of the loop.
    let mut filled = 0;
    let mut lines = 0u64;
    loop {
        if filled == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let n = match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        let new_end = filled + n;
        let Some(last_nl) = memchr::memrchr(b'\n', &buf[filled..new_end]) else {
            filled = new_end;
            continue;
        };
        let complete = filled + last_nl + 1;
        lines += memchr::memchr_iter(b'\n', &buf[..complete]).count() as u64;
        scan_region(&buf[..complete], &finders, &mut sink);
        buf.copy_within(complete..new_end, 0);
        filled = new_end - complete;
    }
    if filled > 0 {
        lines += 1;
        scan_region(&buf[..filled], &finders, &mut sink);
    }
    Ok(lines)
}

/// Calls `sink` once per line of `region` that holds a needle. `region` ends at a line end
/// (its last byte is `\n`) or at the end of the input.
fn scan_region(
    region: &[u8],
    finders: &[memmem::Finder<'_>; 3],
    sink: &mut impl FnMut(&[u8], Needles),
) {
    let mut next: [Option<usize>; 3] = std::array::from_fn(|k| finders[k].find(region));
    while let Some(hit) = next.iter().flatten().copied().min() {
        let start = memchr::memrchr(b'\n', &region[..hit]).map_or(0, |p| p + 1);
        let end = memchr::memchr(b'\n', &region[hit..]).map_or(region.len(), |p| hit + p);
        let resume = end + 1;
        let found = next.iter().enumerate().fold(0, |set, (k, p)| {
            if p.is_some_and(|p| p < resume) {
                set | 1 << k
            } else {
                set
            }
        });
        sink(&region[start..end], found);
        for (k, slot) in next.iter_mut().enumerate() {
            if slot.is_some_and(|p| p < resume) {
                *slot = region
                    .get(resume..)
                    .and_then(|rest| finders[k].find(rest))
                    .map(|p| p + resume);
            }
        }
    }
}

/// Splits a line into memory prints, each starting with `[rank=` and running to the next tag
/// or the end of the line. Text before the first tag is not part of any print.
pub fn split_prints(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    static FINDER: std::sync::LazyLock<memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memmem::Finder::new(RANK_TAG));
    let finder: &memmem::Finder<'static> = &FINDER;
    let mut rest = finder.find(line).map(|p| &line[p..]);
    std::iter::from_fn(move || {
        let current = rest?;
        match finder.find(&current[1..]) {
            Some(p) => {
                rest = Some(&current[p + 1..]);
                Some(&current[..p + 1])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

/// Returns `line` without a trailing `\r` and without ANSI escape sequences (CSI `ESC [ … final`
/// and two-byte `ESC x`). Borrows `line` when there is no escape byte, else writes into `scratch`.
pub fn clean<'a>(line: &'a [u8], scratch: &'a mut Vec<u8>) -> &'a [u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if memchr::memchr(0x1b, line).is_none() {
        return line;
    }
    scratch.clear();
    let mut i = 0;
    while i < line.len() {
        if line[i] != 0x1b {
            scratch.push(line[i]);
            i += 1;
            continue;
        }
        i += 1;
        if line.get(i) == Some(&b'[') {
            i += 1;
            // Parameter and intermediate bytes are 0x20..=0x3f; the final byte is 0x40..=0x7e.
            while i < line.len() && (0x20..=0x3f).contains(&line[i]) {
                i += 1;
            }
            i += 1;
        } else {
            i += 1;
        }
    }
    let end = scratch.len() - scratch.ends_with(b"\r") as usize;
    &scratch[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8]) -> (Vec<String>, u64) {
        let mut seen = Vec::new();
        let n = scan(input, |l, _| {
            seen.push(String::from_utf8_lossy(l).into_owned())
        })
        .unwrap();
        (seen, n)
    }

    #[test]
    fn only_lines_with_a_needle_reach_the_sink_but_all_are_counted() {
        let (seen, n) =
            lines_of(b"noise\n[rank=0] a\nmore noise\nx | step 00000001/00000002 | y\n");
        assert_eq!(seen, ["[rank=0] a", "x | step 00000001/00000002 | y"]);
        assert_eq!(n, 4);
    }

    #[test]
    fn crlf_lines_keep_their_carriage_return_for_the_caller() {
        let (seen, n) = lines_of(b"[rank=1] a\r\n[rank=2] b\r\n");
        assert_eq!(seen, ["[rank=1] a\r", "[rank=2] b\r"]);
        assert_eq!(n, 2);
    }

    #[test]
    fn a_cut_off_last_line_is_still_passed_and_counted() {
        let (seen, n) = lines_of(b"[rank=0] full\n[rank=0 pp=0] Step1 F0 i=0: 12.3");
        assert_eq!(seen, ["[rank=0] full", "[rank=0 pp=0] Step1 F0 i=0: 12.3"]);
        assert_eq!(n, 2);
    }

    #[test]
    fn empty_input_has_no_lines() {
        assert_eq!(lines_of(b""), (vec![], 0));
    }

    #[test]
    fn a_line_with_several_needles_is_passed_once_with_all_of_them() {
        let mut seen = Vec::new();
        scan(
            &b"[rank=0] x[rank=1] CUDA out of memory\n| step 1\n"[..],
            |l, set| seen.push((l.len(), set)),
        )
        .unwrap();
        assert_eq!(seen, [(37, 0b101), (8, 0b010)]);
    }

    #[test]
    fn lines_longer_than_the_chunk_and_split_across_reads_survive() {
        let long = format!("{}[rank=3] tail\n[rank=4] next\n", "x".repeat(3 * CHUNK));
        // A reader that hands out 7 bytes at a time splits every line across reads.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(out.len()).min(7);
                out[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut seen = Vec::new();
        let n = scan(Trickle(long.as_bytes()), |l, _| seen.push(l.len())).unwrap();
        assert_eq!(n, 2);
        assert_eq!(
            seen,
            [3 * CHUNK + "[rank=3] tail".len(), "[rank=4] next".len()]
        );
    }

    #[test]
    fn prints_that_ran_together_are_split_at_every_rank_tag() {
        let line = b"3: 10:00:01 [rank=1 pp=0] A: alloc=1.00 non-pt=3.71[rank=0 pp=0] B[rank=2]";
        let prints: Vec<&[u8]> = split_prints(line).collect();
        assert_eq!(
            prints,
            [
                &b"[rank=1 pp=0] A: alloc=1.00 non-pt=3.71"[..],
                b"[rank=0 pp=0] B",
                b"[rank=2]"
            ]
        );
    }

    #[test]
    fn a_line_without_a_tag_has_no_prints() {
        assert_eq!(split_prints(b"[rank3]: plain output").count(), 0);
    }

    #[test]
    fn clean_strips_ansi_colours_and_the_carriage_return() {
        let mut scratch = Vec::new();
        let out = clean(
            b"\x1b[32m[rank=0]\x1b[0m   x: alloc=1.00\x1b[K\r",
            &mut scratch,
        );
        assert_eq!(out, b"[rank=0]   x: alloc=1.00");
    }

    #[test]
    fn clean_borrows_lines_without_escapes() {
        let mut scratch = Vec::new();
        assert_eq!(clean(b"[rank=0] a\r", &mut scratch), b"[rank=0] a");
        assert!(scratch.is_empty());
    }

    #[test]
    fn gzip_and_zstd_inputs_are_detected_by_magic_bytes() {
        use std::io::Write;
        let text = b"[rank=0] a\nnoise\n";
        let dir = std::env::temp_dir().join(format!("memprints-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let gz = dir.join("a.log.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(text).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let zst = dir.join("b.bin");
        std::fs::write(&zst, zstd::encode_all(&text[..], 1).unwrap()).unwrap();
        for path in [gz, zst] {
            let mut seen = Vec::new();
            let n = scan(open(&path).unwrap(), |l, _| seen.push(l.to_vec())).unwrap();
            assert_eq!((n, seen), (2, vec![b"[rank=0] a".to_vec()]));
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
