//! Text edits on one Python file. Groups say *where* (after this statement, before that line)
//! and *what* (a rendered template block); this module owns indentation, Ruff formatting of the
//! inserted code (skipped below `# fmt: off`), line endings, and applying the edits.

pub mod format;

use ruff_text_size::Ranged;

use crate::error::{Error, Result};
use crate::python::PySource;
use format::FormatSettings;

/// One replacement of `start..end` (byte offsets into the original text) by `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// The edits planned for one file, and the source they apply to.
pub struct FileEdits<'s> {
    pub src: &'s PySource,
    pub settings: &'s FormatSettings,
    edits: Vec<Edit>,
}

impl<'s> FileEdits<'s> {
    pub fn new(src: &'s PySource, settings: &'s FormatSettings) -> Self {
        FileEdits {
            src,
            settings,
            edits: Vec::new(),
        }
    }

    /// Inserts `block` (unindented Python) on its own lines right after the line where `node`
    /// ends, indented like the line where `node` starts.
    pub fn insert_after(&mut self, node: &impl Ranged, block: &str) -> Result<()> {
        let start = node.range().start().to_usize();
        let at = self.src.full_lines(node).1;
        let indent = self.src.indent_at(start).to_string();
        self.insert_lines(at, &indent, block, 0, 0)
    }

    /// Inserts `block` on its own lines right before the line where `node` starts, indented
    /// like it; `blank_after` empty lines follow the block.
    pub fn insert_before(
        &mut self,
        node: &impl Ranged,
        block: &str,
        blank_after: usize,
    ) -> Result<()> {
        let start = node.range().start().to_usize();
        let indent = self.src.indent_at(start).to_string();
        self.insert_lines(self.src.line_start(start), &indent, block, 0, blank_after)
    }

    /// Inserts `block` at the start of the line holding `line_offset`, indented by `indent`,
    /// with `blank_before` and `blank_after` empty lines around it.
    pub fn insert_lines(
        &mut self,
        line_offset: usize,
        indent: &str,
        block: &str,
        blank_before: usize,
        blank_after: usize,
    ) -> Result<()> {
        let at = self.src.line_start(line_offset);
        let body = self.prepare(block, indent, at)?;
        let nl = self.src.newline();
        let mut text = nl.repeat(blank_before);
        text.push_str(&body);
        text.push_str(nl);
        text.push_str(&nl.repeat(blank_after));
        self.edits.push(Edit {
            start: at,
            end: at,
            text,
        });
        Ok(())
    }

    /// Replaces the whole lines of `node` by `block`, indented like the node's first line.
    pub fn replace_lines(&mut self, node: &impl Ranged, block: &str) -> Result<()> {
        let (start, end) = self.src.full_lines(node);
        let indent = self
            .src
            .indent_at(node.range().start().to_usize())
            .to_string();
        let mut text = self.prepare(block, &indent, start)?;
        text.push_str(self.src.newline());
        self.edits.push(Edit { start, end, text });
        Ok(())
    }

    /// The text of statement `stmt` (de-indented, as [`Self::replace_lines`] takes it) with
    /// `argument` (e.g. `_do_mem=_do`) appended to the arguments of `call`, which it contains.
    /// Ruff re-wraps the statement when it is then placed.
    pub fn with_keyword_argument(
        &self,
        stmt: &impl Ranged,
        call: &ruff_python_ast::ExprCall,
        argument: &str,
    ) -> String {
        let arguments = &call.arguments;
        let last_end = arguments
            .args
            .iter()
            .map(|a| a.end())
            .chain(arguments.keywords.iter().map(|k| k.end()))
            .max();
        let (at, separator) = match last_end {
            Some(end) => (end.to_usize(), ", "),
            None => (arguments.start().to_usize() + 1, ""),
        };
        self.src
            .statement_text(stmt, Some((at, at, &format!("{separator}{argument}"))))
    }

    /// Replaces exactly `start..end` by `text`, which must already be in its final shape.
    pub fn replace_raw(&mut self, start: usize, end: usize, text: String) {
        self.edits.push(Edit { start, end, text });
    }

    /// Indents `block` for `indent` and, outside `# fmt: off` regions, formats it with Ruff so it
    /// is exactly what `ruff format` would leave there.
    pub fn prepare(&self, block: &str, indent: &str, at: usize) -> Result<String> {
        let formatted = if self.src.in_fmt_off(at) {
            block.to_string()
        } else {
            self.settings
                .format_snippet(block, indent.len())
                .map_err(|message| Error::Format {
                    file: self.src.rel.clone(),
                    message: format!("{message}\nin the inserted code:\n{block}"),
                })?
        };
        let text = crate::template::indent(&formatted, indent);
        Ok(match self.src.newline() {
            "\n" => text,
            nl => text.replace('\n', nl),
        })
    }

    /// True when no edit was planned.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    /// Applies every edit to the source text. Insertions at one offset keep their planning order.
    pub fn apply(&self) -> Result<String> {
        apply_edits(&self.src.text, &self.edits).map_err(|(a, b)| Error::Unsupported {
            file: self.src.rel.clone(),
            reason: format!(
                "two planned edits overlap (lines {} and {}); this is a memprints bug",
                self.src.line_number(a),
                self.src.line_number(b)
            ),
        })
    }
}

/// Applies non-overlapping edits; on overlap returns the two start offsets.
pub fn apply_edits(text: &str, edits: &[Edit]) -> std::result::Result<String, (usize, usize)> {
    let mut order: Vec<usize> = (0..edits.len()).collect();
    order.sort_by_key(|&i| (edits[i].start, edits[i].end, i));
    let mut out =
        String::with_capacity(text.len() + edits.iter().map(|e| e.text.len()).sum::<usize>());
    let mut cursor = 0;
    let mut last_start = 0;
    for i in order {
        let edit = &edits[i];
        if edit.start < cursor {
            return Err((last_start, edit.start));
        }
        out.push_str(&text[cursor..edit.start]);
        out.push_str(&edit.text);
        cursor = edit.end;
        last_start = edit.start;
    }
    out.push_str(&text[cursor..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insertions_at_one_offset_keep_their_order() {
        let edits = vec![
            Edit {
                start: 2,
                end: 2,
                text: "b".into(),
            },
            Edit {
                start: 0,
                end: 1,
                text: "X".into(),
            },
            Edit {
                start: 2,
                end: 2,
                text: "c".into(),
            },
        ];
        assert_eq!(apply_edits("a\nz", &edits).unwrap(), "X\nbcz");
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let edits = vec![
            Edit {
                start: 0,
                end: 3,
                text: "".into(),
            },
            Edit {
                start: 1,
                end: 2,
                text: "".into(),
            },
        ];
        assert!(apply_edits("abcd", &edits).is_err());
    }
}
