//! Whether one file holds exactly what `add` puts in: strip it, add the same groups again to
//! what is left, with the ranks, layers and snapshot folder read off that file, and compare
//! with the file. `status` reports the [`Verdict`]; `remove` writes the stripped text only
//! where it is [`Verdict::Exact`] (or, with `--force`, also where it is not).
//!
//! Each file is judged on its own, so any subset of the six files can be instrumented (a partial
//! `remove`, a partial edit) and any one of them can still be taken out. Within a file, the
//! groups may be there all or some (`1A` without `4`: the user took the prints out and left
//! the helpers); each subset is tried.

use super::group::Group;
use super::groups_of;
use super::strip::strip;
use super::vocabulary::Vocabulary;
use crate::error::{Error, Result};
use crate::params::{Params, parse_python_int_collection};
use crate::pithtrain::Target;
use memprints_python::PySource;
use memprints_python::edit::FileEdits;
use memprints_python::edit::format::FormatSettings;

/// What a file holds, measured against `add`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Exactly what `add` inserts (some of its groups, or all) on the stripped text.
    Exact,
    /// The user edited inside inserted code: these line ranges (1-based, inclusive) of the file
    /// differ from what `add` would insert. Empty when inserted lines were deleted.
    Edited {
        /// The differing lines.
        lines: Vec<(usize, usize)>,
    },
    /// The removal cannot be checked: stripping failed, or `add` fails on the stripped text.
    Unverifiable {
        /// Why.
        reason: String,
    },
}

/// One file, judged.
#[derive(Debug, Clone)]
pub struct FileCheck {
    /// The file's target.
    pub target: Target,
    /// Path relative to the root.
    pub rel: String,
    /// The text on disk.
    pub current: String,
    /// The text without the instrumentation, when stripping worked.
    pub stripped: Option<String>,
    /// How the file compares with what `add` puts in.
    pub verdict: Verdict,
}

impl FileCheck {
    /// True when stripping changes nothing: no instrumentation to take out.
    pub fn is_clean(&self) -> bool {
        self.stripped.as_deref() == Some(self.current.as_str())
    }
}

/// Judges `src`, the file of `target`. Values the file does not hold come from `fallback`
/// (they cannot change what `add` writes into it).
pub fn check(
    settings: &FormatSettings,
    target: Target,
    src: &PySource,
    fallback: &Params,
) -> FileCheck {
    let judged = |stripped: Option<String>, verdict| FileCheck {
        target,
        rel: src.rel.clone(),
        current: src.text.clone(),
        stripped,
        verdict,
    };
    let unverifiable = |stripped, e: Error| {
        judged(
            stripped,
            Verdict::Unverifiable {
                reason: e.to_string(),
            },
        )
    };
    let text = match strip(src, settings) {
        Ok(text) => text,
        Err(e) => return unverifiable(None, e),
    };
    if text == src.text {
        return judged(Some(text), Verdict::Exact);
    }
    // A stripped text that does not parse is never written, not even with `--force`.
    let candidate = match PySource::parse(src.rel.clone(), text.clone()) {
        Ok(candidate) => candidate,
        Err(e) => return unverifiable(None, e.into()),
    };
    let params = params_in(target, src, fallback);
    let groups: Vec<&'static Group> = groups_of(target).collect();
    let full = plan_groups(settings, &params, target, &candidate, &groups);
    if full
        .as_deref()
        .is_ok_and(|planned| inserted(planned, &src.text))
    {
        return judged(Some(text), Verdict::Exact);
    }
    // Some of the groups: all subsets but the full one, larger ones first.
    let mut subsets: Vec<u32> = (1..(1u32 << groups.len()) - 1).collect();
    subsets.sort_by_key(|mask| std::cmp::Reverse(mask.count_ones()));
    for mask in subsets {
        let some: Vec<&Group> = groups
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, g)| *g)
            .collect();
        if plan_groups(settings, &params, target, &candidate, &some)
            .is_ok_and(|planned| inserted(&planned, &src.text))
        {
            return judged(Some(text), Verdict::Exact);
        }
    }
    match full {
        Ok(planned) => judged(Some(text), edited_lines(&planned, &src.text)),
        Err(e) => unverifiable(Some(text), e),
    }
}

/// Lines earlier versions of `add` inserted where the templates now insert others, as (the
/// lines now, the lines then), each without its indentation and line end. A file instrumented
/// by an earlier memprints is then still what `add` put in: `status` says so and `remove`
/// takes it out, where comparing with today's text alone would call it edited.
const EARLIER: &[(&[&str], &[&str])] = &[
    // Group 2: init_process_group before it recorded the GPU's total memory.
    (
        &[
            r#"f"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f} ""#,
            r#"f"gpu_total={_total / G:.2f} ({_total} bytes)","#,
        ],
        &[r#"f"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f}","#],
    ),
];

/// Whether `current` is `planned` (what `add` inserts today) or what an earlier `add` inserted
/// instead ([`EARLIER`]).
fn inserted(planned: &str, current: &str) -> bool {
    planned == current || earlier(planned).is_some_and(|then| then == current)
}

/// `planned` with every run of lines [`EARLIER`] knows written as it was, each line keeping
/// the indentation and line end of the first it replaces; `None` when there is none.
fn earlier(planned: &str) -> Option<String> {
    let lines: Vec<&str> = planned.split_inclusive('\n').collect();
    let mut out = String::with_capacity(planned.len());
    let mut changed = false;
    let mut i = 0;
    while i < lines.len() {
        let found = EARLIER.iter().find(|(now, _)| {
            lines.len() - i >= now.len() && now.iter().zip(&lines[i..]).all(|(n, l)| bare(l) == *n)
        });
        let Some((now, then)) = found else {
            out.push_str(lines[i]);
            i += 1;
            continue;
        };
        let first = lines[i];
        let indent = &first[..first.len() - first.trim_start_matches([' ', '\t']).len()];
        let end = &first[first.trim_end_matches(['\r', '\n']).len()..];
        for line in *then {
            out.push_str(indent);
            out.push_str(line);
            out.push_str(end);
        }
        changed = true;
        i += now.len();
    }
    changed.then_some(out)
}

/// A line without its indentation and line end.
fn bare(line: &str) -> &str {
    line.trim_start_matches([' ', '\t'])
        .trim_end_matches(['\r', '\n'])
}

/// The ranks, detail layers and snapshot folder written in `src`, each from `fallback` where
/// the file holds none.
pub fn params_in(target: Target, src: &PySource, fallback: &Params) -> Params {
    let vocabulary = Vocabulary::get();
    let list = |placeholder: &str, otherwise: &Vec<u32>| {
        vocabulary
            .read_back_in(placeholder, target, src)
            .and_then(|literal| parse_python_int_collection(&literal))
            .unwrap_or_else(|| otherwise.clone())
    };
    Params {
        ranks: list("RANKS", &fallback.ranks),
        detail_layers: list("DETAIL_LAYERS", &fallback.detail_layers),
        snapshot_dir: vocabulary
            .read_back_in("SNAPSHOT_DIR", target, src)
            .unwrap_or_else(|| fallback.snapshot_dir.clone()),
    }
}

/// `add`'s text for `groups` (of `target`) on `src`.
fn plan_groups(
    settings: &FormatSettings,
    params: &Params,
    target: Target,
    src: &PySource,
    groups: &[&Group],
) -> Result<String> {
    super::add::require_torch(target, src)?;
    let mut edits = FileEdits::new(src, settings);
    for group in groups {
        (group.insert)(&mut edits, params)?;
    }
    Ok(edits.apply()?)
}

/// Which lines of `current` differ from `expected`.
fn edited_lines(expected: &str, current: &str) -> Verdict {
    let diff = similar::TextDiff::from_lines(expected, current);
    let lines = diff
        .ops()
        .iter()
        .filter(|op| op.tag() != similar::DiffTag::Equal && !op.new_range().is_empty())
        .map(|op| {
            let range = op.new_range();
            (range.start + 1, range.end)
        })
        .collect();
    Verdict::Edited { lines }
}

/// Line ranges as a message writes them: `12, 30-32`.
pub fn ranges_text(lines: &[(usize, usize)]) -> String {
    lines
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template;

    /// Each run of lines [`EARLIER`] replaces is what a template inserts today: a template
    /// change that moves them fails here, not in a user's tree.
    #[test]
    fn the_lines_earlier_forms_replace_are_in_the_templates() {
        for (now, _) in EARLIER {
            let found = template::ALL.iter().any(|file| {
                file.blocks().any(|section| {
                    let lines: Vec<&str> =
                        file.block(section.name).lines().map(str::trim).collect();
                    lines.windows(now.len()).any(|w| w == *now)
                })
            });
            assert!(found, "no template inserts {now:?}");
        }
    }

    #[test]
    fn earlier_forms_keep_indentation_and_line_ends() {
        let planned = "if r:\r\n\tprint(\r\n\t\tf\"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f} \"\r\n\t\tf\"gpu_total={_total / G:.2f} ({_total} bytes)\",\r\n\t)\r\n";
        assert_eq!(
            earlier(planned).as_deref(),
            Some(
                "if r:\r\n\tprint(\r\n\t\tf\"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f}\",\r\n\t)\r\n"
            )
        );
        assert_eq!(earlier("x = 1\n"), None);
        assert!(inserted("x = 1\n", "x = 1\n"));
        assert!(!inserted("x = 1\n", "x = 2\n"));
    }
}
