//! The document as GitHub-flavoured markdown: `#` headings, pipe tables with alignment rows,
//! notes as block quotes. Pipes in cells are escaped.

use std::fmt::Write;

use super::doc::{Block, Tone};
use crate::escape;
use crate::table::Table;

/// Renders `doc` as markdown.
pub fn render(doc: &[Block]) -> String {
    let mut out = String::new();
    for block in doc {
        match block {
            Block::Heading { level, text } => {
                let _ = writeln!(
                    out,
                    "{} {}\n",
                    "#".repeat(usize::from(*level)),
                    escape::markdown(text)
                );
            }
            Block::Text(text) => {
                let _ = writeln!(out, "{}\n", escape::markdown(text));
            }
            Block::Note { tone, text } => {
                let tag = match tone {
                    Tone::Warning => "**Warning:**",
                    Tone::Error => "**Error:**",
                };
                let _ = writeln!(out, "> {tag} {}\n", escape::markdown(text));
            }
            Block::Table(table) => {
                table_md(table, &mut out);
                out.push('\n');
            }
            Block::Summary(summary) => out += &super::summary::markdown(summary),
            Block::Charts { .. } => {}
        }
    }
    out
}

fn table_md(table: &Table, out: &mut String) {
    let row = |cells: &[String], out: &mut String| {
        out.push('|');
        for c in cells {
            let _ = write!(out, " {} |", escape::markdown(c).replace('|', "\\|"));
        }
        out.push('\n');
    };
    row(&table.header, out);
    out.push('|');
    for numeric in &table.numeric {
        out.push_str(if *numeric { " ---: |" } else { " --- |" });
    }
    out.push('\n');
    for r in &table.rows {
        row(r, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_get_an_alignment_row_and_escaped_pipes() {
        let doc = [Block::Table(Table {
            header: vec!["a".to_owned(), "n".to_owned()],
            numeric: vec![false, true],
            rows: vec![vec!["x|y".to_owned(), "1".to_owned()]],
            wide_only: Vec::new(),
        })];
        assert_eq!(render(&doc), "| a | n |\n| --- | ---: |\n| x\\|y | 1 |\n\n");
    }

    #[test]
    fn markup_characters_in_headings_are_escaped() {
        let doc = [Block::Heading {
            level: 3,
            text: "after module[0] creation_x".to_owned(),
        }];
        assert_eq!(render(&doc), "### after module\\[0\\] creation\\_x\n\n");
    }
}
