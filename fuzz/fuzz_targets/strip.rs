//! The status/strip recogniser on any text: the first byte picks which of the six files it is
//! (execution.py, dualpipev.py, the model, distributed.py, training.py, pretrain_lm.py), the
//! rest is the file. Counting markers, stripping and verifying never panic; and where the
//! verification says the file holds exactly what `add` inserts (what `remove` writes), the
//! stripped text parses, holds fewer markers than the file did, and strips to itself.
//!
//! (Fewer, not none: markers are counted in the text, so a user's string that quotes an
//! inserted label still counts; the second kept input in `tests/data/fuzz/strip` is such a file.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use memprints_python::edit::format::FormatSettings;
use memprints_codemod::instrument::strip::strip;
use memprints_codemod::instrument::verify::{self, Verdict};
use memprints_codemod::instrument::vocabulary::Vocabulary;
use memprints_codemod::instrument::{GROUPS, groups_of};
use memprints_codemod::params::Params;
use memprints_codemod::pithtrain::Target;
use memprints_python::PySource;

/// Marker blocks of every group found in `text`.
fn markers(text: &str) -> usize {
    let vocabulary = Vocabulary::get();
    GROUPS
        .iter()
        .flat_map(|g| g.markers.iter().map(move |m| (g, m)))
        .map(|(g, m)| vocabulary.count(g.template, m.block, text))
        .sum()
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let target = Target::ALL[which as usize % Target::ALL.len()];
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let vocabulary = Vocabulary::get();
    for group in groups_of(target) {
        for marker in group.markers {
            let _ = vocabulary.count(group.template, marker.block, text);
        }
    }
    let Ok(src) = PySource::parse("fuzz.py", text.to_string()) else {
        return;
    };
    for placeholder in ["RANKS", "DETAIL_LAYERS", "SNAPSHOT_DIR"] {
        let _ = vocabulary.read_back_in(placeholder, target, &src);
    }
    let settings = FormatSettings::default();
    let _ = strip(&src, &settings);
    let fallback = Params {
        ranks: vec![0],
        detail_layers: vec![0, 1],
        snapshot_dir: "/tmp".into(),
    };
    let check = verify::check(&settings, target, &src, &fallback);
    if check.verdict == Verdict::Exact
        && let Some(stripped) = &check.stripped
        && stripped != text
    {
        let parsed = PySource::parse("fuzz.py", stripped.clone())
            .expect("what remove writes parses");
        assert!(
            markers(stripped) < markers(text),
            "what remove writes holds fewer markers"
        );
        assert_eq!(
            strip(&parsed, &settings).expect("stripping a stripped file works"),
            *stripped,
            "what remove writes strips to itself"
        );
    }
});
