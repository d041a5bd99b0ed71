//! Text edits on one Python file, for `add` and `remove` alike.
//!
//! Callers say *where* (after this statement, instead of those lines) and *what* (statements at
//! column 0, e.g. a filled template block); [`FileEdits`] owns the rest, in one place each:
//! indentation, formatting with the repository's Ruff settings (skipped below `# fmt: off`,
//! where code must already be in its final shape), the file's newline, the blank lines that go
//! with deleted code, and applying the edits. Higher-level pairs (add/remove a keyword argument,
//! split/join a return, ...) are in [`actions`].

pub mod actions;
pub mod format;

use ruff_text_size::Ranged;

use crate::PySource;
use crate::error::{Error, Result};
use crate::text::with_newline;
use format::FormatSettings;

/// One change: the bytes `start..end` of the original text become `content`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    start: usize,
    end: usize,
    content: String,
}

impl Edit {
    /// Inserts `content` at `at`.
    pub fn insertion(at: usize, content: String) -> Self {
        Edit {
            start: at,
            end: at,
            content,
        }
    }

    /// Replaces `start..end` by `content`.
    pub fn replacement(start: usize, end: usize, content: String) -> Self {
        assert!(start <= end, "an edit's range runs forwards");
        Edit {
            start,
            end,
            content,
        }
    }

    /// Deletes `start..end`.
    pub fn deletion(start: usize, end: usize) -> Self {
        Self::replacement(start, end, String::new())
    }

    /// First byte replaced (or the insertion point).
    pub fn start(&self) -> usize {
        self.start
    }

    /// Byte after the last one replaced (`start` for an insertion).
    pub fn end(&self) -> usize {
        self.end
    }

    /// The new text.
    pub fn content(&self) -> &str {
        &self.content
    }

    /// True when the edit replaces nothing.
    pub fn is_insertion(&self) -> bool {
        self.start == self.end
    }
}

/// Two planned edits that overlap: their start offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overlap(pub usize, pub usize);

/// Applies non-overlapping edits to `text`. Insertions at one offset keep their order in
/// `edits`, and come after a replacement that ends there.
pub fn apply_edits(text: &str, edits: &[Edit]) -> std::result::Result<String, Overlap> {
    let mut order: Vec<usize> = (0..edits.len()).collect();
    order.sort_by_key(|&i| (edits[i].start, edits[i].end, i));
    let mut out =
        String::with_capacity(text.len() + edits.iter().map(|e| e.content.len()).sum::<usize>());
    let mut cursor = 0;
    let mut last_start = 0;
    for i in order {
        let edit = &edits[i];
        if edit.start < cursor {
            return Err(Overlap(last_start, edit.start));
        }
        out.push_str(&text[cursor..edit.start]);
        out.push_str(&edit.content);
        cursor = edit.end;
        last_start = edit.start;
    }
    out.push_str(&text[cursor..]);
    Ok(out)
}

/// How statements are laid out when they are placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// As `ruff format` would leave them there (unless they land below `# fmt: off`).
    Formatted,
    /// As given, only indented: code moved back to where the user wrote it.
    Verbatim,
}

/// The edits planned for one file, and the source they apply to.
pub struct FileEdits<'s> {
    src: &'s PySource,
    settings: &'s FormatSettings,
    edits: Vec<Edit>,
    /// Whole lines to delete, as `(start of the first line, end of the last line)`; the blank
    /// lines that go with them are settled in [`Self::apply`].
    deleted_lines: Vec<(usize, usize)>,
    /// Placed code nests with tabs: the file indents with tabs.
    tabs: bool,
}

impl<'s> FileEdits<'s> {
    /// No edits yet on `src`, to be formatted with `settings`.
    pub fn new(src: &'s PySource, settings: &'s FormatSettings) -> Self {
        FileEdits {
            src,
            settings,
            edits: Vec::new(),
            deleted_lines: Vec::new(),
            tabs: indents_with_tabs(src).unwrap_or(settings.tabs),
        }
    }

    /// True when placed code nests with tabs, as the file does (or, for a file with no
    /// indented line, as the repository's `indent-style` says).
    pub fn tabs(&self) -> bool {
        self.tabs
    }

    /// The source the edits apply to.
    pub fn src(&self) -> &'s PySource {
        self.src
    }

    /// The repository's formatter settings.
    pub fn settings(&self) -> &'s FormatSettings {
        self.settings
    }

    /// Inserts `block` on its own lines right after the line where `node` ends, indented like
    /// the line where `node` starts.
    pub fn insert_after(&mut self, node: &impl Ranged, block: &str) -> Result<()> {
        let at = self.src.full_lines(node).1;
        let indent = self.indent_of(node);
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
        let indent = self.indent_of(node);
        self.insert_lines(start, &indent, block, 0, blank_after)
    }

    /// Inserts `block` right before the comment lines directly above `node` (before `node`
    /// itself when there are none), indented like `node`; `blank_after` empty lines follow.
    pub fn insert_above_comments(
        &mut self,
        node: &impl Ranged,
        block: &str,
        blank_after: usize,
    ) -> Result<()> {
        let at = crate::anchor::leading_comments_start(self.src, node.range().start().to_usize());
        let indent = self.indent_of(node);
        self.insert_lines(at, &indent, block, 0, blank_after)
    }

    /// Inserts `block` after `node` like [`Self::insert_after`], with `blank_before` empty lines
    /// before it, and as many after it as it takes to leave `blank_after` empty lines between
    /// it and the code that follows.
    pub fn insert_after_spaced(
        &mut self,
        node: &impl Ranged,
        block: &str,
        blank_before: usize,
        blank_after: usize,
    ) -> Result<()> {
        let at = self.src.full_lines(node).1;
        let existing = self.src.text[at..]
            .split_inclusive('\n')
            .take_while(|line| line.trim().is_empty())
            .count();
        let indent = self.indent_of(node);
        self.insert_lines(
            at,
            &indent,
            block,
            blank_before,
            blank_after.saturating_sub(existing),
        )
    }

    /// Inserts `block` before the line holding `line_offset`, indented like that line; when the
    /// line before it is blank, a blank line follows the block too, so that it stands as a
    /// paragraph of its own.
    pub fn insert_paragraph_at(&mut self, line_offset: usize, block: &str) -> Result<()> {
        let indent = self.src.indent_at(line_offset).to_string();
        let blank = usize::from(crate::anchor::blank_line_before(self.src, line_offset));
        self.insert_lines(line_offset, &indent, block, 0, blank)
    }

    /// Like [`Self::insert_paragraph_at`], above the comment lines directly over `node`, and
    /// indented like `node`.
    pub fn insert_paragraph_above_comments(
        &mut self,
        node: &impl Ranged,
        block: &str,
    ) -> Result<()> {
        let at = crate::anchor::leading_comments_start(self.src, node.range().start().to_usize());
        let blank = usize::from(crate::anchor::blank_line_before(self.src, at));
        let indent = self.indent_of(node);
        self.insert_lines(at, &indent, block, 0, blank)
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
        let nl = self.src.newline();
        let mut text = nl.repeat(blank_before);
        text.push_str(&self.prepare(block, indent, at, Layout::Formatted)?);
        text.push_str(&nl.repeat(blank_after));
        self.edits.push(Edit::insertion(at, text));
        Ok(())
    }

    /// Replaces the whole lines of `node` by `block`, indented like the node's first line.
    pub fn replace_lines(&mut self, node: &impl Ranged, block: &str) -> Result<()> {
        self.replace_lines_laid_out(node, block, Layout::Formatted)
    }

    /// Replaces the whole lines of `node` by `block`, laid out per `layout` for `node`'s
    /// indentation.
    pub fn replace_lines_laid_out(
        &mut self,
        node: &impl Ranged,
        block: &str,
        layout: Layout,
    ) -> Result<()> {
        let (start, end) = self.src.full_lines(node);
        let indent = self.indent_of(node);
        let text = self.prepare(block, &indent, start, layout)?;
        self.edits.push(Edit::replacement(start, end, text));
        Ok(())
    }

    /// True when the whole lines of `node` are as [`Layout::Formatted`] would place its text
    /// there, i.e. as the repository's `ruff format` settings leave it; false when the user has
    /// laid it out otherwise (or it cannot be formatted on its own).
    pub fn is_formatted(&self, node: &impl Ranged) -> bool {
        let (start, end) = self.src.full_lines(node);
        let block = self.src.statement_text(node, None);
        self.prepare(&block, &self.indent_of(node), start, Layout::Formatted)
            .is_ok_and(|placed| placed == self.src.text[start..end])
    }

    /// Replaces the line holding `offset` by `block`, indented like that line and otherwise as
    /// given ([`Layout::Verbatim`]).
    pub fn replace_line_verbatim(&mut self, offset: usize, block: &str) -> Result<()> {
        let (start, end) = (self.src.line_start(offset), self.src.line_end(offset));
        let indent = self.src.indent_at(offset).to_string();
        let text = self.prepare(block, &indent, start, Layout::Verbatim)?;
        self.edits.push(Edit::replacement(start, end, text));
        Ok(())
    }

    /// Deletes the whole lines of `node`, with the blank lines that belong to them (see
    /// [`Self::apply`]).
    pub fn delete_lines(&mut self, node: &impl Ranged) {
        self.deleted_lines.push(self.src.full_lines(node));
    }

    /// Deletes the line holding `offset` (like [`Self::delete_lines`]).
    pub fn delete_line(&mut self, offset: usize) {
        self.deleted_lines
            .push((self.src.line_start(offset), self.src.line_end(offset)));
    }

    /// True when the first line of `node` is planned to be deleted.
    pub fn deletes(&self, node: &impl Ranged) -> bool {
        let start = self.src.full_lines(node).0;
        self.deleted_lines
            .iter()
            .any(|&(from, to)| (from..to).contains(&start))
    }

    /// True when some planned edit (not an insertion) covers the line holding `offset`.
    pub fn touches_line(&self, offset: usize) -> bool {
        let start = self.src.line_start(offset);
        self.deleted_lines
            .iter()
            .copied()
            .chain(
                self.edits
                    .iter()
                    .filter(|e| !e.is_insertion())
                    .map(|e| (self.src.line_start(e.start), e.end)),
            )
            .any(|(from, to)| (from..to).contains(&start))
    }

    /// Replaces `start..end` by `lines`: whole lines in their final shape with `\n` line ends
    /// (for [`actions`], which lay out function headers and parameters themselves).
    pub(crate) fn replace_span(&mut self, start: usize, end: usize, lines: String) {
        let text = with_newline(lines, self.src.newline());
        self.edits.push(Edit::replacement(start, end, text));
    }

    fn indent_of(&self, node: &impl Ranged) -> String {
        self.src
            .indent_at(node.range().start().to_usize())
            .to_string()
    }

    /// `block` (statements at column 0, `\n` line ends, no final newline) as whole lines for
    /// the place `at`: laid out per `layout` for `indent`, indented, each line ended by the
    /// file's newline.
    pub fn prepare(&self, block: &str, indent: &str, at: usize, layout: Layout) -> Result<String> {
        let laid_out = match layout {
            Layout::Formatted if !self.src.in_fmt_off(at) => self
                .settings
                .format_snippet(block, indent, self.tabs)
                .map_err(|message| Error::Format {
                    file: self.src.rel.clone(),
                    message: format!("{message}\nin the code:\n{block}"),
                })?,
            Layout::Formatted if indent.contains('\t') => nest_with_tabs(block),
            _ => block.to_string(),
        };
        let mut text = crate::text::indent(&laid_out, indent);
        text.push('\n');
        Ok(with_newline(text, self.src.newline()))
    }

    /// True when no edit was planned.
    pub fn is_empty(&self) -> bool {
        self.edits.is_empty() && self.deleted_lines.is_empty()
    }

    /// Applies every edit to the source text.
    ///
    /// Deleted lines take their blank lines with them, so that taking out an inserted block
    /// also takes out the blank lines inserted around it: blank lines between two deleted runs
    /// go; blank lines after a run go too when the run opens its block (it starts the file,
    /// follows a blank line, or follows a line ending in `:`), and stay otherwise.
    pub fn apply(&self) -> Result<String> {
        let mut edits = self.edits.clone();
        edits.extend(self.settled_deletions());
        apply_edits(&self.src.text, &edits).map_err(|Overlap(a, b)| {
            Error::bug(
                &self.src.rel,
                format!(
                    "two planned edits overlap (lines {} and {})",
                    self.src.line_number(a),
                    self.src.line_number(b)
                ),
                "",
            )
        })
    }

    /// The line deletions, extended over the blank lines that go with them, as edits.
    fn settled_deletions(&self) -> Vec<Edit> {
        if self.deleted_lines.is_empty() {
            return Vec::new();
        }
        let text = &self.src.text;
        let lines = Lines::of(text);
        let n = lines.len();
        #[derive(Clone, Copy, PartialEq, Eq)]
        enum State {
            Keep,
            Delete,
            Edited,
        }
        let mut state = vec![State::Keep; n];
        for edit in self.edits.iter().filter(|e| !e.is_insertion()) {
            for line in lines.spanning(edit.start, edit.end) {
                state[line] = State::Edited;
            }
        }
        for &(start, end) in &self.deleted_lines {
            for line in lines.spanning(start, end) {
                state[line] = State::Delete;
            }
        }
        let blank = |state: &[State], i: usize| {
            state[i] == State::Keep && lines.text(text, i).trim().is_empty()
        };
        let mut i = 0;
        while i < n {
            if state[i] != State::Delete {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < n && (state[j] == State::Delete || blank(&state, j)) {
                j += 1;
            }
            let mut end = j;
            while end > i && blank(&state, end - 1) {
                end -= 1;
            }
            let opens = i == 0 || blank(&state, i - 1) || {
                let previous = lines.text(text, i - 1).trim_end();
                previous.ends_with(':') && !previous.trim_start().starts_with('#')
            };
            let last = if opens { j } else { end };
            for line in state.iter_mut().take(last).skip(i) {
                *line = State::Delete;
            }
            i = j.max(i + 1);
        }
        let mut deletions = Vec::new();
        let mut line = 0;
        while line < n {
            if state[line] != State::Delete {
                line += 1;
                continue;
            }
            let first = line;
            while line < n && state[line] == State::Delete {
                line += 1;
            }
            deletions.push(Edit::deletion(lines.start(first), lines.start_or_end(line)));
        }
        deletions
    }
}

/// Whether `src` indents with tabs, judged by the first body of a top-level statement that the
/// formatter sees (not below `# fmt: off`); `None` when there is none.
fn indents_with_tabs(src: &PySource) -> Option<bool> {
    src.module.body.iter().find_map(|stmt| {
        let first = match stmt {
            ruff_python_ast::Stmt::FunctionDef(def) => def.body.first(),
            ruff_python_ast::Stmt::ClassDef(class) => class.body.first(),
            _ => crate::find::child_bodies(stmt)
                .into_iter()
                .find_map(|body| body.first()),
        }?;
        let at = first.range().start().to_usize();
        (!src.in_fmt_off(at)).then(|| src.indent_at(at).starts_with('\t'))
    })
}

/// A template block nested with 4 spaces, nested with tabs instead.
fn nest_with_tabs(block: &str) -> String {
    block
        .split('\n')
        .map(|line| {
            let spaces = line.len() - line.trim_start_matches(' ').len();
            format!(
                "{}{}",
                "\t".repeat(spaces / 4),
                &line[spaces - spaces % 4..]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The start offset of every line of a text (a final newline starts no line).
struct Lines {
    starts: Vec<usize>,
    len: usize,
}

impl Lines {
    fn of(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(
            text.match_indices('\n')
                .map(|(i, _)| i + 1)
                .filter(|&i| i < text.len()),
        );
        Lines {
            starts,
            len: text.len(),
        }
    }

    fn len(&self) -> usize {
        self.starts.len()
    }

    fn start(&self, line: usize) -> usize {
        self.starts[line]
    }

    /// The start of `line`, or the end of the text past the last line.
    fn start_or_end(&self, line: usize) -> usize {
        self.starts.get(line).copied().unwrap_or(self.len)
    }

    fn of_offset(&self, offset: usize) -> usize {
        self.starts.partition_point(|&start| start <= offset) - 1
    }

    /// The lines that `start..end` touches.
    fn spanning(&self, start: usize, end: usize) -> std::ops::RangeInclusive<usize> {
        self.of_offset(start)..=self.of_offset(end.saturating_sub(1).max(start))
    }

    fn text<'t>(&self, text: &'t str, line: usize) -> &'t str {
        &text[self.start(line)..self.start_or_end(line + 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> FormatSettings {
        FormatSettings::default()
    }

    fn strip_lines(text: &str, delete: &[&str]) -> String {
        let src = PySource::parse("t.py", text.to_string()).unwrap();
        let settings = settings();
        let mut edits = FileEdits::new(&src, &settings);
        for needle in delete {
            edits.delete_line(text.find(needle).unwrap());
        }
        edits.apply().unwrap()
    }

    #[test]
    fn insertions_at_one_offset_keep_their_order() {
        let edits = vec![
            Edit::insertion(2, "b".into()),
            Edit::replacement(0, 1, "X".into()),
            Edit::insertion(2, "c".into()),
        ];
        assert_eq!(apply_edits("a\nz", &edits).unwrap(), "X\nbcz");
    }

    #[test]
    fn an_insertion_where_a_replacement_ends_follows_it() {
        let edits = vec![
            Edit::insertion(2, "after\n".into()),
            Edit::replacement(0, 2, "b\n".into()),
        ];
        assert_eq!(apply_edits("a\nz", &edits).unwrap(), "b\nafter\nz");
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let edits = vec![Edit::deletion(0, 3), Edit::deletion(1, 2)];
        assert_eq!(apply_edits("abcd", &edits), Err(Overlap(0, 1)));
    }

    #[test]
    fn blank_lines_between_deleted_lines_go_with_them() {
        assert_eq!(
            strip_lines("a = 1\nb = 2\n\nc = 3\nd = 4\n", &["b =", "c ="]),
            "a = 1\nd = 4\n"
        );
    }

    #[test]
    fn blank_lines_after_a_run_stay_unless_the_run_opens_its_block() {
        // After kept code: the run's trailing blank line separates kept code and stays.
        assert_eq!(
            strip_lines("a = 1\nb = 2\n\nc = 3\n", &["b ="]),
            "a = 1\n\nc = 3\n"
        );
        // After a blank line (the run opened a paragraph): its blank line goes too.
        assert_eq!(
            strip_lines("a = 1\n\nb = 2\n\nc = 3\n", &["b ="]),
            "a = 1\n\nc = 3\n"
        );
        // Right after a block opener.
        assert_eq!(
            strip_lines("def f():\n    b = 2\n\n    c = 3\n", &["b ="]),
            "def f():\n    c = 3\n"
        );
        // At the top of the file.
        assert_eq!(strip_lines("b = 2\n\nc = 3\n", &["b ="]), "c = 3\n");
    }

    #[test]
    fn crlf_files_keep_crlf_in_placed_code() {
        let src = PySource::parse("t.py", "def f():\r\n    x = 1\r\n".to_string()).unwrap();
        let settings = settings();
        let mut edits = FileEdits::new(&src, &settings);
        let stmt = &src.module.body[0];
        let ruff_python_ast::Stmt::FunctionDef(def) = stmt else {
            unreachable!()
        };
        edits
            .insert_after(&def.body[0], "if x:\n    y = 2")
            .unwrap();
        assert_eq!(
            edits.apply().unwrap(),
            "def f():\r\n    x = 1\r\n    if x:\r\n        y = 2\r\n"
        );
    }

    #[test]
    fn code_below_fmt_off_is_placed_as_written() {
        let text = "# fmt: off\ndef f():\n    x = 1\n";
        let src = PySource::parse("t.py", text.to_string()).unwrap();
        let settings = settings();
        let mut edits = FileEdits::new(&src, &settings);
        let ruff_python_ast::Stmt::FunctionDef(def) = &src.module.body[0] else {
            unreachable!()
        };
        edits.insert_after(&def.body[0], "y = f( 1 )").unwrap();
        assert!(edits.apply().unwrap().ends_with("    y = f( 1 )\n"));
    }
}
