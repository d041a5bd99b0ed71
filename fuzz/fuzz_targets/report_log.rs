//! Any bytes as a log: the line scanner, the report builder and every renderer never panic, and
//! the fast paths agree with the plain reading: the report of the bytes scanned on two threads
//! (step lines folded on the scanning thread) and on one, is the report of every line that
//! holds a needle fed to the builder one by one (each cut to the 64 KiB the scanner keeps, its
//! needles found in its raw bytes, as the scanner's contract says).
#![no_main]

use libfuzzer_sys::fuzz_target;
use memprints_log::scan::{LINE_CAP, Mode, NEEDLES, lines};
use memprints_present::report::{self as render, Format};
use memprints_log::step_and_oom::{parse_step_ascii, parse_step_line};
use memprints_log::{Report, ReportBuilder};

fn scanned(data: &[u8], serial: bool) -> Report {
    let mut b = ReportBuilder::new(None);
    b.begin_source(0);
    let counts = if serial {
        lines::scan_serial(data, Mode::FoldSteps, |item| b.item(item))
    } else {
        lines::scan(data, Mode::FoldSteps, |item| b.item(item))
    }
    .expect("reading from memory cannot fail");
    b.count_scan(counts);
    b.finish(vec!["fuzz.log".to_owned()])
}

fn line_by_line(data: &[u8]) -> Report {
    let mut b = ReportBuilder::new(None);
    b.begin_source(0);
    let mut parts: Vec<&[u8]> = data.split(|&c| c == b'\n').collect();
    if parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    for line in parts {
        b.count_lines(1);
        let line = &line[..line.len().min(LINE_CAP)];
        let found = (0..NEEDLES.len())
            .filter(|&k| memchr::memmem::find(line, NEEDLES[k]).is_some())
            .fold(0, |set, k| set | 1 << k);
        if found != 0 {
            b.line_with(line, found);
        }
    }
    b.finish(vec!["fuzz.log".to_owned()])
}

fuzz_target!(|data: &[u8]| {
    let fast = scanned(data, false);
    let json = render::json(&fast);
    assert_eq!(json, render::json(&scanned(data, true)), "scan and scan_serial differ");
    if !data.split(|&c| c == b'\n').any(|l| l.len() > LINE_CAP) {
        assert_eq!(json, render::json(&line_by_line(data)), "fast and line by line differ");
    }
    for format in [Format::Text, Format::Markdown, Format::Html] {
        let _ = render::render(&fast, format, false);
    }
    let _ = render::render(&fast, Format::Text, true);
    // The byte parser of step lines is the text parser on every ASCII line.
    if data.is_ascii() {
        let text = std::str::from_utf8(data).expect("ASCII");
        for line in text.split('\n') {
            assert_eq!(
                parse_step_ascii(line.as_bytes()).map(|f| f.line()),
                parse_step_line(line),
                "{line:?}"
            );
        }
    }
});
