//! The document as terminal text: comfy-table tables, headings, and, only when asked, ANSI
//! colours (bold headings, yellow warnings, red errors). Cells themselves stay uncoloured so
//! column widths are right.
//!
//! Contract: given a width, every heading, paragraph and note is wrapped to it at spaces (a
//! word longer than the width, such as a path, is broken), and every table is kept within it by
//! wrapping its cells; the summary takes at most [`summary::MAX_LINES`] lines counted from the
//! top. Without a width nothing is wrapped.

use super::doc::{Block, Tone};
use super::summary;
use crate::table::Border;

/// The narrowest width prose is wrapped to, however narrow the terminal.
const MIN_WIDTH: usize = 40;

/// Renders `doc` as text, wrapped to `width` columns when given; `color` adds ANSI escapes.
pub fn render(doc: &[Block], color: bool, width: Option<usize>) -> String {
    let width = width.map(|w| w.max(MIN_WIDTH));
    let wrap = |text: &str| match width {
        // Never at a hyphen (`peak-gpu-memory` is a name); a word longer than the line is broken.
        Some(w) => textwrap::fill(
            text,
            textwrap::Options::new(w)
                .break_words(true)
                .word_splitter(textwrap::WordSplitter::NoHyphenation),
        ),
        None => text.to_owned(),
    };
    let underline = |text: &str, c: &str| {
        let longest = text
            .lines()
            .map(unicode_width::UnicodeWidthStr::width)
            .max()
            .unwrap_or(0);
        format!("{text}\n{}", c.repeat(longest))
    };
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    let mut out = String::new();
    for block in doc {
        match block {
            Block::Heading { level, text } => {
                if !out.is_empty() {
                    out.push('\n');
                }
                let text = wrap(text);
                let line = match level {
                    1 => underline(&text, "="),
                    2 => underline(&text, "-"),
                    _ => text,
                };
                out += &paint("1", &line);
                out.push('\n');
            }
            Block::Text(text) => {
                out += &wrap(text);
                out.push('\n');
            }
            Block::Note { tone, text } => {
                let (code, tag) = match tone {
                    Tone::Warning => ("33", "warning"),
                    Tone::Error => ("1;31", "error"),
                };
                out += &paint(code, &wrap(&format!("{tag}: {text}")));
                out.push('\n');
            }
            Block::Table(table) => {
                out += &table.to_text_within(Border::Grid, width);
                out.push('\n');
            }
            Block::Summary(s) => {
                let budget = summary::MAX_LINES.saturating_sub(out.lines().count());
                for line in summary::text(s, width, budget) {
                    out += &line;
                    out.push('\n');
                }
                out.push('\n');
            }
            Block::Charts { .. } => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::Table;

    fn doc() -> Vec<Block> {
        vec![
            Block::Heading {
                level: 2,
                text: "Rank 0".to_owned(),
            },
            Block::Note {
                tone: Tone::Error,
                text: "oom".to_owned(),
            },
            Block::Table(Table {
                header: vec!["point".to_owned(), "GiB".to_owned()],
                numeric: vec![false, true],
                rows: vec![
                    vec!["a".to_owned(), "1.00".to_owned()],
                    vec!["longer".to_owned(), "12.00".to_owned()],
                ],
                wide_only: Vec::new(),
            }),
        ]
    }

    #[test]
    fn numbers_are_right_aligned_in_the_table() {
        let out = render(&doc(), false, None);
        assert!(out.contains("│ a      ┆  1.00 │"), "{out}");
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn colour_wraps_headings_and_notes_only_when_asked() {
        let out = render(&doc(), true, None);
        assert!(out.contains("\x1b[1mRank 0\n------\x1b[0m"));
        assert!(out.contains("\x1b[1;31merror: oom\x1b[0m"));
    }
}
