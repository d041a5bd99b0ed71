//! Unified diffs (the `similar` crate) for `--dry-run` and error messages.

/// A unified diff of `old` to `new`, labelled `a/<path>` and `b/<path>`; empty when equal.
pub fn unified(path: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}
