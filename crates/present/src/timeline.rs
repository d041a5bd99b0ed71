//! An interactive memory timeline for one HTML page: a canvas that draws allocated (area) and
//! reserved (line) memory over time with the peak marked, zooms (wheel, buttons), pans (drag)
//! and, on hover or click, shows the event under the cursor with its size, time and whole stack.
//!
//! The page stays self-contained and small: the events arrive packed and deflated in base64
//! (see `snapshot::timeline`), the page's own script unpacks them with the browser's
//! `DecompressionStream` after drawing a precomputed overview, and every redraw takes the
//! minimum and maximum per pixel column from block summaries, so ten million events pan as
//! smoothly as ten thousand. No network, no library.
//!
//! Contract: [`chart`] returns one `<div class="mp-timeline">` holding its data in a
//! `<script type="application/json">` (with `</` escaped); [`ASSETS`] (style and script) goes
//! once per page, after the charts. With `#selftest` in the page's address, the script zooms the
//! first chart to its peak, hovers there and writes what it saw as JSON into
//! `<pre id="mp-selftest">`, for headless tests and the benchmark's time to first paint.

use base64::Engine as _;
use serde::Serialize;

/// One chart: its DOM id, what the script needs to draw before unpacking, and the packed data.
pub struct Chart<'a, M: Serialize> {
    /// Unique in the page.
    pub id: &'a str,
    /// Read by the script (overview, start values, peak); see `snapshot::render::html`.
    pub meta: &'a M,
    /// The packed events (zlib).
    pub packed: &'a [u8],
    /// The frames, stacks and sizes as JSON (zlib).
    pub symbols: &'a [u8],
}

/// The chart's markup and data.
pub fn chart<M: Serialize>(c: &Chart<M>) -> String {
    let b64 = base64::engine::general_purpose::STANDARD;
    let data = serde_json::json!({
        "meta": c.meta,
        "packed": b64.encode(c.packed),
        "symbols": b64.encode(c.symbols),
    });
    let json = serde_json::to_string(&data)
        .expect("chart data serializes")
        .replace("</", "<\\/");
    let id = super::escape::html(c.id);
    format!(
        "<div class=\"mp-timeline\" id=\"{id}\"><div class=\"mp-bar\"><button data-act=\"peak\">zoom to peak</button> <button data-act=\"in\">+</button> <button data-act=\"out\">−</button> <button data-act=\"reset\">whole trace</button> <label>x axis <select data-act=\"axis\"><option value=\"events\">event order</option><option value=\"time\">time</option></select></label> <span class=\"mp-status\">unpacking…</span></div><canvas height=\"300\"></canvas><pre class=\"mp-detail\">Hover over the chart for the event under the cursor; click to pin it. Wheel or +/− zoom, drag pans, double-click shows the whole trace.</pre><script type=\"application/json\" class=\"mp-data\">{json}</script></div>"
    )
}

/// The stylesheet and script every page with charts carries once, after them.
pub const ASSETS: &str = concat!(
    "<style>",
    include_str!("timeline.css"),
    "</style><script>",
    include_str!("timeline.js"),
    "</script>"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_escapes_its_data_and_links_nowhere() {
        let meta = serde_json::json!({ "name": "</script><b>" });
        let html = chart(&Chart {
            id: "t<0>",
            meta: &meta,
            packed: &[1, 2, 3],
            symbols: &[],
        });
        assert!(html.contains("id=\"t&lt;0&gt;\""));
        assert!(!html.contains("</script><b>"));
        assert!(html.contains("<\\/script><b>"));
        assert!(html.contains("\"packed\":\"AQID\""));
        assert!(!ASSETS.contains("http"), "no links out of the page");
    }
}
