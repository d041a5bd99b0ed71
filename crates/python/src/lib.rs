//! # memprints-python
//!
//! Python source files as memprints sees them, with Ruff's own crates (parser, AST, formatter)
//! in-process: [`PySource`] (the text, its parsed module and the line arithmetic every edit
//! needs; offsets are byte offsets into the text), [`find`] (functions, classes, statements by
//! shape), [`anchor`] (an anchor that is missing becomes an error showing the lines where it was
//! expected), [`edit`] (the one edit model: edits, their add/remove pairs, formatting inserted
//! code under the repository's own `[tool.ruff]` settings) and [`text`] (line-wise helpers).
//!
//! It knows Python, not PithTrain: the codemod (`memprints-codemod`) says what to find and
//! insert. Its errors are [`Error`].

pub mod anchor;
pub mod edit;
pub mod error;
pub mod find;
pub mod text;

pub use error::{Error, Result};

use ruff_python_ast::ModModule;
use ruff_text_size::Ranged;

/// One parsed Python file.
pub struct PySource {
    /// Path relative to the repository root, with `/` separators (used in messages).
    pub rel: String,
    /// The file's text, exactly as read.
    pub text: String,
    /// The parsed module.
    pub module: ModModule,
}

impl PySource {
    /// Parses `text`; a syntax error becomes [`Error::Parse`] naming `rel` and the line.
    pub fn parse(rel: impl Into<String>, text: String) -> Result<Self> {
        let rel = rel.into();
        match ruff_python_parser::parse_module(&text) {
            Ok(parsed) => Ok(PySource {
                rel,
                module: parsed.into_syntax(),
                text,
            }),
            Err(err) => {
                let line = line_number(&text, err.location.start().to_usize());
                Err(Error::Parse {
                    file: rel,
                    message: format!("line {line}: {}", err.error),
                })
            }
        }
    }

    /// The source text of a node.
    pub fn slice(&self, node: &impl Ranged) -> &str {
        &self.text[node.range().start().to_usize()..node.range().end().to_usize()]
    }

    /// Offset of the first byte of the line holding `offset`. Bytes are searched, so `offset`
    /// may lie inside a multi-byte character (a `\n` never does).
    pub fn line_start(&self, offset: usize) -> usize {
        let bytes = &self.text.as_bytes()[..offset.min(self.text.len())];
        bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)
    }

    /// Offset just past the newline that ends the line holding `offset` (or the end of text);
    /// like [`Self::line_start`], `offset` may lie inside a character.
    pub fn line_end(&self, offset: usize) -> usize {
        let offset = offset.min(self.text.len());
        self.text.as_bytes()[offset..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(self.text.len(), |i| offset + i + 1)
    }

    /// The leading whitespace of the line holding `offset`.
    pub fn indent_at(&self, offset: usize) -> &str {
        let start = self.line_start(offset);
        crate::text::leading_whitespace(&self.text[start..self.line_end(offset)])
    }

    /// Start of the first line and end (past the newline) of the last line of `node`.
    pub fn full_lines(&self, node: &impl Ranged) -> (usize, usize) {
        let range = node.range();
        let end = range.end().to_usize();
        (
            self.line_start(range.start().to_usize()),
            self.line_end(end.saturating_sub(1).max(range.start().to_usize())),
        )
    }

    /// The whole lines of `node`, with `splice` (`start..end` replaced by a text, offsets into
    /// the file inside those lines) applied, de-indented by the node's indentation, with `\n`
    /// line ends and no final newline: the form templates and snippet formatting take.
    pub fn statement_text(
        &self,
        node: &impl Ranged,
        splice: Option<(usize, usize, &str)>,
    ) -> String {
        let (start, end) = self.full_lines(node);
        let (cut_start, cut_end, insert) = splice.unwrap_or((end, end, ""));
        let text = format!(
            "{}{insert}{}",
            &self.text[start..cut_start],
            &self.text[cut_end..end]
        );
        let indent = self.indent_at(node.range().start().to_usize());
        crate::text::dedent(text.trim_end_matches(['\n', '\r']), indent).replace('\r', "")
    }

    /// The whole lines from the one where `first` starts to the one where `last` ends (comments
    /// between them included), de-indented by `first`'s indentation, in the form
    /// [`Self::statement_text`] gives.
    pub fn lines_text(&self, first: &impl Ranged, last: &impl Ranged) -> String {
        let start = self.full_lines(first).0;
        let end = self.full_lines(last).1;
        let indent = self.indent_at(first.range().start().to_usize());
        crate::text::dedent(self.text[start..end].trim_end_matches(['\n', '\r']), indent)
            .replace('\r', "")
    }

    /// The text of the line holding `offset`, without its line end.
    pub fn line_text(&self, offset: usize) -> &str {
        self.text[self.line_start(offset)..self.line_end(offset)].trim_end_matches(['\n', '\r'])
    }

    /// 1-based line number of `offset`.
    pub fn line_number(&self, offset: usize) -> usize {
        line_number(&self.text, offset)
    }

    /// The file's newline: `\r\n` when its first line ends so, else `\n`.
    pub fn newline(&self) -> &'static str {
        match self.text.find('\n') {
            Some(i) if i > 0 && self.text.as_bytes()[i - 1] == b'\r' => "\r\n",
            _ => "\n",
        }
    }

    /// True when `offset` lies in a region Ruff's formatter leaves alone: after a top-level
    /// `# fmt: off` line that no `# fmt: on` line closes.
    pub fn in_fmt_off(&self, offset: usize) -> bool {
        let mut off = false;
        for line in self.text[..self.line_start(offset)].lines() {
            match line.trim_end() {
                "# fmt: off" => off = true,
                "# fmt: on" => off = false,
                _ => {}
            }
        }
        off
    }

    /// Numbered source lines around `offset`, for error messages.
    pub fn context(&self, offset: usize, before: usize, after: usize) -> String {
        let line = self.line_number(offset);
        let first = line.saturating_sub(before).max(1);
        self.text
            .lines()
            .enumerate()
            .skip(first - 1)
            .take(before + after + 1)
            .map(|(i, text)| format!("{:>6} | {}", i + 1, text))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn line_number(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|&b| b == b'\n')
        .count()
        + 1
}
