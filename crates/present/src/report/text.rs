//! The document as terminal text: comfy-table tables, headings, and, only when asked, ANSI
//! colours (bold headings, yellow warnings, red errors). Cells themselves stay uncoloured so
//! column widths are right.

use super::doc::{Block, Tone};
use crate::table::Border;

/// Renders `doc` as text; `color` adds ANSI escapes.
pub fn render(doc: &[Block], color: bool) -> String {
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
                let line = match level {
                    1 => format!("{text}\n{}", "=".repeat(text.chars().count())),
                    2 => format!("{text}\n{}", "-".repeat(text.chars().count())),
                    _ => text.clone(),
                };
                out += &paint("1", &line);
                out.push('\n');
            }
            Block::Text(text) => {
                out += text;
                out.push('\n');
            }
            Block::Note { tone, text } => {
                let (code, tag) = match tone {
                    Tone::Warning => ("33", "warning"),
                    Tone::Error => ("1;31", "error"),
                };
                out += &paint(code, &format!("{tag}: {text}"));
                out.push('\n');
            }
            Block::Table(table) => {
                out += &table.to_text(Border::Grid);
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
            }),
        ]
    }

    #[test]
    fn numbers_are_right_aligned_in_the_table() {
        let out = render(&doc(), false);
        assert!(out.contains("│ a      ┆  1.00 │"), "{out}");
        assert!(!out.contains('\x1b'));
    }

    #[test]
    fn colour_wraps_headings_and_notes_only_when_asked() {
        let out = render(&doc(), true);
        assert!(out.contains("\x1b[1mRank 0\n------\x1b[0m"));
        assert!(out.contains("\x1b[1;31merror: oom\x1b[0m"));
    }
}
