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
