//! Text made safe for the markup the reports write.
//!
//! Contract: [`html`] escapes the five characters that matter in HTML/SVG content and in
//! quoted attribute values; [`markdown`] escapes the characters that would start markdown markup
//! in running text (pipes in table cells are the table writer's business). Everything else
//! passes through unchanged.

/// Escapes `&`, `<`, `>`, `"` and `'` for HTML/SVG content and attribute values.
///
/// ```
/// assert_eq!(
///     memprints_present::escape::html("<a href=\"x\">&'"),
///     "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
/// );
/// ```
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Escapes the characters that would start markdown markup inside running text.
///
/// ```
/// assert_eq!(
///     memprints_present::escape::markdown("module[0] creation_x"),
///     "module\\[0\\] creation\\_x"
/// );
/// ```
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '*' | '_' | '`' | '<' | '>' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
