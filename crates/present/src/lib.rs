//! The presentation wing: what the log report ([`crate::report`]) and the snapshot report
//! ([`crate::snapshot`]) both need to show numbers to people.
//!
//! - [`numbers`]: byte sizes in binary units (`12.34` GiB columns, `1.50 GiB` figures), signed
//!   changes, counted nouns.
//! - [`table`]: a table of text cells and its terminal form (comfy-table).
//! - [`escape`]: text made safe for HTML and for markdown.
//! - [`html`]: the page shell, the stylesheets and HTML tables.
//! - [`svg`]: hand-written SVG charts (memory over a schedule, stacked breakdown bars).
//! - [`timeline`]: the interactive memory timeline of a trace (canvas, zoom, hover).
//!
//! Contract: everything here is pure (the same input gives the same bytes) and knows nothing of
//! logs or pickles; the domain modules decide what to say, this module how it looks.

pub mod escape;
pub mod html;
pub mod numbers;
pub mod svg;
pub mod table;
pub mod timeline;
