//! Headless Chromium for the HTML tests: whether it is there (a failure in CI, a skip with a
//! note elsewhere) and one `--dump-dom` run of a page.

use std::path::Path;
use std::process::Command;

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// True when Chromium is installed; panics in CI (`CI=true`) when it is not, notes the skip
/// otherwise.
pub fn present() -> bool {
    if Path::new(CHROMIUM).exists() {
        return true;
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !in_ci,
        "{CHROMIUM} is missing in CI: install it (apt-get install -y chromium)"
    );
    eprintln!("note: skipping the Chromium check: {CHROMIUM} is not installed");
    false
}

/// The DOM of `url` after Chromium rendered it headless, with `extra` flags; panics when
/// Chromium fails.
pub fn dump_dom(url: &str, extra: &[&str]) -> String {
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
        .args(extra)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
