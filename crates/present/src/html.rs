//! The HTML page shell, its stylesheets, and tables as HTML.
//!
//! Every page is one self-contained file: an inline stylesheet, no scripts, no links out. Two
//! [`Layout`]s exist because the log report and the snapshot report were written apart and their
//! pages are kept byte for byte as users have them; a layout bundles the shell's whitespace, the
//! table markup and the stylesheet that styles that markup, so they cannot be mixed up.
//!
//! Contract: [`page`] escapes the title and writes `body` as given (it is already HTML);
//! [`table`] escapes every cell.

use std::fmt::Write;

use super::escape;
use super::table::Table;

/// How a page lays out its markup, and the stylesheet that goes with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One element per line, `lang="en"`; tables with `thead`/`tbody` and numeric cells of class
    /// `num` (the log report).
    Document,
    /// The head on one line; tables as bare rows, every cell but the last right-aligned by the
    /// stylesheet (the snapshot reports).
    Compact,
}

const DOCUMENT_STYLESHEET: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1000px;\
color:#222;padding:0 1em}table{border-collapse:collapse;margin:.5em 0 1.2em;font-size:13px}\
th,td{border:1px solid #ddd;padding:2px 8px}th{background:#f4f4f4}td.num{text-align:right;\
font-variant-numeric:tabular-nums}.note{padding:.5em 1em;border-left:4px solid}\
.warning{border-color:#e0a000;background:#fff8e1}.error{border-color:#c62828;background:#fdecea}\
svg.chart{max-width:100%;height:auto}h2{border-bottom:1px solid #ddd;padding-bottom:.2em}\
nav.toc{font-size:14px;background:#f8f9fb;border:1px solid #e3e6ea;padding:.5em 1em;margin:1em 0}\
nav.toc ul{margin:.2em 0;padding-left:1.3em}nav.toc li{margin:.1em 0}";

const COMPACT_STYLESHEET: &str = "body{font-family:system-ui,sans-serif;margin:2em;color:#222}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:2px 10px;border-bottom:1px solid #ddd;\
text-align:left}td:not(:last-child){text-align:right;white-space:nowrap}code{font-size:90%}\
details{margin:.3em 0}";

impl Layout {
    /// The inline stylesheet of a page in this layout.
    pub fn stylesheet(self) -> &'static str {
        match self {
            Layout::Document => DOCUMENT_STYLESHEET,
            Layout::Compact => COMPACT_STYLESHEET,
        }
    }
}

/// A whole page: doctype, head with `title` and the layout's stylesheet, then `body`.
pub fn page(layout: Layout, title: &str, body: &str) -> String {
    let (title, style) = (escape::html(title), layout.stylesheet());
    match layout {
        Layout::Document => format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <title>{title}</title>\n<style>{style}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
        ),
        Layout::Compact => format!(
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\
             <style>{style}</style></head><body>\n{body}\n</body></html>\n"
        ),
    }
}

/// `table` as an HTML `<table>`; in [`Layout::Document`] it ends with a newline.
pub fn table(layout: Layout, table: &Table) -> String {
    let mut out = String::new();
    match layout {
        Layout::Document => {
            out.push_str("<table>\n<thead><tr>");
            for h in &table.header {
                let _ = write!(out, "<th>{}</th>", escape::html(h));
            }
            out.push_str("</tr></thead>\n<tbody>\n");
            for row in &table.rows {
                out.push_str("<tr>");
                for (i, cell) in row.iter().enumerate() {
                    let class = if table.numeric.get(i) == Some(&true) {
                        " class=\"num\""
                    } else {
                        ""
                    };
                    let _ = write!(out, "<td{class}>{}</td>", escape::html(cell));
                }
                out.push_str("</tr>\n");
            }
            out.push_str("</tbody>\n</table>\n");
        }
        Layout::Compact => {
            out.push_str("<table><tr>");
            for h in &table.header {
                let _ = write!(out, "<th>{}</th>", escape::html(h));
            }
            out.push_str("</tr>");
            for row in &table.rows {
                out.push_str("<tr>");
                for cell in row {
                    let _ = write!(out, "<td>{}</td>", escape::html(cell));
                }
                out.push_str("</tr>");
            }
            out.push_str("</table>");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table_of(cell: &str) -> Table {
        let mut t = Table::new(&[("name", false), ("GiB", true)]);
        t.rows.push(vec![cell.to_owned(), "1.00".to_owned()]);
        t
    }

    #[test]
    fn a_page_is_self_contained_and_escapes_its_title() {
        for layout in [Layout::Document, Layout::Compact] {
            let out = page(layout, "a <b>", "<p>x</p>");
            assert!(out.starts_with("<!DOCTYPE html>\n"), "{out}");
            assert!(out.contains("<title>a &lt;b&gt;</title>"), "{out}");
            assert!(out.contains(layout.stylesheet()));
            assert!(out.contains("<p>x</p>") && out.ends_with("</html>\n"));
            assert!(!out.contains("<script") && !out.contains("<link"));
        }
    }

    #[test]
    fn document_tables_class_numeric_cells_and_escape_text() {
        let out = table(Layout::Document, &table_of("a<b"));
        assert!(
            out.contains("<tr><td>a&lt;b</td><td class=\"num\">1.00</td></tr>\n"),
            "{out}"
        );
        assert!(out.starts_with("<table>\n<thead>") && out.ends_with("</table>\n"));
    }

    #[test]
    fn compact_tables_are_bare_rows() {
        assert_eq!(
            table(Layout::Compact, &table_of("a&b")),
            "<table><tr><th>name</th><th>GiB</th></tr><tr><td>a&amp;b</td><td>1.00</td></tr></table>"
        );
    }
}
