//! Hand-written SVG charts: memory over a pipeline schedule (one line per rank, the ranks
//! aligned on the schedule's points) and a horizontal stacked bar chart. No scripts, no
//! external resources; every mark carries a `<title>` tooltip. (The snapshot's memory timeline
//! is interactive: [`super::timeline`].)
//!
//! Contract: [`schedule_chart`] and [`stacked_bars`] return one `<svg>` element with the given
//! `id`; values are in the caller's unit (GiB in the log report), negative ones are drawn as
//! zero, and empty input still gives a valid (empty) chart. Text in every chart is escaped.
//! Legends are whole: they wrap onto as many rows as they need inside the chart's box (the
//! `legend` group), never cut at the edge.

use std::fmt::Write;

use super::escape;

/// Tableau 10: distinct, readable on white.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// One x position of a [`schedule_chart`]: a point of the schedule.
pub struct Slot {
    /// Under the axis: `Step1 F0 i=3`.
    pub label: String,
    /// The band it sits in, named above the plot: `Step 1 (F0)`. Consecutive slots of one
    /// group share a band.
    pub group: String,
}

/// One line of a [`schedule_chart`]: a value (and its tooltip) per slot, `None` where the
/// series has no point there (the line leaves a gap).
pub struct Series {
    /// Shown in the legend and as the line's tooltip.
    pub name: String,
    /// Per slot: the value in the chart's unit and the point's tooltip.
    pub points: Vec<Option<(f64, String)>>,
}

const WIDTH: f64 = 960.0;
const LEFT: f64 = 64.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 44.0;
/// Rough width of one character of 11px sans-serif text, for laying out legends and labels.
const CHAR_W: f64 = 6.4;
const LEGEND_ROW: f64 = 16.0;

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

fn y_axis(svg: &mut String, max: f64, top_y: f64, plot_h: f64, plot_w: f64, label: &str) -> f64 {
    let step = tick_step(max);
    let top = (max / step).ceil().max(1.0) * step;
    for (v, text) in ticks(top, step) {
        let y = top_y + plot_h - v / top * plot_h;
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
        top_y + plot_h / 2.0,
        escape::html(label)
    );
    top
}

/// Lays out a legend of `(name, colour)` entries from `(x, y)` in rows no wider than `width`,
/// as one `<g class="legend">`; returns its height.
fn legend(svg: &mut String, entries: &[(&str, &str)], x: f64, y: f64, width: f64) -> f64 {
    if entries.is_empty() {
        return 0.0;
    }
    svg.push_str(r#"<g class="legend">"#);
    let (mut lx, mut row) = (x, 0.0);
    for (name, color) in entries {
        let w = 24.0 + name.chars().count() as f64 * CHAR_W;
        if lx > x && lx + w > x + width {
            lx = x;
            row += 1.0;
        }
        let ly = y + row * LEGEND_ROW;
        let _ = write!(
            svg,
            r#"<g class="legend-item"><rect x="{lx:.1}" y="{ly:.1}" width="10" height="10" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="11">{}</text></g>"#,
            lx + 14.0,
            ly + 9.0,
            escape::html(name)
        );
        lx += w;
    }
    svg.push_str("</g>");
    (row + 1.0) * LEGEND_ROW
}

/// Memory over a schedule: the slots spread evenly along x under their labels, grouped into
/// named bands; one line per series through its points (a gap where it has none), a dot with
/// its tooltip on every point; the legend below, wrapped.
pub fn schedule_chart(id: &str, slots: &[Slot], series: &[Series], y_label: &str) -> String {
    let plot_h = 300.0;
    let plot_w = WIDTH - LEFT - 16.0;
    let top_y = TOP + 14.0;
    let n = slots.len().max(1) as f64;
    let slot_w = plot_w / n;
    // Every label when they fit side by side once turned; else every k-th.
    let every = (12.0 / slot_w).ceil().max(1.0) as usize;
    let longest = slots
        .iter()
        .map(|s| s.label.chars().count())
        .max()
        .unwrap_or(0) as f64;
    // Labels turned by 50 degrees: their height is about 0.77 of their length.
    let labels_h = longest * CHAR_W * 0.77 + 14.0;
    let axis_title_y = top_y + plot_h + labels_h + 14.0;
    let names: Vec<(&str, &str)> = series
        .iter()
        .enumerate()
        .map(|(k, s)| (s.name.as_str(), PALETTE[k % PALETTE.len()]))
        .collect();
    let legend_y = axis_title_y + 14.0;
    let mut legend_svg = String::new();
    let legend_h = legend(&mut legend_svg, &names, LEFT, legend_y, plot_w);
    let height = (legend_y + legend_h + 8.0).ceil();
    let mut svg = format!(
        r#"<svg id="{}" class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" font-family="sans-serif">"#,
        escape::html(id)
    );
    let x_of = |k: usize| LEFT + (k as f64 + 0.5) * slot_w;
    // The bands: a run of slots of one group, shaded every other one, named above the plot.
    let mut k = 0;
    let mut shade = false;
    while k < slots.len() {
        let end = (k..slots.len())
            .find(|&j| slots[j].group != slots[k].group)
            .unwrap_or(slots.len());
        let (x0, w) = (LEFT + k as f64 * slot_w, (end - k) as f64 * slot_w);
        let group = escape::html(&slots[k].group);
        let fill = if shade { "#f3f5f8" } else { "#ffffff" };
        let _ = write!(
            svg,
            r##"<rect class="band" x="{x0:.1}" y="{top_y:.1}" width="{w:.1}" height="{plot_h:.1}" fill="{fill}"><title>{group}</title></rect>"##
        );
        if slots[k].group.chars().count() as f64 * CHAR_W * 0.9 <= w {
            let _ = write!(
                svg,
                r##"<text class="group" x="{:.1}" y="{:.1}" text-anchor="middle" font-size="11" fill="#555">{group}</text>"##,
                x0 + w / 2.0,
                top_y - 5.0
            );
        }
        shade = !shade;
        k = end;
    }
    let top = y_axis(
        &mut svg,
        series
            .iter()
            .flat_map(|s| s.points.iter().flatten().map(|p| p.0))
            .fold(0.0, f64::max),
        top_y,
        plot_h,
        plot_w,
        y_label,
    );
    let base = top_y + plot_h;
    for (k, slot) in slots.iter().enumerate() {
        let x = x_of(k);
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{base:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333"/>"##,
            base + 4.0
        );
        if k % every == 0 {
            let _ = write!(
                svg,
                r#"<text class="slot" transform="translate({:.1} {:.1}) rotate(-50)" text-anchor="end" font-size="11">{}</text>"#,
                x + 3.0,
                base + 12.0,
                escape::html(&slot.label)
            );
        }
    }
    let _ = write!(
        svg,
        r##"<line x1="{LEFT}" y1="{base:.1}" x2="{:.1}" y2="{base:.1}" stroke="#333"/><text x="{:.1}" y="{axis_title_y:.1}" text-anchor="middle" font-size="12">pipeline schedule (the same point at the same x on every rank)</text>"##,
        LEFT + plot_w,
        LEFT + plot_w / 2.0,
    );
    let y_of = |v: f64| base - v.max(0.0) / top * plot_h;
    for (n, s) in series.iter().enumerate() {
        let color = PALETTE[n % PALETTE.len()];
        let mut d = String::new();
        let mut joined = false;
        for (k, p) in s.points.iter().enumerate() {
            match p {
                Some((v, _)) => {
                    let _ = write!(
                        d,
                        "{}{:.1},{:.1} ",
                        if joined { 'L' } else { 'M' },
                        x_of(k),
                        y_of(*v)
                    );
                    joined = true;
                }
                None => joined = false,
            }
        }
        let _ = write!(
            svg,
            r#"<path class="series" fill="none" stroke="{color}" stroke-width="1.6" d="{}"><title>{}</title></path>"#,
            d.trim_end(),
            escape::html(&s.name)
        );
    }
    for (n, s) in series.iter().enumerate() {
        let color = PALETTE[n % PALETTE.len()];
        for (k, p) in s.points.iter().enumerate() {
            if let Some((v, tip)) = p {
                let _ = write!(
                    svg,
                    r#"<circle class="point" cx="{:.1}" cy="{:.1}" r="3" fill="{color}"><title>{}</title></circle>"#,
                    x_of(k),
                    y_of(*v),
                    escape::html(tip)
                );
            }
        }
    }
    svg.push_str(&legend_svg);
    svg.push_str("</svg>");
    svg
}

/// Horizontal stacked bars: one row per `(label, values)`, one segment per part in `parts`.
pub fn stacked_bars(id: &str, rows: &[(String, Vec<f64>)], parts: &[&str], unit: &str) -> String {
    let bar_h = 16.0;
    let gap = 6.0;
    let plot_w = WIDTH - LEFT - 40.0;
    let entries: Vec<(&str, &str)> = parts
        .iter()
        .enumerate()
        .map(|(k, p)| (*p, PALETTE[k % PALETTE.len()]))
        .collect();
    let mut legend_svg = String::new();
    let legend_h = legend(&mut legend_svg, &entries, LEFT, TOP, plot_w) + 6.0;
    let plot_h = rows.len().max(1) as f64 * (bar_h + gap);
    let height = TOP + legend_h + plot_h + BOTTOM;
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
    svg.push_str(&legend_svg);
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
        let svg = schedule_chart(
            "c",
            &slots(3),
            &[Series {
                name: "rank 0".to_owned(),
                points: [0.02, 0.17, 0.21]
                    .iter()
                    .map(|v| Some((*v, format!("{v}"))))
                    .collect(),
            }],
            "GiB",
        );
        assert!(svg.contains(">0.15</text>"), "{svg}");
        assert!(!svg.contains("00000"), "{svg}");
    }

    fn slots(n: usize) -> Vec<Slot> {
        (0..n)
            .map(|k| Slot {
                label: format!("Step1 F0 i={k}"),
                group: if k == 0 { "Before" } else { "Step 1" }.to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_schedule_chart_has_a_line_per_series_a_tooltip_per_point_and_gaps() {
        let s = [
            Series {
                name: "rank <0>".to_owned(),
                points: vec![Some((1.0, "a".into())), None, Some((3.0, "c".into()))],
            },
            Series {
                name: "rank 1".to_owned(),
                points: vec![None, Some((2.0, "<b>".into())), None],
            },
        ];
        let svg = schedule_chart("c", &slots(3), &s, "GiB");
        assert_eq!(svg.matches("<path class=\"series\"").count(), 2);
        assert_eq!(svg.matches("<circle class=\"point\"").count(), 3);
        assert_eq!(
            svg.matches("<title>").count(),
            3 + 2 + 2,
            "points, lines, bands"
        );
        // The gap: rank 0 starts a new subpath at its third point.
        let first = svg
            .split(" d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(first.matches('M').count(), 2, "{first}");
        assert!(svg.contains("rank &lt;0&gt;") && svg.contains("<title>&lt;b&gt;</title>"));
        assert!(svg.starts_with("<svg id=\"c\"") && svg.ends_with("</svg>"));
    }

    #[test]
    fn a_long_legend_wraps_inside_the_chart() {
        let many: Vec<Series> = (0..40)
            .map(|k| Series {
                name: format!("rank {k} (pp={})", k % 4),
                points: vec![Some((1.0, String::new()))],
            })
            .collect();
        let svg = schedule_chart("c", &slots(1), &many, "GiB");
        assert_eq!(svg.matches("class=\"legend-item\"").count(), 40);
        let height: f64 = svg
            .split("height=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let lowest = svg
            .split("<g class=\"legend-item\"><rect x=\"")
            .skip(1)
            .map(|s| {
                s.split("y=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
                    .parse::<f64>()
                    .unwrap()
            })
            .fold(0.0, f64::max);
        assert!(lowest + 12.0 <= height, "{lowest} in {height}");
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
        assert!(schedule_chart("c", &[], &[], "y").ends_with("</svg>"));
        assert!(stacked_bars("b", &[], &[], "GiB").ends_with("</svg>"));
    }
}
