//! The HTML report rendered by a real headless Chromium: the SVG charts must be in the DOM.
//! Without Chromium the test fails when CI=true and is skipped with a note otherwise.

mod support;

use assert_cmd::Command as BinCommand;

#[test]
fn the_html_report_renders_its_charts_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html = dir.path().join("report.html");
    BinCommand::cargo_bin("memprints")
        .unwrap()
        .current_dir(support::root())
        .args([
            "report",
            "tests/data/report/pp4_srun_ansi_crlf.log",
            "--format",
            "html",
            "--out",
        ])
        .arg(&html)
        .assert()
        .success();
    let page = std::fs::read_to_string(&html).unwrap();
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
    assert_eq!(dom.matches("<polyline class=\"series\"").count(), 4);
    assert_eq!(dom.matches("class=\"segment\"").count(), 24);
}
