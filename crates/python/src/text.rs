//! Line-wise text helpers shared by the templates and the edits: indenting and de-indenting a
//! block, and writing it with a file's newline. They work on `\n`-separated text; a file's `\r\n`
//! is put back by [`with_newline`] only, at the very end, so every other step sees `\n` alone.

/// Indents every non-empty line of `text` by `prefix`; empty lines stay empty (no trailing
/// whitespace), and a trailing newline stays a trailing newline.
///
/// ```
/// use memprints_python::text::indent;
///
/// assert_eq!(indent("a\n  b", "    "), "    a\n      b");
/// // Empty lines get no indentation, so no trailing whitespace appears.
/// assert_eq!(indent("a\n\nb", "  "), "  a\n\n  b");
/// // A final newline is kept as it is; without one, none is added.
/// assert_eq!(indent("a\n", "  "), "  a\n");
/// assert_eq!(indent("a", "  "), "  a");
/// // The prefix is copied verbatim, tabs included.
/// assert_eq!(indent("a", "\t"), "\ta");
/// assert_eq!(indent("", "  "), "");
/// ```
pub fn indent(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len() + prefix.len() * 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if !line.is_empty() {
            out.push_str(prefix);
            out.push_str(line);
        }
    }
    out
}

/// Removes the indentation `prefix` (a line's leading spaces and tabs) from every line; a line
/// that starts with less of it loses what it has of it, so tabs and spaces are never mixed up.
///
/// ```
/// use memprints_python::text::dedent;
///
/// assert_eq!(dedent("    a\n        b", "    "), "a\n    b");
/// // Lines indented less than `prefix` (and empty lines) lose what they have of it.
/// assert_eq!(dedent("    a\n  b\n\n    c", "    "), "a\nb\n\nc");
/// // A trailing newline stays; none is added.
/// assert_eq!(dedent("    a\n", "    "), "a\n");
/// // A tab-indented block loses its tabs; a tab is never taken for spaces.
/// assert_eq!(dedent("\t\ta\n\t\t\tb", "\t\t"), "a\n\tb");
/// assert_eq!(dedent("\ta", "    "), "\ta");
/// assert_eq!(dedent("", "    "), "");
/// ```
pub fn dedent(text: &str, prefix: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let common = line
            .bytes()
            .zip(prefix.bytes())
            .take_while(|(a, b)| a == b)
            .count();
        out.push_str(&line[common..]);
    }
    out
}

/// `text` (with `\n` line ends) written with the newline `newline` (`"\n"` or `"\r\n"`).
///
/// ```
/// use memprints_python::text::with_newline;
///
/// assert_eq!(with_newline("a\nb\n".to_string(), "\r\n"), "a\r\nb\r\n");
/// assert_eq!(with_newline("a\nb".to_string(), "\n"), "a\nb");
/// ```
pub fn with_newline(text: String, newline: &str) -> String {
    match newline {
        "\n" => text,
        other => text.replace('\n', other),
    }
}

/// The leading spaces and tabs of `line`.
///
/// ```
/// use memprints_python::text::leading_whitespace;
///
/// assert_eq!(leading_whitespace("    x = 1"), "    ");
/// assert_eq!(leading_whitespace("\t x"), "\t ");
/// assert_eq!(leading_whitespace("x"), "");
/// ```
pub fn leading_whitespace(line: &str) -> &str {
    &line[..line.len() - line.trim_start_matches([' ', '\t']).len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedent_then_indent_gives_back_indented_text() {
        let text = "    a\n\n        b";
        assert_eq!(indent(&dedent(text, "    "), "    "), text);
    }
}
