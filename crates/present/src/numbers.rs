//! Numbers as the reports print them: byte sizes in binary units, signed changes, counted nouns.
//!
//! Two styles of byte size stand side by side. The log report prints bare figures in columns
//! whose header or sentence names the unit ([`gib`]: `12.34`; [`mib`]: `16.0`), so that a
//! column of them lines up and compares at a glance. The snapshot report prints each figure with
//! the unit that suits its size ([`bytes`]: `1.50 GiB`, `512 B`). Units are binary throughout:
//! a GiB is 1024³ bytes, as PyTorch and PithTrain count them.
//!
//! Contract: every function is pure and total (any `i64`/`u64` prints); signed forms always
//! carry their sign (`+0.00`).

/// Bytes in a GiB (1024³).
pub const GIB: i64 = 1 << 30;
/// Bytes in a MiB (1024²).
pub const MIB: i64 = 1 << 20;

/// `bytes` in GiB, for charts that plot GiB.
pub fn in_gib(bytes: i64) -> f64 {
    bytes as f64 / GIB as f64
}

/// `12.34`: GiB with two decimals.
pub fn gib(bytes: i64) -> String {
    format!("{:.2}", in_gib(bytes))
}

/// `12.34 GiB`: [`gib`] with its unit.
pub fn gib_unit(bytes: i64) -> String {
    format!("{} GiB", gib(bytes))
}

/// `+1.20 GiB`: [`signed_gib`] with its unit.
pub fn signed_gib_unit(bytes: i64) -> String {
    format!("{} GiB", signed_gib(bytes))
}

/// `+1.20` / `-0.30`: a change in GiB with two decimals and its sign.
pub fn signed_gib(bytes: i64) -> String {
    format!("{:+.2}", in_gib(bytes))
}

/// `16.0`: MiB with one decimal (saved tensors are MiB-sized).
pub fn mib(bytes: i64) -> String {
    format!("{:.1}", bytes as f64 / MIB as f64)
}

/// `1536` → `1.50 KiB`: two decimals in the largest binary unit that keeps the value at or
/// above 1; below 1 KiB, plain bytes (`1023 B`).
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", UNITS[unit])
}

/// `+1.50 KiB` / `-2.00 KiB`: [`bytes`] of the magnitude, with its sign (`+` for zero).
pub fn signed_bytes(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "+" };
    format!("{sign}{}", bytes(n.unsigned_abs()))
}

/// `1 line` / `3 lines`: a count and its noun.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gib_columns_have_two_decimals_and_changes_an_explicit_sign() {
        assert_eq!(gib(3 << 29), "1.50");
        assert_eq!(signed_gib(-(1 << 28)), "-0.25");
        assert_eq!(signed_gib(0), "+0.00");
        assert_eq!(mib(1 << 19), "0.5");
    }

    #[test]
    fn figures_use_the_binary_unit_that_suits_them() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 << 30), "3.00 GiB");
        assert_eq!(bytes(u64::MAX), "16.00 EiB");
        assert_eq!(signed_bytes(-2048), "-2.00 KiB");
        assert_eq!(signed_bytes(i64::MIN), "-8.00 EiB");
    }

    #[test]
    fn nouns_agree_with_their_count() {
        assert_eq!(plural(1, "line", "lines"), "1 line");
        assert_eq!(plural(0, "line", "lines"), "0 lines");
    }
}
