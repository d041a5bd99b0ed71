//! The HTML report rendered by a real headless Chromium: the SVG charts must be in the DOM, the
//! contents' links must land on headings, every point of the schedule chart must carry a
//! tooltip and every legend must lie whole inside its chart. The page itself has no script: the
//! test renders a copy with a checking script appended, which writes what it measured into the
//! DOM that `--dump-dom` returns. Without Chromium the test fails when CI=true and is skipped
//! with a note otherwise.

mod support;

use assert_cmd::Command as BinCommand;
use serde_json::Value;

/// Measures the rendered page: contents links, chart points and their tooltips, legend boxes.
const CHECK: &str = r#"<script>
window.addEventListener('load', () => {
  const links = [...document.querySelectorAll('nav.toc a')].map(a => a.getAttribute('href'));
  const charts = [...document.querySelectorAll('svg.chart')].map(svg => {
    const box = svg.getBoundingClientRect();
    const legends = [...svg.querySelectorAll('.legend-item')].map(g => g.getBoundingClientRect());
    return {
      id: svg.id,
      points: svg.querySelectorAll('circle.point').length,
      points_with_tooltip: [...svg.querySelectorAll('circle.point')]
        .filter(c => (c.querySelector('title') || {}).textContent).length,
      legend_items: legends.length,
      legend_outside: legends.filter(r => r.left < box.left - 0.5 || r.right > box.right + 0.5
        || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5).length,
      slots: svg.querySelectorAll('text.slot').length,
    };
  });
  const out = document.createElement('pre');
  out.id = 'check';
  out.textContent = JSON.stringify({
    links, unresolved: links.filter(h => !document.getElementById(h.slice(1))), charts,
  });
  document.body.appendChild(out);
});
</script>"#;

fn render(log: &str, dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let html = dir.join("report.html");
    BinCommand::cargo_bin("memprints")
        .unwrap()
        .current_dir(support::root())
        .args(["report", log, "--format", "html", "--out"])
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
    (html, page)
}

/// What [`CHECK`] measured in Chromium, with the dumped DOM.
fn measured(page: &str, dir: &std::path::Path) -> (Value, String) {
    let checked = dir.join("checked.html");
    std::fs::write(
        &checked,
        page.replace("</body>", &format!("{CHECK}</body>")),
    )
    .unwrap();
    let dom = support::chromium::dump_dom(
        &format!("file://{}", checked.display()),
        &[
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=5000",
        ],
    );
    let start = dom.find("<pre id=\"check\">").expect("the check ran") + "<pre id=\"check\">".len();
    let end = start + dom[start..].find("</pre>").unwrap();
    let text = dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&");
    (
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
        dom,
    )
}

#[test]
fn the_html_report_renders_its_charts_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (html, page) = render("tests/data/report/pp4_srun_ansi_crlf.log", dir.path());
    let svg_namespaces = page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
    assert_eq!(
        page.matches("http").count(),
        svg_namespaces,
        "no links out of the page"
    );
    assert!(
        !page.contains("<script") && !page.contains("<link"),
        "the page must be self-contained"
    );
    assert!(page.contains("<nav class=\"toc\""), "a table of contents");

    if !support::chromium::present() {
        return;
    }
    let dom = support::chromium::dump_dom(&html.display().to_string(), &[]);
    assert!(
        dom.contains("<svg id=\"pipeline-chart\""),
        "pipeline chart missing from the DOM"
    );
    assert!(
        dom.contains("<svg id=\"breakdown-chart\""),
        "breakdown chart missing from the DOM"
    );
    // Four printing ranks: one line each, and six breakdown segments each.
    assert_eq!(dom.matches("<path class=\"series\"").count(), 4);
    assert_eq!(dom.matches("class=\"segment\"").count(), 24);

    let (seen, _) = measured(&page, dir.path());
    let links = seen["links"].as_array().unwrap();
    // The run, its four sections before the ranks, and four ranks.
    assert!(links.len() >= 9, "{seen}");
    for want in [
        "#rank-0-pp-0",
        "#rank-6-pp-3",
        "#memory-over-the-pipeline-schedule",
    ] {
        assert!(links.iter().any(|l| l == want), "{want} in {seen}");
    }
    assert_eq!(seen["unresolved"].as_array().unwrap().len(), 0, "{seen}");
    let charts = seen["charts"].as_array().unwrap();
    assert_eq!(charts.len(), 2, "{seen}");
    let pipeline = &charts[0];
    assert_eq!(pipeline["id"], "pipeline-chart");
    // 29 + 26 + 23 + 20 prints, each a point with a tooltip, on one axis of 38 points (the
    // union of the four ranks' schedules: 6 Step1 F0, 4 × 2 Step2, 3 × 4 Step3, 6 Step4 and
    // six single prints), each labelled.
    assert_eq!(pipeline["points"], 98, "{seen}");
    assert_eq!(pipeline["points_with_tooltip"], 98, "{seen}");
    assert_eq!(pipeline["slots"], 38, "{seen}");
    for chart in charts {
        assert!(chart["legend_items"].as_u64().unwrap() >= 4, "{chart}");
        assert_eq!(chart["legend_outside"], 0, "the legend is whole: {chart}");
    }
}

/// The real run's report: one rank, its schedule from `Before pipeline` to `After Step8`.
#[test]
fn the_real_runs_report_labels_its_schedule_points() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, page) = render("tests/data/e2e/qwen3-tiny-pp1-instr.log", dir.path());
    for label in ["Before pipeline", "Step4 i=6", "After Step4", "After Step8"] {
        assert!(page.contains(&format!(">{label}</text>")), "{label}");
    }
    assert!(page.contains("Step 4 (F0B1F1B0)</text>"));
    if !support::chromium::present() {
        return;
    }
    let (seen, _) = measured(&page, dir.path());
    let chart = &seen["charts"][0];
    assert_eq!(chart["points"], 15, "{seen}");
    assert_eq!(chart["points_with_tooltip"], 15, "{seen}");
    assert_eq!(chart["legend_outside"], 0, "{seen}");
    assert_eq!(seen["unresolved"].as_array().unwrap().len(), 0, "{seen}");
}
