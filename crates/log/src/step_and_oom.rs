//! The two non-tagged lines the report reads: PithTrain's rank-0 step line and the CUDA OOM error.
//!
//! Contract: [`parse_step_line`] takes any line holding `| step NNN/MMM` and pulls out the fields
//! it knows (`step-time X sec`, `peak-gpu-memory X GB`, where GB is PithTrain's GiB); fields it
//! does not know are ignored, missing ones are `None`. [`parse_oom_line`] takes a line holding
//! `CUDA out of memory`, and reads the launcher's rank prefix (`[rank3]:`, `[default3]:`,
//! `3: `) and the `Tried to allocate X GiB|MiB|KiB|B` amount when they are there.
//!
//! The fast path: a real log holds a step line per step, millions in a long run, so they are not
//! parsed one by one on the thread that folds the report. [`parse_step_ascii`] reads a step line
//! straight from its bytes, with exactly [`parse_step_line`]'s result on every ASCII line
//! (`step-time` left as text until someone needs it), and [`StepRun`] folds consecutive step
//! lines into the figures [`super::schema::Training`] keeps, so the line scanner can hand over
//! one aggregate per stretch of step lines instead of the lines themselves.

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
    /// `peak-gpu-memory X GB` in bytes (PithTrain divides by 1024³); a line with a figure beyond
    /// [`super::parse::MAX_BYTES`] is not a step line.
    pub peak_gpu_memory: Option<i64>,
    /// The line's fingerprint: a hash of its text from `step N/M` to the end (the step and
    /// every figure, not the date or a launcher's prefix), [`digest`]. Two step lines with the
    /// same fingerprint are the same step of the same launch (the step time is there to the
    /// millisecond), so a log that repeats another's step lines is told by it.
    pub digest: u64,
    /// The date the line begins with (`2026-12-01 22:17:50`, after any launcher prefix), as
    /// seconds since 1970-01-01 00:00:00 of the same clock (the time zone is the logging
    /// machine's, unknown here); `None` when the line has none.
    pub time: Option<i64>,
}

/// What one OOM line says: PyTorch's figures, each `None` when the message lacks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OomLine<'a> {
    /// The rank of the launcher's prefix.
    pub rank: Option<u32>,
    /// `Tried to allocate X GiB|MiB|KiB|B|bytes`, in bytes.
    pub tried_to_allocate: Option<i64>,
    /// The device index of `GPU N has a total capacity of …` (local to the node).
    pub gpu: Option<u32>,
    /// `has a total capacity of C`.
    pub capacity: Option<i64>,
    /// `of which F is free`.
    pub free: Option<i64>,
    /// `this process has U memory in use` (PyTorch and everything else the process holds).
    pub process_in_use: Option<i64>,
    /// `A is allocated by PyTorch`.
    pub allocated_by_pytorch: Option<i64>,
    /// `R is reserved by PyTorch but unallocated`.
    pub reserved_unallocated: Option<i64>,
    /// The line from `torch.OutOfMemoryError` (or `CUDA out of memory`) on, whole.
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
            let at = field.as_ptr() as usize - line.as_ptr() as usize;
            out = Some(StepLine {
                step,
                max_steps: max,
                step_time_s: None,
                peak_gpu_memory: None,
                digest: digest(&line.as_bytes()[at..]),
                time: line_time(&line.as_bytes()[..at]),
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
            out.peak_gpu_memory = Some(d.bytes(1 << 30)?);
        }
    }
    Some(out)
}

/// A step line read by [`parse_step_ascii`]: [`StepLine`] with the `step-time` value kept as the
/// text [`parse_step_line`] would parse.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepFields<'a> {
    /// `N` of `step N/M`.
    pub step: u64,
    /// `M` of `step N/M`.
    pub max_steps: Option<u64>,
    /// The text of the last `step-time` field, ` sec` suffixes removed.
    pub step_time: Option<&'a [u8]>,
    /// `peak-gpu-memory X GB` in bytes.
    pub peak_gpu_memory: Option<i64>,
    /// [`StepLine::digest`].
    pub digest: u64,
    /// [`StepLine::time`].
    pub time: Option<i64>,
}

impl StepFields<'_> {
    /// The [`StepLine`] these fields are.
    pub fn line(&self) -> StepLine {
        StepLine {
            step: self.step,
            max_steps: self.max_steps,
            step_time_s: self.step_time.and_then(parse_f64),
            peak_gpu_memory: self.peak_gpu_memory,
            digest: self.digest,
            time: self.time,
        }
    }
}

/// [`StepLine::digest`] of the text from the `step N/M` field on: FNV-1a over its bytes, trailing
/// whitespace left out, then mixed (SplitMix64's finaliser) so that fingerprints can be summed.
pub fn digest(from_step: &[u8]) -> u64 {
    let ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let end = from_step.iter().rposition(|b| !ws(b)).map_or(0, |p| p + 1);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in &from_step[..end] {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The first `YYYY-MM-DD HH:MM:SS` (or `…T…`) in `prefix` (the text before a step line's step
/// field), as seconds since 1970-01-01 00:00:00 of the same clock.
pub fn line_time(prefix: &[u8]) -> Option<i64> {
    const SHAPE: &[u8; 19] = b"dddd-dd-dd dd:dd:dd";
    let fits = |w: &[u8]| {
        w.iter().zip(SHAPE).all(|(&b, &s)| match s {
            b'd' => b.is_ascii_digit(),
            b' ' => b == b' ' || b == b'T',
            _ => b == s,
        })
    };
    let w = prefix.windows(SHAPE.len()).find(|w| fits(w))?;
    let n =
        |r: std::ops::Range<usize>| w[r].iter().fold(0i64, |n, &b| n * 10 + i64::from(b - b'0'));
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    let (hh, mm, ss) = (n(11..13), n(14..16), n(17..19));
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

fn parse_f64(text: &[u8]) -> Option<f64> {
    str::from_utf8(text).ok()?.parse().ok()
}

/// [`parse_step_line`] on the bytes of an ASCII line: the same fields for every line that is
/// ASCII (callers check; on other bytes the result is unspecified, never a panic).
pub fn parse_step_ascii(line: &[u8]) -> Option<StepFields<'_>> {
    // `split(" | ").flat_map(split('|'))` then `trim` is one split at every `|`, trimmed.
    let mut fields = memchr::memchr_iter(b'|', line)
        .chain(std::iter::once(line.len()))
        .scan(0, |start, end| {
            let field = &line[*start..end];
            *start = end + 1;
            Some(field)
        })
        .map(trim_ascii);
    let mut out = None;
    for field in &mut fields {
        if let Some(v) = field.strip_prefix(b"step ") {
            let (step, max) = match memchr::memchr(b'/', v) {
                Some(p) => (&v[..p], parse_u64(&v[p + 1..])),
                None => (v, None),
            };
            let at = field.as_ptr() as usize - line.as_ptr() as usize;
            out = Some(StepFields {
                step: parse_u64(step)?,
                max_steps: max,
                step_time: None,
                peak_gpu_memory: None,
                digest: digest(&line[at..]),
                time: line_time(&line[..at]),
            });
            break;
        }
    }
    let mut out = out?;
    for field in fields {
        // Both keys start with a letter no other PithTrain field starts with here.
        match field.first() {
            Some(b's') => {
                if let Some(v) = field.strip_prefix(b"step-time ") {
                    let mut v = v;
                    while let Some(rest) = v.strip_suffix(b" sec") {
                        v = rest;
                    }
                    out.step_time = Some(v);
                }
            }
            Some(b'p') => {
                if let Some(v) = field.strip_prefix(b"peak-gpu-memory ") {
                    let (d, _) = decimal(v)?;
                    out.peak_gpu_memory = Some(d.bytes(1 << 30)?);
                }
            }
            _ => {}
        }
    }
    Some(out)
}

/// `str::trim` on ASCII: the whitespace of `char::is_whitespace` below 0x80.
fn trim_ascii(s: &[u8]) -> &[u8] {
    let ws = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut s = s;
    while let [first, rest @ ..] = s
        && ws(*first)
    {
        s = rest;
    }
    while let [rest @ .., last] = s
        && ws(*last)
    {
        s = rest;
    }
    s
}

/// `u64::from_str`: an optional `+`, then one or more digits, no overflow.
fn parse_u64(s: &[u8]) -> Option<u64> {
    let digits = s.strip_prefix(b"+").unwrap_or(s);
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then_some(())
            .and_then(|()| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
    })
}

/// Consecutive step lines, folded: what [`super::schema::Training`] keeps of them, so that the
/// whole stretch folds into a run's training figures as the lines would one by one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepRun {
    /// Step lines folded.
    pub lines: u64,
    /// The first of them.
    pub first: StepLine,
    /// The step number of the last.
    pub last_step: u64,
    /// The last `M` of `step N/M` printed.
    pub max_steps: Option<u64>,
    /// The highest `peak-gpu-memory` (`None` below any value).
    pub peak_gpu_memory: Option<i64>,
    /// The first step that printed it.
    pub peak_step: Option<u64>,
    /// The highest `peak-gpu-memory` of steps ≥ 2, which have optimizer state (`None` below
    /// any value).
    pub steady_peak_gpu_memory: Option<i64>,
    /// The wrapping sum of the lines' [`StepLine::digest`]s: the same however the lines are
    /// cut into stretches.
    pub digest: u64,
    /// The date of the last dated line ([`StepLine::time`]).
    pub last_time: Option<i64>,
}

impl StepRun {
    /// A stretch of one line.
    pub fn new(first: StepLine) -> Self {
        let mut run = StepRun {
            lines: 0,
            first,
            last_step: first.step,
            max_steps: None,
            peak_gpu_memory: None,
            peak_step: None,
            steady_peak_gpu_memory: None,
            digest: 0,
            last_time: None,
        };
        run.fold(
            first.step,
            first.max_steps,
            first.peak_gpu_memory,
            first.digest,
            first.time,
        );
        run
    }

    /// Folds in the next step line.
    pub fn add(&mut self, line: &StepFields<'_>) {
        self.fold(
            line.step,
            line.max_steps,
            line.peak_gpu_memory,
            line.digest,
            line.time,
        );
    }

    fn fold(
        &mut self,
        step: u64,
        max_steps: Option<u64>,
        peak_gpu_memory: Option<i64>,
        digest: u64,
        time: Option<i64>,
    ) {
        self.lines += 1;
        self.last_step = step;
        self.max_steps = max_steps.or(self.max_steps);
        if peak_gpu_memory > self.peak_gpu_memory {
            self.peak_gpu_memory = peak_gpu_memory;
            self.peak_step = Some(step);
        }
        if step >= 2 && peak_gpu_memory > self.steady_peak_gpu_memory {
            self.steady_peak_gpu_memory = peak_gpu_memory;
        }
        self.digest = self.digest.wrapping_add(digest);
        self.last_time = time.or(self.last_time);
    }
}

/// A [`line_time`] as the log printed it: `2026-12-01 22:17:50`.
pub fn format_time(secs: i64) -> String {
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Parses a line holding `CUDA out of memory`: PyTorch's message reads (2.x)
/// `CUDA out of memory. Tried to allocate X. GPU N has a total capacity of C of which F is free.
/// Including non-PyTorch memory, this process has U memory in use. Of the allocated memory A is
/// allocated by PyTorch, and R is reserved by PyTorch but unallocated. …`; each figure is read
/// where its words are found, so an older or shorter message gives what it holds.
pub fn parse_oom_line(line: &str) -> Option<OomLine<'_>> {
    let at = line.find("CUDA out of memory")?;
    let start = line[..at]
        .rfind("torch.")
        .filter(|&p| line[p..at].contains("OutOfMemoryError"));
    let message = line[start.unwrap_or(at)..].trim_end();
    let after = |words: &str| {
        let (_, rest) = message.split_once(words)?;
        size(rest)
    };
    // `… memory A is allocated by PyTorch`: the figure sits before its words.
    let before = |words: &str| {
        let end = message.find(words)?;
        let head = message[..end].trim_end();
        let unit_start = head.rfind(' ')?;
        let figure_start = head[..unit_start].rfind(' ').map_or(0, |p| p + 1);
        size(&head[figure_start..])
    };
    let gpu = message.split_once("GPU ").and_then(|(_, rest)| {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..n].parse().ok()
    });
    Some(OomLine {
        rank: launcher_rank(line),
        tried_to_allocate: after("Tried to allocate "),
        gpu,
        capacity: after("total capacity of "),
        free: before(" is free"),
        process_in_use: before(" memory in use"),
        allocated_by_pytorch: before(" is allocated by PyTorch"),
        reserved_unallocated: before(" is reserved by PyTorch but unallocated"),
        message,
    })
}

/// A size as PyTorch's allocator formats it (`2.00 GiB`, `20.00 MiB`, `512 bytes`), at the start
/// of `text`, in bytes.
fn size(text: &str) -> Option<i64> {
    let (d, rest) = decimal(text.as_bytes())?;
    let unit = match rest {
        [b' ', b'G', b'i', b'B', ..] => 1 << 30,
        [b' ', b'M', b'i', b'B', ..] => 1 << 20,
        [b' ', b'K', b'i', b'B', ..] => 1 << 10,
        [b' ', b'B', ..] | [b' ', b'b', b'y', b't', b'e', b's', ..] => 1,
        _ => return None,
    };
    d.bytes(unit)
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
                digest: digest(
                    b"step 00000001/00004096 | step-time 1.234 sec | cross-entropy-loss 10.1234 \
                      | learning-rate 1.000000e-04 | peak-gpu-memory 61.23 GB"
                ),
                time: Some(1_784_714_400),
            })
        );
    }

    #[test]
    fn a_step_line_is_fingerprinted_from_its_step_on_and_dated() {
        let a = parse_step_line(
            "2026-12-01 22:17:50 | INFO | step 00000001/00000003 | step-time 10.963 sec | \
             peak-gpu-memory 0.18 GB",
        )
        .unwrap();
        let b = parse_step_line(
            "[rank0]: 12/01 | step 00000001/00000003 | step-time 10.963 sec | \
             peak-gpu-memory 0.18 GB  ",
        )
        .unwrap();
        let c = parse_step_line(
            "2026-12-01 22:17:50 | INFO | step 00000001/00000003 | step-time 10.964 sec | \
             peak-gpu-memory 0.18 GB",
        )
        .unwrap();
        assert_eq!(a.digest, b.digest, "the same step and figures");
        assert_ne!(a.digest, c.digest, "another step time");
        // 2026-12-01 22:17:50 as `date -u -d '2026-12-01 22:17:50' +%s` gives it.
        assert_eq!((a.time, b.time), (Some(1_796_163_470), None));
        assert_eq!(line_time(b"1970-01-01T00:00:01 x"), Some(1));
        assert_eq!(line_time(b"2024-02-29 12:00:00"), Some(1_709_208_000));
        assert_eq!(line_time(b"2024-13-29 12:00:00"), None);
        for text in [
            "2026-12-01 22:17:50",
            "2024-02-29 00:00:59",
            "1969-12-31 23:59:59",
        ] {
            assert_eq!(format_time(line_time(text.as_bytes()).unwrap()), text);
        }
    }

    #[test]
    fn the_byte_parser_reads_step_lines_as_the_text_parser_does() {
        let lines = [
            "2026-12-01 20:18:18 | INFO | step 00000001/00000003 | step-time 10.177 sec | \
             cross-entropy-loss 8.3687 | learning-rate 3.000000e-04 | gradient-norm 87.3109 | \
             tokens-per-second 805 | peak-gpu-memory 0.18 GB",
            "x | step 7 | step-time 1e3 sec sec | peak-gpu-memory 1 GB | peak-gpu-memory 2.5 GB",
            "x | step +7/8/9 | step-time nan | step-time bad",
            "x|step 3/|peak-gpu-memory 1.0",
            "x | step 3 /4",
            "x | step -3/4",
            "x | step 99999999999999999999/4",
            "x | step 5/4 | peak-gpu-memory x GB",
            "x | step 5/4 | peak-gpu-memory 16666666666666 GB",
            "x | steps 5/4 | step 6/7\t|\x0bstep-time 2.0 \r",
            "a | step over here",
            "| step ",
        ];
        for line in lines {
            assert_eq!(
                parse_step_ascii(line.as_bytes()).map(|f| f.line()),
                parse_step_line(line),
                "{line}"
            );
        }
        assert!(parse_step_ascii(lines[0].as_bytes()).is_some());
    }

    #[test]
    fn a_step_run_folds_as_the_lines_would() {
        let first = StepLine {
            step: 1,
            max_steps: Some(10),
            step_time_s: Some(2.5),
            peak_gpu_memory: None,
            digest: 1,
            time: Some(100),
        };
        let fields = |step, max_steps, peak_gpu_memory| StepFields {
            step,
            max_steps,
            step_time: None,
            peak_gpu_memory,
            digest: step,
            time: None,
        };
        let mut run = StepRun::new(first);
        run.add(&fields(2, None, Some(5)));
        run.add(&fields(3, Some(11), Some(7)));
        run.add(&fields(4, None, Some(7)));
        assert_eq!((run.digest, run.last_time), (10, Some(100)));
        assert_eq!((run.lines, run.last_step, run.max_steps), (4, 4, Some(11)));
        assert_eq!((run.peak_gpu_memory, run.peak_step), (Some(7), Some(3)));
        assert_eq!(run.first, first);
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
    fn an_oom_line_gives_every_figure_of_pytorchs_message() {
        let line = "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. \
                    GPU 0 has a total capacity of 139.81 GiB of which 1.12 GiB is free. Including \
                    non-PyTorch memory, this process has 138.68 GiB memory in use. Of the allocated \
                    memory 135.02 GiB is allocated by PyTorch, and 2.41 GiB is reserved by PyTorch \
                    but unallocated. If reserved but unallocated memory is large try setting \
                    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See \
                    documentation for Memory Management  \
                    (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
        let oom = parse_oom_line(line).unwrap();
        let gib = |x: f64| (x * (1u64 << 30) as f64).round() as i64;
        assert_eq!(oom.tried_to_allocate, Some(20 << 20));
        assert_eq!(oom.gpu, Some(0));
        assert_eq!(oom.capacity, Some(gib(139.81)));
        assert_eq!(oom.free, Some(gib(1.12)));
        assert_eq!(oom.process_in_use, Some(gib(138.68)));
        assert_eq!(oom.allocated_by_pytorch, Some(gib(135.02)));
        assert_eq!(oom.reserved_unallocated, Some(gib(2.41)));
        assert!(
            oom.message.ends_with("#environment-variables)"),
            "kept whole"
        );
    }

    #[test]
    fn an_oom_line_with_few_figures_gives_those() {
        let oom = parse_oom_line("RuntimeError: CUDA out of memory. Tried to allocate 512 bytes")
            .unwrap();
        assert_eq!(oom.tried_to_allocate, Some(512));
        assert_eq!((oom.capacity, oom.free, oom.gpu), (None, None, None));
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
