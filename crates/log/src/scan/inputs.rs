//! Opening a log for a scanner, and the check that keeps binary files out of it.
//!
//! Contract:
//! - [`open`] sniffs the first bytes of a file: gzip (`1f 8b`) and zstd (`28 b5 2f fd`) are
//!   decompressed on the fly (concatenated gzip members included); anything else is read as is.
//! - [`open_text`]: opens a file through [`open`], with every NUL byte left out of what it
//!   reads ([`NulSkipped`] counts them): a log rotated by `copytruncate` starts with a run of
//!   them, a preallocated one ends with one, and both are read around. It returns `None` for
//!   binary data: within the first [`SNIFF_BYTES`] bytes that are not NUL, a NUL run that
//!   starts inside a line (neither at the file's start nor after a newline) and is followed by
//!   more bytes, or NUL bytes and a control byte no log holds. Every pickle and archive has one
//!   or the other; no log does. The bytes read to decide are handed back in front of the rest.
//! - [`big_plain_file`]: a file worth mapping and scanning by chunks ([`super::Chunked`]); it
//!   is read so only when [`has_nul`] finds no NUL byte anywhere in it, else through
//!   [`open_text`], so the mapped and chunked reading never meets one and every reader agrees.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// How much of a file's decompressed start is checked for a NUL byte.
pub const SNIFF_BYTES: usize = 8192;

/// Opens `path`, decompressing gzip or zstd when the magic bytes say so.
pub fn open(path: &Path) -> io::Result<Box<dyn Read>> {
    memprints_snapshot::compressed::decompressed(BufReader::with_capacity(
        64 * 1024,
        File::open(path)?,
    ))
}

/// `path` opened for the line scanner, or `None` when it holds binary data; with the count of
/// the NUL bytes left out, complete once the reader is read to its end.
pub fn open_text(path: &Path) -> io::Result<Option<(Box<dyn Read>, NulCount)>> {
    Ok(open_text_head(path)?.map(|(reader, _, nuls)| (reader, nuls)))
}

/// PithTrain's line at the start of every launch, logged once by rank 0:
/// `<date> <time> | INFO | launch(cfg=PretrainLMCfg(…))`.
pub const LAUNCH_NEEDLE: &[u8] = b"| launch(cfg=";

/// How far into a file (decompressed) its launch line is looked for: the torchrun banner,
/// NCCL's lines and the setup prints come before it.
pub const LAUNCH_HEAD_BYTES: usize = 64 * 1024;

/// Whether a file's start (decompressed) holds PithTrain's launch line: [`LAUNCH_NEEDLE`] in its
/// first [`LAUNCH_HEAD_BYTES`].
pub fn launches(start: &[u8]) -> bool {
    memchr::memmem::find(&start[..start.len().min(LAUNCH_HEAD_BYTES)], LAUNCH_NEEDLE).is_some()
}

/// Whether a file's first bytes are gzip's or zstd's magic (the snapshot reader's rule, which
/// [`open`] decompresses by).
pub use memprints_snapshot::compressed::is_compressed;

/// A file opened by [`open_text_head`]: its reader, whether it launches, its NUL count.
pub type TextHead = (Box<dyn Read>, bool, NulCount);

/// [`open_text`], and whether the file's first [`LAUNCH_HEAD_BYTES`] hold a launch line
/// ([`LAUNCH_NEEDLE`]): a file that launches training, not one that goes on with another's.
pub fn open_text_head(path: &Path) -> io::Result<Option<TextHead>> {
    let nuls = NulCount::default();
    let mut reader = SkipNul {
        inner: open(path)?,
        seen: 0,
        after_newline: true,
        in_run: false,
        starts_inside_a_line: false,
        count: nuls.clone(),
    };
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut reader)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    let sniffed = nuls.get();
    if sniffed.inside_a_line || (sniffed.bytes > 0 && head.iter().any(|&b| is_binary_control(b))) {
        return Ok(None);
    }
    if head.len() == SNIFF_BYTES {
        (&mut reader)
            .take((LAUNCH_HEAD_BYTES - SNIFF_BYTES) as u64)
            .read_to_end(&mut head)?;
    }
    let launches = launches(&head);
    Ok(Some((
        Box::new(io::Cursor::new(head).chain(reader)),
        launches,
        nuls,
    )))
}

/// A control byte no log holds but binary data does (a pickle starts `\x80\x04`): not a tab,
/// a newline, a carriage return, a form feed, a backspace, a bell or an escape.
fn is_binary_control(byte: u8) -> bool {
    matches!(byte, 0x01..=0x06 | 0x0e..=0x1a | 0x1c..=0x1f)
}

/// The NUL bytes a reader of [`open_text`] left out so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NulSkipped {
    /// How many.
    pub bytes: u64,
    /// In how many runs.
    pub runs: u64,
    /// Where the first run starts, in the file's (decompressed) bytes.
    pub first_offset: u64,
    /// A run started inside a line and more bytes followed, before [`SNIFF_BYTES`] bytes
    /// that are not NUL were read: binary data, not a log.
    pub inside_a_line: bool,
}

/// NUL bytes a log was read around: what `report` says on stderr (rendered by
/// `memprints-present`: `run.log: skipped 1.20 MiB of NUL bytes at offset 0 (…)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputNote {
    /// The file, as given.
    pub path: String,
    /// What was left out of it.
    pub nuls: NulSkipped,
}

impl NulSkipped {
    /// The note for `path`; `None` when nothing was left out.
    pub fn note(&self, path: &str) -> Option<InputNote> {
        (self.bytes > 0).then(|| InputNote {
            path: path.to_string(),
            nuls: *self,
        })
    }
}

/// The shared count of a reader's [`NulSkipped`], to read once the reader is done.
#[derive(Debug, Clone, Default)]
pub struct NulCount(Arc<Mutex<NulSkipped>>);

impl NulCount {
    /// The count so far.
    pub fn get(&self) -> NulSkipped {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A reader that leaves out every NUL byte of `inner` and counts them.
struct SkipNul<R> {
    inner: R,
    /// Bytes of `inner` read so far.
    seen: u64,
    /// The last byte that was not NUL is a newline (or there was none).
    after_newline: bool,
    /// The last byte read was a NUL.
    in_run: bool,
    /// The current run of NULs began inside a line.
    starts_inside_a_line: bool,
    count: NulCount,
}

impl<R: Read> Read for SkipNul<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.inner.read(buf)?;
            if n == 0 {
                return Ok(0);
            }
            let kept = self.compact(&mut buf[..n]);
            if kept > 0 {
                return Ok(kept);
            }
        }
    }
}

impl<R> SkipNul<R> {
    /// Moves the bytes of `buf` that are not NUL to its front; how many there are.
    fn compact(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len();
        if !self.in_run && memchr::memchr(0, buf).is_none() {
            self.seen += n as u64;
            self.after_newline = buf[n - 1] == b'\n';
            return n;
        }
        let mut count = self.count.0.lock().unwrap_or_else(|e| e.into_inner());
        // Bytes that are not NUL kept before this buffer, for the binary test.
        let kept_before = self.seen - count.bytes;
        let mut kept = 0;
        for i in 0..n {
            let byte = buf[i];
            if byte == 0 {
                if !self.in_run {
                    if count.runs == 0 {
                        count.first_offset = self.seen + i as u64;
                    }
                    count.runs += 1;
                    self.in_run = true;
                    self.starts_inside_a_line = !self.after_newline;
                }
                count.bytes += 1;
                continue;
            }
            if self.in_run
                && self.starts_inside_a_line
                && kept_before + (kept as u64) < SNIFF_BYTES as u64
            {
                count.inside_a_line = true;
            }
            self.in_run = false;
            self.after_newline = byte == b'\n';
            buf[kept] = byte;
            kept += 1;
        }
        self.seen += n as u64;
        kept
    }
}

/// `path` opened for [`super::chunked`], when it is a regular file of at least
/// [`super::chunked::MIN_SIZE`] bytes that is neither compressed nor starts with a NUL byte in
/// its first [`SNIFF_BYTES`]; `None` for anything else, to be read through [`open_text`].
pub fn big_plain_file(path: &Path) -> io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() < super::chunked::MIN_SIZE {
        return Ok(None);
    }
    let mut head = [0u8; SNIFF_BYTES];
    file.read_exact_at(&mut head, 0)?;
    if is_compressed(&head) || memchr::memchr(0, &head).is_some() {
        return Ok(None);
    }
    Ok(Some(file))
}

/// How much of a mapped file is looked at before its pages are released again.
const WINDOW: usize = 8 << 20;

/// How much of each end of a big file [`map_has_nul`] looks at: NUL runs come from a
/// `copytruncate` rotation (at the start) or preallocation (at the end), and a whole extra
/// pass over a file of gigabytes would cost more than the scan it guards.
pub const NUL_ENDS: usize = 64 << 20;

/// Whether a mapped file holds a NUL byte in its first or last [`NUL_ENDS`] bytes (all of a
/// file up to twice that): [`has_nul`] window by window, each window's pages released once
/// looked at, so that the check never holds the file in memory.
pub fn map_has_nul(map: &super::mapped::Mapped) -> bool {
    let bytes = map.bytes();
    let head = 0..bytes.len().min(NUL_ENDS);
    let tail = bytes.len().saturating_sub(NUL_ENDS).max(head.end)..bytes.len();
    for part in [head, tail] {
        let mut at = part.start;
        while at < part.end {
            let end = (at + WINDOW).min(part.end);
            let found = has_nul(&bytes[at..end]);
            map.release(at..end);
            if found {
                return true;
            }
            at = end;
        }
    }
    false
}

/// The lines of `reader`'s first `limit` bytes that hold `needle` within their first
/// [`super::LINE_CAP`] bytes, each handed to `f` once (those bytes, without the `\n`), in
/// order. The text is searched a
/// chunk at a time at memmem speed, not line by line; an unfinished line is carried into the
/// next chunk, at most its first `LINE_CAP` bytes.
pub fn find_lines(
    reader: impl Read,
    needle: &[u8],
    limit: u64,
    f: impl FnMut(&[u8]),
) -> io::Result<()> {
    thread_local! {
        /// The buffer of the thread's last search: a worker that looks at file after file
        /// (see [`super::many`]) zeroes and faults in one, not one per file.
        static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut buf = SPARE.take();
    let found = find_lines_in(&mut buf, reader, needle, limit, f);
    SPARE.set(buf);
    found
}

/// [`find_lines`] with `buf` as its buffer.
fn find_lines_in(
    buf: &mut Vec<u8>,
    reader: impl Read,
    needle: &[u8],
    limit: u64,
    mut f: impl FnMut(&[u8]),
) -> io::Result<()> {
    let cap = super::LINE_CAP;
    let finder = memchr::memmem::Finder::new(needle);
    let mut reader = reader.take(limit);
    if buf.len() < super::CHUNK + cap {
        buf.resize(super::CHUNK + cap, 0);
    }
    // `buf[..held]`: the start of an unfinished line (at most `cap` bytes), then what was read.
    let mut held = 0;
    // The carried line is longer than `cap`: what follows it up to its newline is dropped.
    let mut dropping = false;
    loop {
        let old = held;
        let n = loop {
            match reader.read(&mut buf[old..old + super::CHUNK]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                read => break read?,
            }
        };
        held = old + n;
        if dropping && n > 0 {
            match memchr::memchr(b'\n', &buf[old..held]) {
                Some(at) => {
                    buf.copy_within(old + at..held, old);
                    held -= at;
                    dropping = false;
                }
                None => {
                    held = old;
                    continue;
                }
            }
        }
        let eof = n == 0;
        let whole = if eof {
            held
        } else {
            memchr::memrchr(b'\n', &buf[..held]).map_or(0, |at| at + 1)
        };
        let region = &buf[..whole];
        // After a hit the search goes on past the end of its line: a line of a million needles
        // costs one look, and the look back for the line's start never crosses a line seen.
        let mut from = 0;
        let mut line_start = 0;
        while let Some(found) = finder.find(&region[from..]) {
            let hit = from + found;
            let start = memchr::memrchr(b'\n', &region[line_start..hit])
                .map_or(line_start, |at| line_start + at + 1);
            let line_end = memchr::memchr(b'\n', &region[hit..]).map_or(region.len(), |i| hit + i);
            if hit + needle.len() <= (start + cap).min(line_end) {
                f(&region[start..line_end.min(start + cap)]);
            }
            from = (line_end + 1).min(region.len());
            line_start = from;
        }
        if eof {
            return Ok(());
        }
        buf.copy_within(whole..held, 0);
        held -= whole;
        if held > cap {
            held = cap;
            dropping = true;
        }
    }
}

/// Whether `bytes` hold a NUL byte, looked for on all cores.
pub fn has_nul(bytes: &[u8]) -> bool {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let piece = bytes.len().div_ceil(workers).max(1 << 20);
    std::thread::scope(|scope| {
        let found: Vec<_> = bytes
            .chunks(piece)
            .map(|part| scope.spawn(move || memchr::memchr(0, part).is_some()))
            .collect();
        found.into_iter().any(|h| h.join().unwrap_or(true))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`find_lines`] on a reader that hands over a few bytes at a time finds what splitting
    /// the text into lines finds: needles across chunk boundaries, in lines far longer than a
    /// chunk (seen within the first LINE_CAP bytes only), twice on one line, at the end
    /// without a newline.
    #[test]
    fn find_lines_finds_what_a_split_into_lines_finds() {
        struct Dribble<'a>(&'a [u8], usize);
        impl Read for Dribble<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                // Reads of varying size, some far smaller than a chunk.
                self.1 = (self.1 * 7 + 3) % 5;
                let n = buf
                    .len()
                    .min(self.0.len())
                    .min([1, 100, 70_000, 1 << 20, 3 << 20][self.1]);
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let cap = crate::scan::LINE_CAP;
        let mut text = Vec::new();
        text.extend_from_slice(b"NEEDLE at the start\n");
        text.extend(std::iter::repeat_n(b'x', super::super::CHUNK - 3));
        text.extend_from_slice(b"NEEDLE across the first chunk's end\n");
        text.extend_from_slice(b"a NEEDLE and a NEEDLE on one line\n");
        text.extend(std::iter::repeat_n(b'y', cap - 10));
        text.extend_from_slice(b"NEEDLE past the cap\n");
        text.extend(std::iter::repeat_n(b'z', cap - 20));
        text.extend_from_slice(b"NEEDLE within the cap");
        text.extend(std::iter::repeat_n(b'z', 3 << 20));
        text.extend_from_slice(b"NEEDLE deep in a 3 MiB line\n");
        for i in 0..2000 {
            text.extend_from_slice(format!("line {i} NEEDLE\n").as_bytes());
        }
        text.extend_from_slice(b"last NEEDLE without a newline");
        let naive: Vec<Vec<u8>> = text
            .split(|&b| b == b'\n')
            .map(|line| &line[..line.len().min(cap)])
            .filter(|line| memchr::memmem::find(line, b"NEEDLE").is_some())
            .map(<[u8]>::to_vec)
            .collect();
        let mut found = Vec::new();
        find_lines(Dribble(&text, 0), b"NEEDLE", u64::MAX, |l| {
            found.push(l.to_vec())
        })
        .unwrap();
        assert_eq!(found.len(), naive.len());
        assert!(found == naive, "find_lines differs from the split");
        assert_eq!(naive.len(), 2000 + 5);
    }

    #[test]
    fn binary_data_is_not_opened_as_text_even_compressed() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("a.log");
        std::fs::write(&text, "[rank=0] x\n".repeat(2000)).unwrap();
        let mut all = String::new();
        open_text(&text)
            .unwrap()
            .expect("text")
            .0
            .read_to_string(&mut all)
            .unwrap();
        assert_eq!(all.len(), 11 * 2000, "the sniffed bytes are handed back");
        let pickle = dir.path().join("s.pickle.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"\x80\x04\x95\x00\x00\x00\x00").unwrap();
        std::fs::write(&pickle, gz.finish().unwrap()).unwrap();
        assert!(open_text(&pickle).unwrap().is_none());
    }

    fn read_all(path: &Path) -> Option<(String, NulSkipped)> {
        let (mut reader, nuls) = open_text(path).unwrap()?;
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        Some((text, nuls.get()))
    }

    #[test]
    fn a_rotated_or_preallocated_log_is_read_around_its_nul_runs() {
        let dir = tempfile::tempdir().unwrap();
        let log = "[rank=0] x\n".repeat(2000);
        let rotated = dir.path().join("rotated.log");
        let mut bytes = vec![0u8; 3 << 20];
        bytes.extend_from_slice(log.as_bytes());
        std::fs::write(&rotated, &bytes).unwrap();
        let (text, nuls) = read_all(&rotated).expect("text");
        assert_eq!(text, log);
        assert_eq!((nuls.bytes, nuls.runs, nuls.first_offset), (3 << 20, 1, 0));
        assert_eq!(nuls.note("run.log").unwrap().path, "run.log");
        // Preallocated: zeros after the last line, and a run between two lines.
        let preallocated = dir.path().join("pre.log");
        std::fs::write(&preallocated, format!("{log}\0\0\0{log}\0\0")).unwrap();
        let (text, nuls) = read_all(&preallocated).expect("text");
        assert_eq!(text, format!("{log}{log}"));
        assert_eq!((nuls.bytes, nuls.runs, nuls.first_offset), (5, 2, 22_000));
        // A line cut by the rotation: the run starts the file, the line ends after it.
        let cut = dir.path().join("cut.log");
        std::fs::write(&cut, b"\0\0nk=0] x\n[rank=0] y\n").unwrap();
        assert_eq!(read_all(&cut).unwrap().0, "nk=0] x\n[rank=0] y\n");
        let clean = dir.path().join("clean.log");
        std::fs::write(&clean, &log).unwrap();
        assert_eq!(read_all(&clean).unwrap().1, NulSkipped::default());
        assert_eq!(NulSkipped::default().note("x"), None);
    }

    #[test]
    fn a_nul_run_inside_a_line_followed_by_more_is_binary_data() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("odd.log");
        std::fs::write(&path, b"[rank=0] x\n[rank=0]\0\0 y\n").unwrap();
        assert!(read_all(&path).is_none());
        // After the first SNIFF_BYTES bytes that are not NUL, such a run is read around.
        let late = format!("{}[rank=0]\0\0 y\n", "[rank=0] x\n".repeat(1000));
        std::fs::write(&path, late).unwrap();
        assert!(read_all(&path).unwrap().0.ends_with("[rank=0] y\n"));
        // A line cut by zeros at the very end is a preallocated log's, not binary.
        std::fs::write(&path, b"[rank=0] x\n[rank=0] y\0\0\0").unwrap();
        assert_eq!(read_all(&path).unwrap().0, "[rank=0] x\n[rank=0] y");
    }

    #[test]
    fn runs_of_nul_split_across_reads_count_once() {
        /// Hands out one byte per read.
        struct Trickle<'a>(&'a [u8]);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let Some((&first, rest)) = self.0.split_first() else {
                    return Ok(0);
                };
                buf[0] = first;
                self.0 = rest;
                Ok(1)
            }
        }
        let count = NulCount::default();
        let mut reader = SkipNul {
            inner: Trickle(b"\0\0\0a\n\0\0b\n"),
            seen: 0,
            after_newline: true,
            in_run: false,
            starts_inside_a_line: false,
            count: count.clone(),
        };
        let mut text = String::new();
        reader.read_to_string(&mut text).unwrap();
        assert_eq!(text, "a\nb\n");
        let got = count.get();
        assert_eq!(
            (got.bytes, got.runs, got.first_offset, got.inside_a_line),
            (5, 2, 0, false)
        );
    }

    #[test]
    fn has_nul_looks_at_every_byte() {
        let mut bytes = vec![b'x'; 5 << 20];
        assert!(!has_nul(&bytes));
        *bytes.last_mut().unwrap() = 0;
        assert!(has_nul(&bytes));
        assert!(!has_nul(&[]));
    }
}
