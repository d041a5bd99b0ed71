//! Inputs that may be compressed: gzip (`1f 8b`, concatenated members included) and zstd
//! (`28 b5 2f fd`) are recognised by their magic bytes and decompressed on the fly, so
//! `node0.log.gz` and `memory_snapshot_rank0_step0.pickle.zst` read like the plain files.

use std::io::{self, BufRead, Read};

/// The largest zstd window accepted, as a power of two (zstd's own default limit).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// Wraps `input` in the decompressor its first bytes call for, or returns it as it is.
pub fn decompressed<R: BufRead + 'static>(mut input: R) -> io::Result<Box<dyn Read>> {
    let head = input.fill_buf()?;
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(input))
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
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
    fn an_empty_input_is_read_as_empty() {
        assert!(read_all(Vec::new()).is_empty());
    }
}
