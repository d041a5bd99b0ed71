//! The two non-tagged lines the report reads: PithTrain's rank-0 step line and the CUDA OOM error.
//!
//! Contract: [`parse_step_line`] takes any line holding `| step NNN/MMM` and pulls out the fields
//! it knows (`step-time X sec`, `peak-gpu-memory X GB`, where GB is PithTrain's GiB); fields it
//! does not know are ignored, missing ones are `None`. [`parse_oom_line`] takes a line holding
//! `CUDA out of memory`, and reads the launcher's rank prefix (`[rank3]:`, `[default3]:`,
//! `3: `) and the `Tried to allocate X GiB|MiB|KiB|B` amount when they are there.

use super::parse::decimal;

/// What one training step line says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLine {
    /// `N` of `step N/M`.
    pub step: u64,
    /// `M` of `step N/M`.
    pub max_steps: Option<u64>,
    /// `step-time X sec`.
    pub step_time_s: Option<f64>,
    /// `peak-gpu-memory X GB` in bytes (PithTrain divides by 1024³).
    pub peak_gpu_memory: Option<i64>,
}

/// What one OOM line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomLine<'a> {
    /// The rank of the launcher's prefix.
    pub rank: Option<u32>,
    /// `Tried to allocate X GiB|MiB|KiB|B`, in bytes.
    pub tried_to_allocate: Option<i64>,
    /// The line from `torch.OutOfMemoryError` (or `CUDA out of memory`) on.
    pub message: &'a str,
}

/// Parses a PithTrain step line; `None` when `| step ` is not followed by `N/M` or `N`.
pub fn parse_step_line(line: &str) -> Option<StepLine> {
    let mut out: Option<StepLine> = None;
    let mut fields = line.split(" | ").flat_map(|f| f.split('|')).map(str::trim);
    for field in &mut fields {
        if let Some(v) = field.strip_prefix("step ") {
            let (step, max) = match v.split_once('/') {
                Some((s, m)) => (s, m.parse().ok()),
                None => (v, None),
            };
            let step = step.parse().ok()?;
            out = Some(StepLine {
                step,
                max_steps: max,
                step_time_s: None,
                peak_gpu_memory: None,
            });
            break;
        }
    }
    let mut out = out?;
    for field in fields {
        if let Some(v) = field.strip_prefix("step-time ") {
            out.step_time_s = v.trim_end_matches(" sec").parse().ok();
        } else if let Some(v) = field.strip_prefix("peak-gpu-memory ") {
            let (d, _) = decimal(v.as_bytes())?;
            out.peak_gpu_memory = Some(d.scaled(1 << 30));
        }
    }
    Some(out)
}

/// Parses a line holding `CUDA out of memory`.
pub fn parse_oom_line(line: &str) -> Option<OomLine<'_>> {
    let at = line.find("CUDA out of memory")?;
    let start = line[..at]
        .rfind("torch.")
        .filter(|&p| line[p..at].contains("OutOfMemoryError"));
    let message = line[start.unwrap_or(at)..].trim_end();
    let tried_to_allocate = message
        .split_once("Tried to allocate ")
        .and_then(|(_, rest)| {
            let (d, rest) = decimal(rest.as_bytes())?;
            let unit = match rest {
                [b' ', b'G', b'i', b'B', ..] => 1 << 30,
                [b' ', b'M', b'i', b'B', ..] => 1 << 20,
                [b' ', b'K', b'i', b'B', ..] => 1 << 10,
                [b' ', b'B', ..] => 1,
                _ => return None,
            };
            Some(d.scaled(unit))
        });
    Some(OomLine {
        rank: launcher_rank(line),
        tried_to_allocate,
        message,
    })
}

/// The rank a launcher put in front of a line: `[rank3]:`, `[default3]:` or `3: `.
pub fn launcher_rank(line: &str) -> Option<u32> {
    fn digits(s: &str) -> Option<(Option<u32>, &str)> {
        let n = s.bytes().take_while(u8::is_ascii_digit).count();
        (n > 0).then(|| (s[..n].parse().ok(), &s[n..]))
    }
    for open in ["[rank", "[default"] {
        if let Some(pos) = line.find(open) {
            let rest = &line[pos + open.len()..];
            if let Some((rank, rest)) = digits(rest)
                && rest.starts_with("]:")
            {
                return rank;
            }
        }
    }
    let (rank, rest) = digits(line.trim_start())?;
    // `10:00:00` is a clock, not a rank label.
    let label = rest.starts_with(':') && !rest[1..].starts_with(|c: char| c.is_ascii_digit());
    if label { rank } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_line_gives_step_time_and_peak() {
        let line = "2026-07-22 10:00:00 | INFO | step 00000001/00004096 | step-time 1.234 sec | \
                    cross-entropy-loss 10.1234 | learning-rate 1.000000e-04 | peak-gpu-memory 61.23 GB";
        assert_eq!(
            parse_step_line(line),
            Some(StepLine {
                step: 1,
                max_steps: Some(4096),
                step_time_s: Some(1.234),
                peak_gpu_memory: Some(65_745_211_884),
            })
        );
    }

    #[test]
    fn a_step_line_without_optional_fields_still_counts() {
        let s =
            parse_step_line("x | INFO | step 00000007/00000010 | cross-entropy-loss 2.0").unwrap();
        assert_eq!((s.step, s.step_time_s, s.peak_gpu_memory), (7, None, None));
    }

    #[test]
    fn prose_mentioning_a_step_is_not_a_step_line() {
        assert_eq!(parse_step_line("a | step over here"), None);
    }

    #[test]
    fn an_oom_line_gives_rank_amount_and_message() {
        let line = "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. \
                    GPU 3 has a total capacity of 139.81 GiB";
        let oom = parse_oom_line(line).unwrap();
        assert_eq!(oom.rank, Some(3));
        assert_eq!(oom.tried_to_allocate, Some(2 << 30));
        assert!(
            oom.message
                .starts_with("torch.OutOfMemoryError: CUDA out of memory.")
        );
    }

    #[test]
    fn launcher_prefixes_are_recognised() {
        assert_eq!(launcher_rank("[default12]: x"), Some(12));
        assert_eq!(launcher_rank("5: torch.OutOfMemoryError"), Some(5));
        assert_eq!(
            launcher_rank("torch.OutOfMemoryError: CUDA out of memory"),
            None
        );
        assert_eq!(launcher_rank("2026-07-22 10:00:00 x"), None);
        assert_eq!(launcher_rank("10:00:00 x"), None);
    }
}
