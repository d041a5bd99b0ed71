//! The user's choices for one instrumentation: which global ranks print, which layers get
//! per-stage detail, and where step snapshots go; parsed from the command line and rendered as the
//! Python literals the templates need.

use crate::error::{Error, Result};

/// The one owner of every default a user does not type: the command line's `default_value`s
/// and the library's fallbacks both read these.
pub mod defaults {
    /// `--ranks`: global rank 0 prints.
    pub const RANKS: &str = "0";
    /// The detail layers when nothing says which are MoE: layers 0 and 1.
    pub const DETAIL_LAYERS: [u32; 2] = [0, 1];
    /// `--snapshot-dir`: where the memory snapshot pickles go.
    pub const SNAPSHOT_DIR: &str = "/tmp";
}

/// What `add` was asked for, after validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Global ranks that print, sorted and unique (the skill's `RANKS`).
    pub ranks: Vec<u32>,
    /// Layer indices with per-stage detail, sorted and unique (the skill's `DETAIL_LAYERS`).
    pub detail_layers: Vec<u32>,
    /// Folder the memory snapshots are written to.
    pub snapshot_dir: String,
}

impl Params {
    /// The defaults: rank 0, layers 0 and 1, snapshots in `/tmp`.
    pub fn defaults() -> Self {
        Params {
            ranks: vec![0],
            detail_layers: defaults::DETAIL_LAYERS.to_vec(),
            snapshot_dir: defaults::SNAPSHOT_DIR.into(),
        }
    }

    /// `{3, 14}`: the Python set literal of the ranks.
    pub fn ranks_literal(&self) -> String {
        format!("{{{}}}", join(&self.ranks))
    }

    /// `(5, 6)` or `(5,)`: the Python tuple literal of the detail layers.
    pub fn layers_literal(&self) -> String {
        match self.detail_layers.as_slice() {
            [one] => format!("({one},)"),
            many => format!("({})", join(many)),
        }
    }
}

/// The placeholders whose values `status` reads back out of an instrumented tree, each with a
/// regular expression for the literal [`Params`] renders it as.
pub const READ_BACK: [(&str, &str); 3] = [
    ("RANKS", r"\{[0-9, ]*\}"),
    ("DETAIL_LAYERS", r"\([0-9, ]*\)"),
    ("SNAPSHOT_DIR", r#"[^"]*"#),
];

fn join(values: &[u32]) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The largest rank or layer index a list may hold: below [`crate::pithtrain::placement::MAX_SIZE`].
pub const MAX_INDEX: u32 = crate::pithtrain::placement::MAX_SIZE - 1;

/// The most entries a rank or layer list may have: each one becomes code in the inserted
/// Python, and no run prints from thousands of ranks.
pub const MAX_ENTRIES: usize = 1024;

/// Parses `3,14` (spaces allowed) into sorted unique non-negative integers, each at most
/// [`MAX_INDEX`], at most [`MAX_ENTRIES`] of them.
pub fn parse_index_list(what: &'static str, input: &str) -> Result<Vec<u32>> {
    let invalid = |reason: String| Error::InvalidArgument {
        what,
        input: shorten(input),
        reason,
    };
    if input.split(',').nth(MAX_ENTRIES).is_some() {
        return Err(invalid(format!("more than {MAX_ENTRIES} entries")));
    }
    let mut values = Vec::new();
    for part in input.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(invalid(
                "expected comma-separated non-negative integers, e.g. 3,14".into(),
            ));
        }
        let too_large = || {
            invalid(format!(
                "{part} is too large: each must be 0 to {MAX_INDEX}"
            ))
        };
        if !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid(format!("`{part}` is not a non-negative integer")));
        }
        let value = part.parse::<u32>().map_err(|_| too_large())?;
        if value > MAX_INDEX {
            return Err(too_large());
        }
        values.push(value);
    }
    values.sort_unstable();
    values.dedup();
    Ok(values)
}

/// `input` as an error message quotes it: its first 80 characters.
fn shorten(input: &str) -> String {
    match input.char_indices().nth(80) {
        Some((end, _)) => format!("{}…", &input[..end]),
        None => input.to_string(),
    }
}

/// Parses the contents of a Python set or tuple literal of integers (`{3, 14}` or `(5,)`).
pub fn parse_python_int_collection(literal: &str) -> Option<Vec<u32>> {
    let inner = literal
        .trim()
        .strip_prefix(['{', '('])?
        .strip_suffix(['}', ')'])?;
    let mut values = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        values.push(part.parse().ok()?);
    }
    Some(values)
}

/// Checks that a snapshot folder can sit inside a Python f-string unescaped.
pub fn validate_snapshot_dir(dir: &str) -> Result<String> {
    let bad = dir
        .chars()
        .find(|c| matches!(c, '"' | '\\' | '{' | '}' | '\n' | '\r'));
    if let Some(c) = bad {
        return Err(Error::InvalidArgument {
            what: "--snapshot-dir",
            input: dir.to_string(),
            reason: format!("the character {c:?} cannot go into the generated f-string"),
        });
    }
    if dir.is_empty() {
        return Err(Error::InvalidArgument {
            what: "--snapshot-dir",
            input: String::new(),
            reason: "empty path".into(),
        });
    }
    let trimmed = dir.trim_end_matches('/');
    Ok(if trimmed.is_empty() {
        "/".to_string()
    } else {
        trimmed.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_lists_are_sorted_and_deduplicated() {
        assert_eq!(parse_index_list("--ranks", "14, 3,3").unwrap(), vec![3, 14]);
    }

    #[test]
    fn garbage_in_an_index_list_is_an_error_naming_the_part() {
        let err = parse_index_list("--ranks", "3,x").unwrap_err().to_string();
        assert!(err.contains("`x` is not a non-negative integer"), "{err}");
        assert!(parse_index_list("--ranks", "-1").is_err());
        assert!(parse_index_list("--ranks", "").is_err());
        assert!(parse_index_list("--ranks", "1,,2").is_err());
    }

    #[test]
    fn index_lists_are_bounded_in_value_and_length() {
        assert_eq!(
            parse_index_list("--ranks", &MAX_INDEX.to_string()).unwrap(),
            vec![MAX_INDEX]
        );
        let err = parse_index_list("--ranks", "1048576")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("1048576 is too large: each must be 0 to 1048575"),
            "{err}"
        );
        // Past u32 too: still too large, not "not an integer".
        let err = parse_index_list("--ranks", "4294967296")
            .unwrap_err()
            .to_string();
        assert!(
            err.ends_with("4294967296 is too large: each must be 0 to 1048575"),
            "{err}"
        );
        let many = (0..=MAX_ENTRIES).map(|i| i.to_string()).collect::<Vec<_>>();
        let err = parse_index_list("--detail-layers", &many.join(","))
            .unwrap_err()
            .to_string();
        assert!(err.contains("more than 1024 entries"), "{err}");
        assert!(err.len() < 200, "the input is shortened: {err}");
        let thirty = (0..30).map(|i| i.to_string()).collect::<Vec<_>>();
        assert_eq!(
            parse_index_list("--ranks", &thirty.join(","))
                .unwrap()
                .len(),
            30
        );
    }

    #[test]
    fn the_default_ranks_text_parses_to_the_default_ranks() {
        assert_eq!(
            parse_index_list("--ranks", defaults::RANKS).unwrap(),
            Params::defaults().ranks
        );
    }

    #[test]
    fn literals_render_as_python() {
        let params = Params {
            ranks: vec![3, 14],
            detail_layers: vec![5],
            snapshot_dir: "/tmp".into(),
        };
        assert_eq!(params.ranks_literal(), "{3, 14}");
        assert_eq!(params.layers_literal(), "(5,)");
        assert_eq!(parse_python_int_collection("{3, 14}"), Some(vec![3, 14]));
        assert_eq!(parse_python_int_collection("(5,)"), Some(vec![5]));
    }

    #[test]
    fn snapshot_dirs_that_would_break_the_fstring_are_refused() {
        assert!(validate_snapshot_dir("/tmp/{x}").is_err());
        assert_eq!(
            validate_snapshot_dir("/scratch/snaps/").unwrap(),
            "/scratch/snaps"
        );
        assert_eq!(validate_snapshot_dir("/").unwrap(), "/");
    }
}
