//! Renderers of a [`Report`]: text (comfy-table), markdown, JSON and a self-contained HTML page.
//!
//! Contract: [`render`] is pure: the same report gives the same string. Text, markdown and HTML
//! share one document ([`doc`]) so they say the same things; what the report says is decided
//! there, once. JSON is the report itself, as documented by `schema/report.schema.json`.
//! `color` only affects `text` (ANSI escapes). How things look (tables, units, escaping, the
//! page and its charts) comes from the crate's shared parts ([`crate::table`], [`crate::html`], …).

pub mod block;
pub mod diff;
pub mod doc;
pub mod estimate_section;
pub mod html;
pub mod json;
pub mod markdown;
pub mod parts;
pub mod summary;
pub mod text;
pub mod view;
pub mod whatif;

use memprints_log::Report;

/// An output format of `memprints report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned tables for a terminal.
    Text,
    /// GitHub-flavoured markdown.
    Markdown,
    /// Stable JSON (schema/report.schema.json); sizes in bytes.
    Json,
    /// One self-contained HTML file with SVG charts.
    Html,
}

/// Renders `report` in `format`; `color` adds ANSI colours to `text`, whose prose and tables
/// are as wide as they come (see [`render_text`] for a width).
pub fn render(report: &Report, format: Format, color: bool) -> String {
    match format {
        Format::Text => text::render(&doc::build(report), color, None),
        Format::Markdown => markdown::render(&doc::build(report)),
        Format::Json => json(report),
        Format::Html => html::render(report, &doc::build(report)),
    }
}

/// The text report with its prose wrapped and its tables kept within `width` columns where
/// they can be (`None`: as wide as they come); `color` adds ANSI colours.
pub fn render_text(report: &Report, color: bool, width: Option<usize>) -> String {
    text::render(&doc::build(report), color, width)
}

/// Writes the report as JSON with a trailing newline: indented for a person (`pretty`, a
/// terminal), else on one line, which scripts read and which is written in less than half the
/// time and bytes ([`json::write`]).
pub fn write_json(report: &Report, pretty: bool, out: impl std::io::Write) -> std::io::Result<()> {
    json::write(report, pretty, out)
}

/// The report as pretty JSON with a trailing newline.
pub fn json(report: &Report) -> String {
    // Serialising plain data structs with string keys cannot fail.
    let mut out = serde_json::to_string_pretty(report).expect("report serialises");
    out.push('\n');
    out
}

/// The stderr note for a log read around NUL bytes: `run.log: skipped 3.00 MiB of NUL bytes at
/// offset 0 (a rotated or preallocated log)`.
pub fn input_note(note: &memprints_log::scan::inputs::InputNote) -> String {
    let nuls = &note.nuls;
    let size = crate::numbers::bytes(nuls.bytes);
    let at = match nuls.runs {
        1 => format!("at offset {}", nuls.first_offset),
        n => format!("in {n} runs, the first at offset {}", nuls.first_offset),
    };
    format!(
        "{}: skipped {size} of NUL bytes {at} (a rotated or preallocated log)",
        note.path
    )
}

#[cfg(test)]
mod note_tests {
    use memprints_log::scan::inputs::NulSkipped;

    #[test]
    fn a_nul_note_says_how_much_and_where() {
        let one = NulSkipped {
            bytes: 3 << 20,
            runs: 1,
            first_offset: 0,
            inside_a_line: false,
        };
        assert_eq!(
            super::input_note(&one.note("run.log").unwrap()),
            "run.log: skipped 3.00 MiB of NUL bytes at offset 0 (a rotated or preallocated log)"
        );
        let two = NulSkipped {
            bytes: 5,
            runs: 2,
            first_offset: 22_000,
            inside_a_line: false,
        };
        assert!(
            super::input_note(&two.note("p").unwrap())
                .contains("5 B of NUL bytes in 2 runs, the first at offset 22000")
        );
        assert_eq!(NulSkipped::default().note("x"), None);
    }
}
