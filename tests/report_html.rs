//! The HTML report rendered by a real headless Chromium: the SVG charts must be in the DOM.
//! Without Chromium the test fails when CI=true and is skipped with a note otherwise.

mod support;

use std::path::Path;
use std::process::Command;

use assert_cmd::Command as BinCommand;

const CHROMIUM: &str = "/usr/bin/chromium";

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

    if !Path::new(CHROMIUM).exists() {
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !in_ci,
            "{CHROMIUM} is missing in CI: install it (apt-get install -y chromium)"
        );
        eprintln!("note: skipping the Chromium check: {CHROMIUM} is not installed");
        return;
    }
    let profile = tempfile::tempdir().expect("profile dir");
    let out = Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(&html)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
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
