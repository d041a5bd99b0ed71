//! The bytes a line walk stops at, found 64 at a time in one pass: line ends, `[` (where a rank
//! tag may start), the escape byte, and the probe bytes of the step and OOM needles (`|`, the
//! `U` of `CUDA`).
//!
//! Contract: [`each_block`] calls its visitor with the offset of a run of 64-byte blocks of
//! the input and their masks, runs in order, up to [`RUN`] blocks each: bit `i` of mask `k` is
//! set exactly when the byte at `offset + 64·k + i` is one of [`MARKS`] (the last block may
//! be shorter; its mask has no bit past the input). The visitor may stop the pass by
//! returning `false`. (Blocks come by runs so that the visitor, too big to be inlined, is
//! called once per kilobyte rather than once per block.)
//!
//! Why by hand: `memchr` finds at most three bytes at once, so a walk over a print-dense region
//! needed a `memchr3` call per line and two more passes (memmem) for the step and OOM needles.
//! One compare per mark byte and block, and a bit loop, do all of it in one pass. The AVX2
//! version is chosen at run time; SSE2 is part of every x86_64 CPU; elsewhere a portable
//! loop gives the same masks.

/// The bytes marked.
pub const MARKS: [u8; 5] = [b'\n', b'[', 0x1b, b'|', b'U'];

/// The most blocks handed to the visitor at once.
pub const RUN: usize = 16;

/// Calls `visit(offset, masks)` for each run of 64-byte blocks of `bytes` (see the module
/// doc) until it returns `false`.
#[inline(always)]
pub fn each_block(bytes: &[u8], visit: impl FnMut(usize, &[u64]) -> bool) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, checked just above.
            unsafe { x86::each_block_avx2(bytes, visit) };
        } else {
            // SAFETY: every x86_64 CPU has SSE2.
            unsafe { x86::each_block_sse2(bytes, visit) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    blocks(bytes, portable_mask, visit);
}

/// Calls `visit(offset)` for each byte of `bytes` that is one of [`MARKS`], in order.
#[inline(always)]
pub fn each_mark(bytes: &[u8], mut visit: impl FnMut(usize)) {
    each_block(bytes, |run, masks| {
        for (k, &mask) in masks.iter().enumerate() {
            let base = run + 64 * k;
            let mut mask = mask;
            while mask != 0 {
                visit(base + mask.trailing_zeros() as usize);
                mask &= mask - 1;
            }
        }
        true
    });
}

/// The pass over the blocks with `mask` for each full one and the portable loop for the rest.
#[inline(always)]
fn blocks(
    bytes: &[u8],
    mask: impl Fn(&[u8; 64]) -> u64,
    mut visit: impl FnMut(usize, &[u64]) -> bool,
) {
    let mut masks = [0u64; RUN];
    let mut at = 0;
    while at < bytes.len() {
        let run = &bytes[at..bytes.len().min(at + 64 * RUN)];
        let mut n = 0;
        for block in run.chunks(64) {
            masks[n] = match block.try_into() {
                Ok(block) => mask(block),
                Err(_) => tail_mask(block),
            };
            n += 1;
        }
        if !visit(at, &masks[..n]) {
            return;
        }
        at += run.len();
    }
}

/// The mask of up to 64 bytes, one at a time.
#[inline(always)]
fn tail_mask(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .enumerate()
        .fold(0, |m, (i, b)| m | u64::from(MARKS.contains(b)) << i)
}

/// The mask of a block without SIMD.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn portable_mask(block: &[u8; 64]) -> u64 {
    tail_mask(block)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{MARKS, blocks};
    use std::arch::x86_64::*;

    /// [`super::each_block`] with AVX2: two 32-byte compares per mark byte and block.
    ///
    /// # Safety
    /// The CPU must have AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn each_block_avx2(bytes: &[u8], visit: impl FnMut(usize, &[u64]) -> bool) {
        let marks = MARKS.map(|b| _mm256_set1_epi8(b as i8));
        let half = |p: *const u8| {
            // SAFETY: `p` points at 32 readable bytes (a half of a 64-byte block).
            let v = unsafe { _mm256_loadu_si256(p.cast()) };
            let hit = marks
                .iter()
                .map(|&m| _mm256_cmpeq_epi8(v, m))
                .reduce(|a, b| _mm256_or_si256(a, b))
                .expect("marks");
            u64::from(_mm256_movemask_epi8(hit) as u32)
        };
        blocks(
            bytes,
            |block| {
                let p = block.as_ptr();
                // SAFETY: `block` is 64 bytes.
                half(p) | half(unsafe { p.add(32) }) << 32
            },
            visit,
        );
    }

    /// [`super::each_block`] with SSE2: four 16-byte compares per mark byte and block.
    ///
    /// # Safety
    /// The CPU must have SSE2 (every x86_64 CPU has).
    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn each_block_sse2(bytes: &[u8], visit: impl FnMut(usize, &[u64]) -> bool) {
        let marks = MARKS.map(|b| _mm_set1_epi8(b as i8));
        let quarter = |p: *const u8| {
            // SAFETY: `p` points at 16 readable bytes (a quarter of a 64-byte block).
            let v = unsafe { _mm_loadu_si128(p.cast()) };
            let hit = marks
                .iter()
                .map(|&m| _mm_cmpeq_epi8(v, m))
                .reduce(|a, b| _mm_or_si128(a, b))
                .expect("marks");
            u64::from(_mm_movemask_epi8(hit) as u16)
        };
        blocks(
            bytes,
            |block| {
                let p = block.as_ptr();
                // SAFETY: `block` is 64 bytes; each offset leaves 16 of them.
                (0..4).fold(0, |m, k| m | quarter(unsafe { p.add(16 * k) }) << (16 * k))
            },
            visit,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masks(
        bytes: &[u8],
        each: impl Fn(&[u8], &mut dyn FnMut(usize, &[u64]) -> bool),
    ) -> Vec<u64> {
        let mut out = Vec::new();
        let mut next = 0;
        each(bytes, &mut |at, m| {
            assert_eq!(at, next, "runs in order");
            assert!(!m.is_empty() && m.len() <= RUN);
            next += 64 * m.len();
            out.extend_from_slice(m);
            true
        });
        out
    }

    #[test]
    fn every_way_finds_each_mark_and_nothing_else() {
        // Every byte value at every place of a block, marks among them, and a short tail.
        let bytes: Vec<u8> = (0..64 * 39 + 37)
            .map(|i: usize| (i * 37 + i / 64) as u8)
            .chain(MARKS.iter().copied().cycle().take(70))
            .collect();
        let want: Vec<u64> = bytes.chunks(64).map(tail_mask).collect();
        assert_eq!(masks(&bytes, |b, v| each_block(b, v)), want);
        assert_eq!(masks(&bytes, |b, v| blocks(b, portable_mask, v)), want);
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: every x86_64 CPU has SSE2.
            let sse2 = masks(&bytes, |b, v| unsafe { x86::each_block_sse2(b, v) });
            assert_eq!(sse2, want);
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: checked just above.
                let avx2 = masks(&bytes, |b, v| unsafe { x86::each_block_avx2(b, v) });
                assert_eq!(avx2, want);
            }
        }
        let ones: u32 = want.iter().map(|m| m.count_ones()).sum();
        let marked: Vec<usize> = (0..bytes.len())
            .filter(|&i| MARKS.contains(&bytes[i]))
            .collect();
        assert_eq!(ones as usize, marked.len());
        assert!(marked.len() > 70);
        let mut seen = Vec::new();
        each_mark(&bytes, |at| seen.push(at));
        assert_eq!(seen, marked);
    }

    #[test]
    fn the_visitor_stops_the_pass() {
        let mut seen = 0;
        each_block(&[b'\n'; 64 * RUN * 10], |_, _| {
            seen += 1;
            seen < 3
        });
        assert_eq!(seen, 3);
    }
}
