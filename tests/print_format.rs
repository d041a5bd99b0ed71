//! The bench's log generator against the printed format's spec (`memprints-format`).
//!
//! `bench/gen_real_log.py` writes no print of its own: it re-ranks the memory prints of the
//! kept real GPU logs (`tests/data/e2e/defaults-pp1/`). Here every print line it writes, in
//! both profiles, must be one of the spec's shapes (its literal text exact, each figure
//! written as its format spec writes it) and must parse. The Rust generator
//! (`tests/support/loggen.rs`) writes its prints with `memprints_format::fill` itself.

use std::process::Command;

use memprints_format::{Piece, SHAPES, Shape, Unit};
use memprints_log::parse::parse_print;
use regex::Regex;

/// A regex that matches exactly the lines `shape` prints, whatever the values.
fn line_regex(shape: &Shape) -> Regex {
    let mut re = String::from("^");
    for piece in shape.pieces() {
        match piece {
            Piece::Literal(text) => re.push_str(&regex::escape(text)),
            Piece::Field { name, spec } => {
                let unit = shape
                    .fields
                    .iter()
                    .find(|f| f.name == name)
                    .expect("every placeholder is a field")
                    .unit;
                re.push_str(match (spec, unit) {
                    (".2f", _) => r"-?\d+\.\d\d",
                    ("+.2f", _) => r"[+-]\d+\.\d\d",
                    (".1f", _) => r"-?\d+\.\d",
                    ("", Unit::Text) => r".+?",
                    ("", _) => r"-?\d+",
                    (other, _) => panic!("no pattern for the spec {other:?}"),
                });
            }
        }
    }
    re.push('$');
    Regex::new(&re).expect("a valid regex")
}

fn generated(profile: &str) -> String {
    let out = Command::new("python3")
        .args([
            "bench/gen_real_log.py",
            "--size-mib",
            "1",
            "--world",
            "12",
            "--pp",
            "3",
            "--profile",
            profile,
        ])
        .output()
        .expect("python3 runs bench/gen_real_log.py");
    assert!(
        out.status.success(),
        "gen_real_log.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("the generated log is UTF-8")
}

#[test]
fn every_print_the_bench_generator_writes_is_a_shape_of_the_spec() {
    let shapes: Vec<(&Shape, Regex)> = SHAPES.iter().map(|s| (s, line_regex(s))).collect();
    for profile in ["realistic", "dense"] {
        let log = generated(profile);
        let mut prints = 0;
        let mut seen = std::collections::BTreeSet::new();
        for line in log.lines().filter(|l| l.starts_with("[rank=")) {
            prints += 1;
            let Some((shape, _)) = shapes.iter().find(|(_, re)| re.is_match(line)) else {
                panic!(
                    "gen_real_log.py --profile {profile} writes a print of no shape:\n    {line}"
                );
            };
            seen.insert(shape.name);
            assert!(
                parse_print(line.as_bytes()).is_some(),
                "shape `{}` matches but the reader does not parse:\n    {line}",
                shape.name
            );
        }
        assert!(prints > 100, "{profile}: only {prints} prints");
        assert!(seen.len() > 30, "{profile}: only the shapes {seen:?}");
    }
}
