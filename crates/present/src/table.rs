//! A table of text cells, and how it prints in a terminal.
//!
//! Contract: a [`Table`] holds plain text (each writer escapes it for its format) and says which
//! columns are numeric; [`Table::to_text`] lays it out with comfy-table, numeric columns
//! right-aligned, never wrapping a cell, without a trailing newline; [`Table::to_text_within`]
//! wraps the cells of a table wider than the width it is given (at spaces where it can), so that
//! it fits when its columns can be made that narrow.

use comfy_table::{CellAlignment, ContentArrangement, Table as Grid, presets};

/// Rows of text cells under a header.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The column titles.
    pub header: Vec<String>,
    /// Per column: numeric (right-aligned) or not.
    pub numeric: Vec<bool>,
    /// The cells, row by row; a row may be shorter than the header.
    pub rows: Vec<Vec<String>>,
    /// Per column: left out when the table is laid out within a width (a detail that a
    /// narrow terminal can do without); may be shorter than the header.
    pub wide_only: Vec<bool>,
}

/// The lines drawn around and between a table's cells in a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Border {
    /// Box-drawing lines around every cell and under the header (the log report).
    Grid,
    /// No lines at all, cells apart by spaces, trailing spaces trimmed (the snapshot report).
    None,
}

impl Table {
    /// An empty table with these `(title, numeric)` columns.
    pub fn new(columns: &[(&str, bool)]) -> Self {
        Table {
            header: columns.iter().map(|(h, _)| (*h).to_owned()).collect(),
            numeric: columns.iter().map(|(_, n)| *n).collect(),
            rows: Vec::new(),
            wide_only: Vec::new(),
        }
    }

    /// The same table with the columns titled `titles` left out within a width.
    pub fn wide_only(mut self, titles: &[&str]) -> Self {
        self.wide_only = self
            .header
            .iter()
            .map(|h| titles.contains(&h.as_str()))
            .collect();
        self
    }

    /// The table laid out for a terminal.
    pub fn to_text(&self, border: Border) -> String {
        self.to_text_within(border, None)
    }

    /// The table laid out for a terminal of `width` columns: cells wrapped where the table would
    /// be wider; `None` never wraps.
    pub fn to_text_within(&self, border: Border, width: Option<usize>) -> String {
        if width.is_some() && self.wide_only.contains(&true) {
            let keep = |i: usize| !self.wide_only.get(i).copied().unwrap_or(false);
            let pick = |cells: &[String]| -> Vec<String> {
                cells
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| keep(i))
                    .map(|(_, c)| c.clone())
                    .collect()
            };
            let narrow = Table {
                header: pick(&self.header),
                numeric: (0..self.numeric.len())
                    .filter(|&i| keep(i))
                    .map(|i| self.numeric[i])
                    .collect(),
                rows: self.rows.iter().map(|r| pick(r)).collect(),
                wide_only: Vec::new(),
            };
            return narrow.to_text_within(border, width);
        }
        let mut grid = Grid::new();
        grid.load_preset(match border {
            Border::Grid => presets::UTF8_FULL_CONDENSED,
            Border::None => presets::NOTHING,
        });
        match width {
            Some(width) => grid
                .set_content_arrangement(ContentArrangement::Dynamic)
                .set_width(u16::try_from(width).unwrap_or(u16::MAX)),
            None => grid.set_content_arrangement(ContentArrangement::Disabled),
        };
        grid.set_header(&self.header).add_rows(&self.rows);
        for (i, numeric) in self.numeric.iter().enumerate() {
            if let Some(col) = grid.column_mut(i) {
                col.set_cell_alignment(if *numeric {
                    CellAlignment::Right
                } else {
                    CellAlignment::Left
                });
            }
        }
        match border {
            Border::Grid => grid.to_string(),
            // Without borders the padding of the last column is only trailing noise.
            Border::None => grid
                .lines()
                .map(|l| l.trim_end().to_owned())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::new(&[("point", false), ("GiB", true)]);
        t.rows.push(vec!["a".to_owned(), "1.00".to_owned()]);
        t.rows.push(vec!["longer".to_owned(), "12.00".to_owned()]);
        t
    }

    #[test]
    fn numbers_are_right_aligned_in_a_grid() {
        let out = table().to_text(Border::Grid);
        assert!(out.contains("│ a      ┆  1.00 │"), "{out}");
        assert!(!out.ends_with('\n'));
    }

    #[test]
    fn a_table_given_a_width_wraps_its_cells_to_fit() {
        let mut t = table();
        t.rows.push(vec![
            "a rather long label that would not fit".to_owned(),
            "3.00".to_owned(),
        ]);
        let out = t.to_text_within(Border::Grid, Some(30));
        assert!(out.lines().all(|l| l.chars().count() <= 30), "{out}");
        assert!(out.contains("3.00"), "{out}");
    }

    #[test]
    fn a_borderless_table_has_no_trailing_spaces() {
        let out = table().to_text(Border::None);
        assert_eq!(out, " point     GiB\n a        1.00\n longer  12.00");
    }
}
