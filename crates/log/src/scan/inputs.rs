//! Opening a log for a scanner, and the check that keeps binary files out of it.
//!
//! Contract:
//! - [`open`] sniffs the first bytes of a file: gzip (`1f 8b`) and zstd (`28 b5 2f fd`) are
//!   decompressed on the fly (concatenated gzip members included); anything else is read as is.
//! - [`open_text`]: opens a file through [`open`] and returns `None` when the first
//!   [`SNIFF_BYTES`] bytes of what it reads hold a NUL byte: no log has one, every pickle and
//!   archive does. The bytes read to decide are handed back in front of the rest.
//! - [`big_plain_file`]: a file worth mapping and scanning by chunks ([`super::Chunked`]).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

/// How much of a file's decompressed start is checked for a NUL byte.
pub const SNIFF_BYTES: usize = 8192;

/// Opens `path`, decompressing gzip or zstd when the magic bytes say so.
pub fn open(path: &Path) -> io::Result<Box<dyn Read>> {
    memprints_snapshot::compressed::decompressed(BufReader::with_capacity(
        64 * 1024,
        File::open(path)?,
    ))
}

/// `path` opened for the line scanner, or `None` when it holds binary data.
pub fn open_text(path: &Path) -> io::Result<Option<Box<dyn Read>>> {
    Ok(open_text_head(path)?.map(|(reader, _)| reader))
}

/// PithTrain's line at the start of every launch, logged once by rank 0:
/// `<date> <time> | INFO | launch(cfg=PretrainLMCfg(…))`.
pub const LAUNCH_NEEDLE: &[u8] = b"| launch(cfg=";

/// How far into a file (decompressed) its launch line is looked for: the torchrun banner,
/// NCCL's lines and the setup prints come before it.
pub const LAUNCH_HEAD_BYTES: usize = 64 * 1024;

/// [`open_text`], and whether the file's first [`LAUNCH_HEAD_BYTES`] hold a launch line
/// ([`LAUNCH_NEEDLE`]): a file that launches training, not one that goes on with another's.
pub fn open_text_head(path: &Path) -> io::Result<Option<(Box<dyn Read>, bool)>> {
    let mut reader = open(path)?;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut reader)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)?;
    if memchr::memchr(0, &head).is_some() {
        return Ok(None);
    }
    if head.len() == SNIFF_BYTES {
        (&mut reader)
            .take((LAUNCH_HEAD_BYTES - SNIFF_BYTES) as u64)
            .read_to_end(&mut head)?;
    }
    let launches = memchr::memmem::find(&head, LAUNCH_NEEDLE).is_some();
    Ok(Some((
        Box::new(io::Cursor::new(head).chain(reader)),
        launches,
    )))
}

/// `path` opened for [`super::chunked`], when it is a regular file of at least
/// [`super::chunked::MIN_SIZE`] bytes that is neither compressed nor binary (no NUL byte in its
/// first [`SNIFF_BYTES`]); `None` for anything else, to be read through [`open_text`].
pub fn big_plain_file(path: &Path) -> io::Result<Option<std::fs::File>> {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() < super::chunked::MIN_SIZE {
        return Ok(None);
    }
    let mut head = [0u8; SNIFF_BYTES];
    file.read_exact_at(&mut head, 0)?;
    let compressed = head.starts_with(&[0x1f, 0x8b]) || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]);
    if compressed || memchr::memchr(0, &head).is_some() {
        return Ok(None);
    }
    Ok(Some(file))
}

#[cfg(test)]
mod tests {
    use super::*;

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
            .read_to_string(&mut all)
            .unwrap();
        assert_eq!(all.len(), 11 * 2000, "the sniffed bytes are handed back");
        let pickle = dir.path().join("s.pickle.gz");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(b"\x80\x04\x95\x00\x00\x00\x00").unwrap();
        std::fs::write(&pickle, gz.finish().unwrap()).unwrap();
        assert!(open_text(&pickle).unwrap().is_none());
    }
}
