//! Inputs that may be compressed: gzip (`1f 8b`, concatenated members included) and zstd
//! (`28 b5 2f fd`) are recognised by their magic bytes and decompressed on the fly, so
//! `node0.log.gz` and `memory_snapshot_rank0_step0.pickle.zst` read like the plain files.

use std::io::{self, BufRead, Read};

/// gzip's magic bytes.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// zstd's magic bytes.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Whether an input's first bytes are gzip's or zstd's magic: it is read decompressed
/// ([`decompressed`]).
pub fn is_compressed(head: &[u8]) -> bool {
    head.starts_with(&GZIP_MAGIC) || head.starts_with(&ZSTD_MAGIC)
}

/// The largest zstd window accepted, as a power of two (zstd's own default limit).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The memory the decompressor of an input starting with `head` takes at most: gzip's 32 KiB
/// window and state, or the window a zstd frame declares (at most
/// 2^[`ZSTD_WINDOW_LOG_MAX`]); 0 for a plain input.
pub fn window_bytes(head: &[u8]) -> u64 {
    if head.starts_with(&GZIP_MAGIC) {
        return 64 << 10;
    }
    if !head.starts_with(&ZSTD_MAGIC) {
        return 0;
    }
    let most = 1u64 << ZSTD_WINDOW_LOG_MAX;
    let Some(&descriptor) = head.get(4) else {
        return most;
    };
    // A single-segment frame's window is its content: the size after any dictionary id.
    if descriptor & 0x20 != 0 {
        let at = 5 + [0, 1, 2, 4][usize::from(descriptor & 3)];
        let len = [1, 2, 4, 8][usize::from(descriptor >> 6)];
        let Some(field) = head.get(at..at + len) else {
            return most;
        };
        let mut le = [0; 8];
        le[..len].copy_from_slice(field);
        let size = u64::from_le_bytes(le) + if len == 2 { 256 } else { 0 };
        return size.min(most);
    }
    let Some(&window) = head.get(5) else {
        return most;
    };
    let base = 1u64 << (10 + u32::from(window >> 3));
    (base + base / 8 * u64::from(window & 7)).min(most)
}

/// Wraps `input` in the decompressor its first bytes call for, or returns it as it is.
pub fn decompressed<R: BufRead + 'static>(mut input: R) -> io::Result<Box<dyn Read>> {
    let head = input.fill_buf()?;
    Ok(if head.starts_with(&GZIP_MAGIC) {
        Box::new(flate2::read::MultiGzDecoder::new(input))
    } else if head.starts_with(&ZSTD_MAGIC) {
        let mut decoder = zstd::stream::read::Decoder::with_buffer(input)?;
        decoder.window_log_max(ZSTD_WINDOW_LOG_MAX)?;
        Box::new(decoder)
    } else {
        Box::new(input)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(bytes: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        decompressed(io::Cursor::new(bytes))
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    #[test]
    fn plain_gzip_and_zstd_inputs_read_the_same() {
        let text = b"[rank=0] setup_model | before model creation: alloc=0.00\n".to_vec();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &text).unwrap();
        assert_eq!(read_all(text.clone()), text);
        assert_eq!(read_all(gz.finish().unwrap()), text);
        assert_eq!(read_all(zstd::encode_all(&text[..], 1).unwrap()), text);
    }

    #[test]
    fn a_zstd_window_is_read_from_its_frame_header() {
        let small = zstd::encode_all(&[7u8; 100][..], 1).unwrap();
        assert!(window_bytes(&small) <= 1 << 20, "{}", window_bytes(&small));
        // Single-segment with a 1-byte content size: the window is the content's 100 bytes.
        assert_eq!(window_bytes(&[0x28, 0xb5, 0x2f, 0xfd, 0x20, 100]), 100);
        // Not single-segment, window descriptor 0x58: 2^(10 + 11) = 2 MiB.
        assert_eq!(window_bytes(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x58]), 2 << 20);
        assert_eq!(window_bytes(b"\x80\x04"), 0);
    }

    #[test]
    fn an_empty_input_is_read_as_empty() {
        assert!(read_all(Vec::new()).is_empty());
    }
}
