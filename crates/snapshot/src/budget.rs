//! The memory budget of reading snapshots (`--max-memory`, default [`DEFAULT_MAX_MEMORY`]).
//!
//! A pickle of a few hundred kilobytes can describe gigabytes: a memo of 67 million slots, a
//! stack of 4 million values, 30 million trace entries, each within the reader's own limits.
//! So every file is read against a [`Meter`]: the decoder charges what it allocates (memo
//! slots, stack slots, records, interned strings and frames, generic lists and dicts, the
//! decompressor's window) and stops with [`OverBudget`] once the charges pass the meter's
//! limit. Charges count what is allocated and never what is freed, so they bound the peak.
//!
//! Many files share one [`Pool`] of the whole budget: a file is read only once the pool can
//! hold its reservation (an estimate from its size on disk, [`reservation`]), so the files in
//! flight together never pass the budget whatever the core count. A file that needs more than
//! its reservation stops and is read again alone against the whole budget
//! ([`crate::load_all`]); only one that needs more than that is refused.

use std::sync::{Condvar, Mutex};

/// The budget when `--max-memory` is not given: 1 GiB.
pub const DEFAULT_MAX_MEMORY: u64 = 1 << 30;

/// What every file is charged before its first byte: the read buffers and the decoder's
/// tables (a few hundred KiB), rounded up.
pub const BASE_CHARGE: u64 = 1 << 20;

/// The least a file may take when [`size_cap`] applies: room for any real snapshot of a few
/// MiB, and well under the 256 MiB a hostile one may make memprints use.
pub const CAP_FLOOR: u64 = 192 << 20;

/// A file's reservation is at least this, so that small files do not retry for want of room.
const MIN_RESERVATION: u64 = 8 << 20;

/// Reading needed more memory than the meter allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget;

/// What one file may still allocate: charges add up and fail past `limit`.
#[derive(Debug, Clone, Copy)]
pub struct Meter {
    used: u64,
    limit: u64,
}

impl Meter {
    /// A meter allowing `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Meter { used: 0, limit }
    }

    /// A meter that never fails (tests, and readers of trusted bytes).
    pub fn unlimited() -> Self {
        Meter::new(u64::MAX)
    }

    /// Adds `bytes`; `Err` once the total passes the limit (and on every later charge).
    #[inline(always)]
    pub fn charge(&mut self, bytes: u64) -> Result<(), OverBudget> {
        self.used = self.used.saturating_add(bytes);
        if self.used > self.limit {
            return Err(OverBudget);
        }
        Ok(())
    }

    /// The bytes charged so far.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }
}

/// The memory a file is expected to need, from its size on disk and whether its name says it
/// is compressed: about twice a plain pickle (records, then the analysis), twenty times a
/// compressed one, at least [`MIN_RESERVATION`] and at most `budget`. Only an estimate: the
/// [`Meter`] enforces it.
pub fn reservation(file_bytes: u64, compressed: bool, budget: u64) -> u64 {
    let factor = if compressed { 20 } else { 2 };
    file_bytes
        .saturating_mul(factor)
        .saturating_add(BASE_CHARGE)
        .max(MIN_RESERVATION)
        .min(budget)
}

/// The most a file of `file_bytes` on disk may take to read unless `--max-memory` was given:
/// 256 times a compressed file, 32 times a plain one, at least [`CAP_FLOOR`]. A real
/// snapshot's records and analysis take a few times its pickle, and a gzipped pickle is a
/// tenth of it or more; a few hundred KiB that describe gigabytes (a memo of 67 million slots)
/// are hostile, and are refused at the floor instead of growing to the budget.
pub fn size_cap(file_bytes: u64, compressed: bool) -> u64 {
    let factor = if compressed { 256 } else { 32 };
    file_bytes.saturating_mul(factor).max(CAP_FLOOR)
}

/// The whole budget, shared by the files read at once. Reservations are granted first come,
/// first served: a large one waits for room rather than being overtaken forever.
pub struct Pool {
    total: u64,
    state: Mutex<PoolState>,
    changed: Condvar,
}

struct PoolState {
    free: u64,
    /// The next ticket to hand out, and the ticket whose turn it is.
    next: u64,
    serving: u64,
}

impl Pool {
    /// A pool of `total` bytes.
    pub fn new(total: u64) -> Self {
        Pool {
            total,
            state: Mutex::new(PoolState {
                free: total,
                next: 0,
                serving: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// The whole budget.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Waits until `bytes` (at most [`Pool::total`]) are free and every earlier request was
    /// granted, then takes them. Holders never wait on anything, so every wait ends.
    pub fn acquire(&self, bytes: u64) -> u64 {
        let bytes = bytes.min(self.total);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let ticket = state.next;
        state.next += 1;
        while state.serving != ticket || state.free < bytes {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        state.free -= bytes;
        state.serving += 1;
        self.changed.notify_all();
        bytes
    }

    /// Gives back `bytes` taken by [`Pool::acquire`].
    pub fn release(&self, bytes: u64) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.free += bytes;
        self.changed.notify_all();
    }
}

/// Reads a size as `--max-memory` takes it: plain bytes, or a number (decimals allowed) with
/// `K`, `M`, `G` or `T`, optionally followed by `i`, `B` or `iB`; every unit is a power of
/// 1024 (`1G` = `1GiB` = 1073741824 bytes).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let not_a_size = || format!("'{text}': not a size (use e.g. 512M, 1G, 1GiB or bytes)");
    if number.is_empty() {
        return Err(not_a_size());
    }
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "ki" | "kib" => 10,
        "m" | "mb" | "mi" | "mib" => 20,
        "g" | "gb" | "gi" | "gib" => 30,
        "t" | "tb" | "ti" | "tib" => 40,
        _ => {
            return Err(format!(
                "'{text}': unknown unit (use e.g. 512M, 1G, 1GiB or bytes)"
            ));
        }
    };
    let value: f64 = number.parse().map_err(|_| not_a_size())?;
    let bytes = value * (1u64 << shift) as f64;
    if !(1.0..=u64::MAX as f64).contains(&bytes) {
        return Err(format!("'{text}': must be at least 1 byte"));
    }
    Ok(bytes as u64)
}

/// A size as a person reads it: `1 GiB`, `512 MiB`, `1.5 GiB`, `1000 bytes`.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u32, &str); 4] = [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")];
    for (shift, unit) in UNITS {
        let one = 1u64 << shift;
        if bytes >= one {
            let value = bytes as f64 / one as f64;
            return if bytes.is_multiple_of(one) {
                format!("{} {unit}", bytes / one)
            } else {
                format!("{value:.1} {unit}")
            };
        }
    }
    format!("{bytes} bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_binary_units_and_plain_bytes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1gb"), Ok(1 << 30));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("1048576"), Ok(1 << 20));
        assert_eq!(parse_size("64 KiB"), Ok(64 << 10));
        assert!(parse_size("0").is_err());
        assert!(parse_size("G").unwrap_err().contains("not a size"));
        assert!(parse_size("12X").unwrap_err().contains("unknown unit"));
    }

    #[test]
    fn sizes_print_in_the_largest_whole_unit() {
        assert_eq!(format_size(1 << 30), "1 GiB");
        assert_eq!(format_size(512 << 20), "512 MiB");
        assert_eq!(format_size(3 << 29), "1.5 GiB");
        assert_eq!(format_size(1000), "1000 bytes");
    }

    #[test]
    fn a_meter_fails_past_its_limit_and_stays_failed() {
        let mut m = Meter::new(100);
        assert_eq!(m.charge(60), Ok(()));
        assert_eq!(m.charge(40), Ok(()));
        assert_eq!(m.charge(1), Err(OverBudget));
        assert_eq!(m.charge(0), Err(OverBudget));
    }

    #[test]
    fn reservations_grow_with_the_file_within_the_budget() {
        assert_eq!(reservation(1000, false, 1 << 30), MIN_RESERVATION);
        assert_eq!(size_cap(200 << 10, true), CAP_FLOOR);
        assert_eq!(size_cap(100 << 20, true), 25_600 << 20);
        assert_eq!(size_cap(100 << 20, false), 3_200 << 20);
        assert_eq!(
            reservation(100 << 20, false, 1 << 30),
            (200 << 20) + BASE_CHARGE
        );
        assert_eq!(reservation(100 << 20, true, 1 << 30), 1 << 30);
    }

    #[test]
    fn a_pool_grants_in_order_and_takes_back() {
        let pool = Pool::new(100);
        assert_eq!(pool.acquire(60), 60);
        assert_eq!(pool.acquire(40), 40);
        pool.release(100);
        // Clamped to the whole budget.
        assert_eq!(pool.acquire(500), 100);
    }
}
