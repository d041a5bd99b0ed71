//! # memprints-present
//!
//! What memprints says, and how it looks: the log report ([`report`]) and the snapshot report
//! ([`snapshot`]) rendered to text, markdown, HTML and JSON, on shared parts:
//!
//! - [`numbers`]: byte sizes in binary units (`12.34` GiB columns, `1.50 GiB` figures), signed
//!   changes, counted nouns.
//! - [`table`]: a table of text cells and its terminal form (comfy-table).
//! - [`escape`]: text made safe for HTML and for markdown.
//! - [`html`]: the page shell, the stylesheets and HTML tables.
//! - [`svg`]: hand-written SVG charts (memory over a schedule, stacked breakdown bars).
//! - [`timeline`]: the interactive memory timeline of a trace (canvas, zoom, hover).
//!
//! Contract: everything here is pure (the same input gives the same bytes) and reads the models
//! of `memprints-log`, `memprints-snapshot` and `memprints-estimate` without changing them; they
//! decide what was measured, this crate what is said of it and how it looks.

pub mod escape;
pub mod html;
mod json_schema;
pub mod numbers;
pub mod report;
pub mod snapshot;
pub mod svg;
pub mod table;
pub mod timeline;
