//! The pieces of the report's document: what [`super::doc`] builds, the section builders
//! ([`super::view`], [`super::estimate_section`], [`super::whatif`]) add, and the text, markdown
//! and HTML renderers turn into their format. Plain data, so that the builders and renderers
//! depend on it and not on each other.

use super::summary::Summary;
use crate::table::Table;

/// What a cell says for a figure no print measured.
pub const NOT_MEASURED: &str = "not measured";
/// What a cell says where there is nothing to measure (the change of a first print).
pub const NOT_APPLICABLE: &str = "—";

/// One piece of the document.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// A heading: level 1 for the title and each run, 2 for a section, 3 below.
    Heading {
        /// 1, 2 or 3.
        level: u8,
        /// Plain text.
        text: String,
    },
    /// A paragraph of plain text.
    Text(String),
    /// A paragraph that warns or reports an error.
    Note {
        /// How serious it is.
        tone: Tone,
        /// Plain text.
        text: String,
    },
    /// A table of plain-text cells.
    Table(Table),
    /// The first screen: per run, how it went, its peak and what held the memory there.
    Summary(Summary),
    /// Where the HTML page draws the charts of `report.runs[run]`.
    Charts {
        /// Index into `Report::runs`.
        run: usize,
    },
}

/// How serious a [`Block::Note`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Something may be missing or wrong (unparsed prints, no prints at all).
    Warning,
    /// The run failed (out of memory).
    Error,
}
