//! Hand-written SVG charts: a line chart (one polyline per series) and a horizontal stacked bar
//! chart. No scripts, no external resources; every mark carries a `<title>` tooltip. (The
//! snapshot's memory timeline is interactive: [`super::timeline`].)
//!
//! Contract: [`line_chart`] and [`stacked_bars`] return one `<svg>` element with the given
//! `id`; values are in the caller's unit (GiB in the log report), negative ones are drawn as
//! zero, and empty input still gives a valid (empty) chart. Text in every chart is escaped.

use std::fmt::Write;

use super::escape;

/// Tableau 10: distinct, readable on white.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// One line of a line chart: the y value at x = 0, 1, 2, …
pub struct Series {
    /// Shown in the legend and as the line's tooltip.
    pub name: String,
    /// The y values, in the chart's unit.
    pub values: Vec<f64>,
}

const WIDTH: f64 = 960.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 44.0;
const LEGEND_MAX: usize = 24;

/// A tick step of 1, 2 or 5 × 10^k giving about five ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

/// The ticks from 0 to `top` (a multiple of `step`), each with its label: every value is
/// `k × step` (not a running sum, whose float error printed as `0.15000000000000002`), labelled
/// with as many decimals as the step has.
fn ticks(top: f64, step: f64) -> impl Iterator<Item = (f64, String)> {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let count = (top / step).round() as u64;
    (0..=count).map(move |k| {
        let v = k as f64 * step;
        (v, format!("{v:.decimals$}"))
    })
}

fn y_axis(svg: &mut String, max: f64, plot_h: f64, plot_w: f64, label: &str) -> f64 {
    let step = tick_step(max);
    let top = (max / step).ceil().max(1.0) * step;
    for (v, text) in ticks(top, step) {
        let y = TOP + plot_h - v / top * plot_h;
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e5e5e5"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{text}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0
        );
    }
    let _ = write!(
        svg,
        r#"<text transform="translate(14 {:.1}) rotate(-90)" text-anchor="middle" font-size="12">{}</text>"#,
        TOP + plot_h / 2.0,
        escape::html(label)
    );
    top
}

/// A line chart of `series` over their index; `x_label` and `y_label` name the axes.
pub fn line_chart(id: &str, series: &[Series], x_label: &str, y_label: &str) -> String {
    let height = 380.0;
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, height - TOP - BOTTOM);
    let max_y = series
        .iter()
        .flat_map(|s| s.values.iter().copied())
        .fold(0.0, f64::max);
    let max_x = series
        .iter()
        .map(|s| s.values.len())
        .max()
        .unwrap_or(1)
        .saturating_sub(1)
        .max(1) as f64;
    let mut svg = format!(
        r#"<svg id="{}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" font-family="sans-serif">"#,
        escape::html(id)
    );
    let top = y_axis(&mut svg, max_y, plot_h, plot_w, y_label);
    let x_step = tick_step(max_x).max(1.0);
    let mut x = 0.0;
    while x <= max_x {
        let px = LEFT + x / max_x * plot_w;
        let _ = write!(
            svg,
            r#"<text x="{px:.1}" y="{:.1}" text-anchor="middle" font-size="11">{x}</text>"#,
            TOP + plot_h + 16.0
        );
        x += x_step;
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="#333"/><text x="{2:.1}" y="{3:.1}" text-anchor="middle" font-size="12">{4}</text>"##,
        TOP + plot_h,
        LEFT + plot_w,
        LEFT + plot_w / 2.0,
        height - 6.0,
        escape::html(x_label)
    );
    for (n, s) in series.iter().enumerate() {
        let color = PALETTE[n % PALETTE.len()];
        let mut points = String::new();
        for (i, v) in s.values.iter().enumerate() {
            let px = LEFT + i as f64 / max_x * plot_w;
            let py = TOP + plot_h - v.max(0.0) / top * plot_h;
            let _ = write!(points, "{px:.1},{py:.1} ");
        }
        let _ = write!(
            svg,
            r#"<polyline class="series" fill="none" stroke="{color}" stroke-width="1.6" points="{}"><title>{}</title></polyline>"#,
            points.trim_end(),
            escape::html(&s.name)
        );
        if n < LEGEND_MAX {
            let ly = TOP + 6.0 + n as f64 * 14.0;
            let lx = LEFT + plot_w + 14.0;
            let _ = write!(
                svg,
                r#"<rect x="{lx}" y="{:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                ly - 8.0,
                lx + 14.0,
                ly + 1.0,
                escape::html(&s.name)
            );
        } else if n == LEGEND_MAX {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="11">… {} more</text>"#,
                LEFT + plot_w + 14.0,
                TOP + 6.0 + n as f64 * 14.0,
                series.len() - LEGEND_MAX
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

/// Horizontal stacked bars: one row per `(label, values)`, one segment per part in `parts`.
pub fn stacked_bars(id: &str, rows: &[(String, Vec<f64>)], parts: &[&str], unit: &str) -> String {
    let bar_h = 16.0;
    let gap = 6.0;
    let legend_h = 22.0;
    let plot_h = rows.len().max(1) as f64 * (bar_h + gap);
    let height = TOP + legend_h + plot_h + BOTTOM;
    let plot_w = WIDTH - LEFT - 40.0;
    let max = rows
        .iter()
        .map(|(_, v)| v.iter().map(|x| x.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max);
    let step = tick_step(max);
    let top = (max / step).ceil().max(1.0) * step;
    let mut svg = format!(
        r#"<svg id="{}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" font-family="sans-serif">"#,
        escape::html(id)
    );
    let mut lx = LEFT;
    for (k, part) in parts.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<rect x="{lx:.1}" y="{TOP}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
            PALETTE[k % PALETTE.len()],
            lx + 14.0,
            TOP + 9.0,
            escape::html(part)
        );
        lx += 24.0 + part.chars().count() as f64 * 6.2;
    }
    let base = TOP + legend_h;
    for (v, text) in ticks(top, step) {
        let x = LEFT + v / top * plot_w;
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{base:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e5e5e5"/><text x="{x:.1}" y="{:.1}" text-anchor="middle" font-size="11">{text}</text>"##,
            base + plot_h,
            base + plot_h + 14.0
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="12">{}</text>"#,
        LEFT + plot_w / 2.0,
        height - 8.0,
        escape::html(unit)
    );
    for (r, (label, values)) in rows.iter().enumerate() {
        let y = base + r as f64 * (bar_h + gap);
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" font-size="11">{}</text>"#,
            LEFT - 6.0,
            y + bar_h - 4.0,
            escape::html(label)
        );
        let mut x = LEFT;
        for (k, value) in values.iter().enumerate() {
            let w = value.max(0.0) / top * plot_w;
            let name = parts.get(k).copied().unwrap_or("");
            let _ = write!(
                svg,
                r#"<rect class="segment" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{bar_h}" fill="{}"><title>{}: {} {value:.2} {}</title></rect>"#,
                PALETTE[k % PALETTE.len()],
                escape::html(label),
                escape::html(name),
                escape::html(unit)
            );
            x += w;
        }
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_steps_are_one_two_or_five_times_a_power_of_ten() {
        assert_eq!(tick_step(60.0), 20.0);
        assert_eq!(tick_step(9.0), 2.0);
        assert_eq!(tick_step(0.3), 0.1);
        assert_eq!(tick_step(0.0), 1.0);
    }

    #[test]
    fn tick_labels_have_the_steps_decimals_and_no_float_noise() {
        let labels: Vec<String> = ticks(0.3, tick_step(0.21)).map(|(_, t)| t).collect();
        assert_eq!(
            labels,
            ["0.00", "0.05", "0.10", "0.15", "0.20", "0.25", "0.30"]
        );
        let labels: Vec<String> = ticks(60.0, 20.0).map(|(_, t)| t).collect();
        assert_eq!(labels, ["0", "20", "40", "60"]);
        let svg = line_chart(
            "c",
            &[Series {
                name: "rank 0".to_owned(),
                values: vec![0.02, 0.17, 0.21],
            }],
            "x",
            "GiB",
        );
        assert!(svg.contains(">0.15</text>"), "{svg}");
        assert!(!svg.contains("00000"), "{svg}");
    }

    #[test]
    fn a_line_chart_has_one_polyline_per_series_and_escapes_names() {
        let s = [
            Series {
                name: "rank <0>".to_owned(),
                values: vec![1.0, 2.0, 3.0],
            },
            Series {
                name: "rank 1".to_owned(),
                values: vec![2.0],
            },
        ];
        let svg = line_chart("c", &s, "x", "GiB");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("rank &lt;0&gt;"));
        assert!(svg.starts_with("<svg id=\"c\"") && svg.ends_with("</svg>"));
    }

    #[test]
    fn stacked_bars_have_a_segment_per_part_per_row() {
        let rows = vec![
            ("rank 0".to_owned(), vec![1.0, 2.0]),
            ("rank 1".to_owned(), vec![0.5, -1.0]),
        ];
        let svg = stacked_bars("b", &rows, &["a", "b"], "GiB");
        assert_eq!(svg.matches("class=\"segment\"").count(), 4);
        assert!(svg.contains(r#"width="0.0""#));
    }

    #[test]
    fn empty_charts_are_still_valid_svg() {
        assert!(line_chart("c", &[], "x", "y").ends_with("</svg>"));
        assert!(stacked_bars("b", &[], &[], "GiB").ends_with("</svg>"));
    }
}
