//! Ruff's formatter, in-process, with the target repository's own settings (`[tool.ruff]` and
//! `[tool.ruff.format]` of its `pyproject.toml`): whole files for the stability check, and
//! snippets for code that memprints inserts at some indentation.

use std::path::Path;

use ruff_formatter::{IndentStyle, IndentWidth, LineWidth};
use ruff_python_ast::PythonVersion;
use ruff_python_formatter::{
    MagicTrailingComma, PyFormatOptions, QuoteStyle, format_module_source,
};

use crate::error::{Error, Result};

/// The formatter settings of one repository.
#[derive(Debug, Clone)]
pub struct FormatSettings {
    /// `line-length`.
    pub line_width: u16,
    /// `indent-width`.
    pub indent_width: u8,
    /// `format.quote-style`.
    pub quote_style: QuoteStyle,
    /// `format.skip-magic-trailing-comma`, as Ruff's option.
    pub magic_trailing_comma: MagicTrailingComma,
    /// `target-version`.
    pub target_version: PythonVersion,
    /// `format.indent-style = "tab"`: whole files are formatted with tabs.
    pub tabs: bool,
}

impl Default for FormatSettings {
    /// Ruff's own defaults (line length 88, 4 spaces, double quotes).
    fn default() -> Self {
        FormatSettings {
            line_width: 88,
            indent_width: 4,
            quote_style: QuoteStyle::Double,
            magic_trailing_comma: MagicTrailingComma::Respect,
            target_version: PythonVersion::default(),
            tabs: false,
        }
    }
}

impl FormatSettings {
    /// Reads `[tool.ruff]` from `pyproject` (missing keys keep Ruff's defaults).
    pub fn from_pyproject(pyproject: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(pyproject).map_err(|e| Error::io(pyproject, e))?;
        Self::from_pyproject_text(&text).map_err(|message| Error::Config {
            file: pyproject.display().to_string(),
            message,
        })
    }

    /// Parses the settings out of a `pyproject.toml` text.
    pub fn from_pyproject_text(text: &str) -> Result<Self, String> {
        let doc: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| e.message().to_string())?;
        let mut settings = FormatSettings::default();
        let Some(ruff) = doc.get("tool").and_then(|t| t.get("ruff")) else {
            return Ok(settings);
        };
        if let Some(width) = ruff.get("line-length").and_then(toml::Value::as_integer) {
            settings.line_width =
                u16::try_from(width).map_err(|_| format!("bad line-length {width}"))?;
        }
        if let Some(width) = ruff.get("indent-width").and_then(toml::Value::as_integer) {
            settings.indent_width =
                u8::try_from(width).map_err(|_| format!("bad indent-width {width}"))?;
        }
        if let Some(target) = ruff.get("target-version").and_then(toml::Value::as_str) {
            settings.target_version = parse_target(target)?;
        }
        if let Some(format) = ruff.get("format") {
            if let Some(style) = format.get("quote-style").and_then(toml::Value::as_str) {
                settings.quote_style = match style {
                    "double" => QuoteStyle::Double,
                    "single" => QuoteStyle::Single,
                    "preserve" => QuoteStyle::Preserve,
                    other => return Err(format!("unknown quote-style `{other}`")),
                };
            }
            if let Some(style) = format.get("indent-style").and_then(toml::Value::as_str) {
                settings.tabs = match style {
                    "tab" => true,
                    "space" => false,
                    other => return Err(format!("unknown indent-style `{other}`")),
                };
            }
            if format
                .get("skip-magic-trailing-comma")
                .and_then(toml::Value::as_bool)
                == Some(true)
            {
                settings.magic_trailing_comma = MagicTrailingComma::Ignore;
            }
        }
        Ok(settings)
    }

    /// Formatter options for code whose every line will be indented by `indent_columns` more,
    /// nesting with tabs when `tabs`.
    fn options(&self, indent_columns: usize, tabs: bool) -> PyFormatOptions {
        let width = (self.line_width as usize)
            .saturating_sub(indent_columns)
            .max(1);
        let style = if tabs {
            IndentStyle::Tab
        } else {
            IndentStyle::Space
        };
        PyFormatOptions::default()
            .with_indent_style(style)
            .with_indent_width(IndentWidth::try_from(self.indent_width).unwrap_or_default())
            .with_line_width(LineWidth::try_from(width as u16).unwrap_or_default())
            .with_quote_style(self.quote_style)
            .with_magic_trailing_comma(self.magic_trailing_comma)
            .with_target_version(self.target_version)
    }

    /// Formats a whole module.
    pub fn format_module(&self, source: &str) -> Result<String, String> {
        format_module_source(source, self.options(0, self.tabs))
            .map(|printed| printed.into_code())
            .map_err(|e| e.to_string())
    }

    /// True when `source` is stable under the formatter: `format_module(source) == source`.
    ///
    /// Ruff's comment placement is quadratic in the length of a run of own-line comments (a
    /// file ending in 10,000 comment lines takes seconds), so long runs are first cut short:
    /// the middle of a run longer than [`LONG_RUN`] lines goes, where it is nothing but comment
    /// lines at the run's own indentation (no trailing whitespace, the file's newline, no
    /// `fmt:`/`yapf:` directive) and single blank lines between them. Ruff formats such lines
    /// alone (each comment's text is normalised on its own, and the ones around them stay, so
    /// their placement is the same), so the file is stable exactly when the shortened file is
    /// and each cut comment is; the cut comments are checked together in a file where each
    /// leads a statement of its own, which Ruff formats in linear time.
    pub fn is_stable(&self, source: &str) -> Result<bool, String> {
        let Some((shortened, cut)) = shorten_comment_runs(source) else {
            return Ok(self.format_module(source)? == source);
        };
        if self.format_module(&shortened)? != shortened {
            return Ok(false);
        }
        let mut seen = std::collections::HashSet::new();
        let mut comments = String::new();
        for comment in cut.into_iter().filter(|c| seen.insert(*c)) {
            comments.push_str("pass\n");
            comments.push_str(comment);
            comments.push('\n');
        }
        comments.push_str("pass\n");
        Ok(self.format_module(&comments)? == comments)
    }

    /// The columns `indent` (leading spaces and tabs) takes: a tab counts as `indent-width`
    /// columns, as Ruff counts it.
    pub fn columns(&self, indent: &str) -> usize {
        indent
            .chars()
            .map(|c| {
                if c == '\t' {
                    self.indent_width as usize
                } else {
                    1
                }
            })
            .sum()
    }

    /// Formats statements that will sit behind the indentation `indent`, nesting with tabs when
    /// `tabs` (the file's own indentation); `snippet` itself is not indented. The result has no
    /// trailing newline.
    pub fn format_snippet(
        &self,
        snippet: &str,
        indent: &str,
        tabs: bool,
    ) -> Result<String, String> {
        let mut source = snippet.to_string();
        source.push('\n');
        let printed = format_module_source(&source, self.options(self.columns(indent), tabs))
            .map_err(|e| e.to_string())?;
        Ok(printed.into_code().trim_end_matches('\n').to_string())
    }
}

/// Runs of own-line comments longer than this have their middle cut by
/// [`FormatSettings::is_stable`].
pub const LONG_RUN: usize = 64;

/// How many lines of a long run stay at each end.
const RUN_ENDS: usize = 16;

/// `source` with the middle of each long run of own-line comments cut out (see
/// [`FormatSettings::is_stable`]), and the cut comments (without indentation); `None` when no
/// run is long, or the file does not parse or holds a formatter directive.
fn shorten_comment_runs(source: &str) -> Option<(String, Vec<&str>)> {
    // A cheap look first: some run of more than LONG_RUN lines that look like comments or
    // blank lines, and no formatter directive.
    let mut longest = 0;
    let mut current = 0;
    for line in source.lines() {
        let line = line.trim_start();
        if line.is_empty() || line.starts_with('#') {
            current += 1;
            longest = longest.max(current);
        } else {
            current = 0;
        }
    }
    if longest <= LONG_RUN || source.contains("fmt:") || source.contains("yapf:") {
        return None;
    }
    let parsed = ruff_python_parser::parse_module(source).ok()?;
    let comment_starts: std::collections::HashSet<usize> = parsed
        .tokens()
        .iter()
        .filter(|token| token.kind() == ruff_python_ast::token::TokenKind::Comment)
        .map(|token| ruff_text_size::Ranged::start(token).to_usize())
        .collect();
    let newline = if source.contains("\r\n")
        && source
            .find('\n')
            .is_some_and(|i| i > 0 && source.as_bytes()[i - 1] == b'\r')
    {
        "\r\n"
    } else {
        "\n"
    };
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        lines.push((offset, line));
        offset += line.len();
    }
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Code,
        Blank,
        /// An own-line comment, with its indentation's length.
        Comment(usize),
    }
    let kinds: Vec<Kind> = lines
        .iter()
        .map(|&(at, line)| {
            let body = line.trim_end_matches(['\n', '\r']);
            let indent = body.len() - body.trim_start_matches([' ', '\t']).len();
            if body.trim().is_empty() {
                Kind::Blank
            } else if comment_starts.contains(&(at + indent)) {
                Kind::Comment(indent)
            } else {
                Kind::Code
            }
        })
        .collect();
    // A line that may be cut: a comment at `indent` in its final shape, or a single blank line.
    let cuttable = |i: usize, indent: &str| -> bool {
        let (_, line) = lines[i];
        let Some(body) = line.strip_suffix(newline) else {
            return false;
        };
        match kinds[i] {
            Kind::Comment(n) => {
                body.len() == body.trim_end().len()
                    && !body.contains(['\r', '\x0c'])
                    && &body[..n] == indent
            }
            Kind::Blank => {
                body.is_empty()
                    && i > 0
                    && matches!(kinds[i - 1], Kind::Comment(_))
                    && matches!(kinds.get(i + 1), Some(Kind::Comment(_)))
            }
            Kind::Code => false,
        }
    };
    let mut out = String::with_capacity(source.len());
    let mut cut = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Kind::Comment(n) = kinds[i] else {
            out.push_str(lines[i].1);
            i += 1;
            continue;
        };
        let indent = &lines[i].1[..n];
        let mut end = i;
        while end < lines.len() && kinds[end] != Kind::Code {
            end += 1;
        }
        // Lines i..end are the run (comments and blank lines); cut inside its middle.
        let (from, to) = (i + RUN_ENDS, end.saturating_sub(RUN_ENDS));
        let mut j = i;
        while j < end {
            let start = j;
            if j >= from && j < to && matches!(kinds[j - 1], Kind::Comment(_)) {
                while j < to && cuttable(j, indent) {
                    j += 1;
                }
                // End the cut on a comment, so no two blank lines meet.
                while j > start && kinds[j - 1] == Kind::Blank {
                    j -= 1;
                }
            }
            if j > start {
                for &(_, line) in &lines[start..j] {
                    if let Some(body) = line.strip_suffix(newline).map(str::trim_start)
                        && !body.is_empty()
                    {
                        cut.push(body);
                    }
                }
            } else {
                out.push_str(lines[j].1);
                j += 1;
            }
        }
        i = end;
    }
    (!cut.is_empty()).then_some((out, cut))
}

fn parse_target(target: &str) -> Result<PythonVersion, String> {
    let digits = target
        .strip_prefix("py")
        .ok_or_else(|| format!("bad target-version `{target}`"))?;
    let (major, minor) = digits.split_at(1);
    let major: u8 = major
        .parse()
        .map_err(|_| format!("bad target-version `{target}`"))?;
    let minor: u8 = minor
        .parse()
        .map_err(|_| format!("bad target-version `{target}`"))?;
    Ok(PythonVersion { major, minor })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One line of a comment run: a kind, and whether it sits one level deeper.
    fn run_line() -> impl Strategy<Value = (usize, bool)> {
        (0usize..10, proptest::bool::weighted(0.05))
    }

    fn line_text(kind: usize, i: usize) -> String {
        match kind {
            0..=3 => format!("# a comment, number {i}"),
            4 => String::new(),
            5 => format!("#unspaced {i}"),
            6 => format!("# trailing space {i} "),
            7 => "\n".to_string(),
            8 => format!("#: a colon comment {i}"),
            _ => format!("#   spaced out {i}"),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

        /// Cutting long comment runs never changes the answer: `is_stable` is exactly
        /// `format_module(source) == source`, on runs at module level, inside a body, before a
        /// `def` and at the end of the file.
        #[test]
        fn is_stable_agrees_with_formatting_the_whole_file(
            lines in proptest::collection::vec(run_line(), 70..160),
            place in 0usize..4,
            crlf in proptest::bool::weighted(0.2),
        ) {
            let (indent, deeper) = match place {
                1 => ("    ", "        "),
                _ => ("", "    "),
            };
            let run: String = lines
                .iter()
                .enumerate()
                .map(|(i, &(kind, deep))| {
                    let text = line_text(kind, i);
                    if text.is_empty() || text == "\n" {
                        format!("{text}\n")
                    } else {
                        format!("{}{text}\n", if deep { deeper } else { indent })
                    }
                })
                .collect();
            let source = match place {
                0 => format!("x = 1\n{run}y = 2\n"),
                1 => format!("def f():\n    x = 1\n{run}    return x\n"),
                2 => format!("x = 1\n\n\n{run}def g():\n    pass\n"),
                _ => format!("def f():\n    x = 1\n{run}"),
            };
            let source = if crlf { source.replace('\n', "\r\n") } else { source };
            let settings = FormatSettings::default();
            let whole = settings.format_module(&source).map(|f| f == source);
            prop_assert_eq!(settings.is_stable(&source), whole);
            // And the same run, first made stable.
            if let Ok(formatted) = settings.format_module(&source) {
                prop_assert_eq!(settings.is_stable(&formatted), Ok(true));
            }
        }
    }

    #[test]
    fn a_long_comment_run_is_cut_in_its_middle_only() {
        let run: String = (0..200).map(|i| format!("# c{i:03}\n")).collect();
        let source = format!("x = 1\n{run}y = 2\n");
        let (short, cut) = shorten_comment_runs(&source).unwrap();
        assert!(short.starts_with("x = 1\n# c000\n"), "{short}");
        assert!(short.ends_with("# c199\ny = 2\n"), "{short}");
        assert_eq!(short.lines().count() + cut.len(), source.lines().count());
        assert_eq!(cut.first(), Some(&"# c016"));
    }

    #[test]
    fn pithtrain_style_settings_are_read() {
        let text = "[tool.ruff]\nline-length = 100\ntarget-version = \"py312\"\n[tool.ruff.format]\nquote-style = \"double\"\n";
        let settings = FormatSettings::from_pyproject_text(text).unwrap();
        assert_eq!(settings.line_width, 100);
        assert_eq!(settings.target_version, PythonVersion::PY312);
    }

    #[test]
    fn a_pyproject_without_ruff_settings_gets_ruffs_defaults() {
        let settings = FormatSettings::from_pyproject_text("[project]\nname = \"x\"\n").unwrap();
        assert_eq!(settings.line_width, 88);
    }

    #[test]
    fn snippets_are_formatted_for_their_indentation() {
        let settings = FormatSettings {
            line_width: 30,
            ..FormatSettings::default()
        };
        let call = "x = f(aaaaaaaa, bbbbbbbb)";
        assert_eq!(settings.format_snippet(call, "", false).unwrap(), call);
        assert_eq!(
            settings.format_snippet(call, "        ", false).unwrap(),
            "x = f(\n    aaaaaaaa, bbbbbbbb\n)"
        );
        // Two tabs are eight columns; nesting is done with tabs.
        assert_eq!(
            settings.format_snippet(call, "\t\t", true).unwrap(),
            "x = f(\n\taaaaaaaa, bbbbbbbb\n)"
        );
    }
}
