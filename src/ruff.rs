//! The skill's last step: `ruff check --fix` and `ruff format` on the files memprints changed,
//! with the external `ruff` from PATH (skipped, with a note, when there is none).

use std::path::{Path, PathBuf};
use std::process::Command;

/// What running ruff did.
#[derive(Debug)]
pub enum RuffOutcome {
    /// ruff is not on PATH.
    Missing,
    /// ruff ran; these files changed (they should not).
    Ran {
        changed: Vec<String>,
        failures: Vec<String>,
    },
}

/// Finds `ruff` on PATH.
pub fn find_ruff() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("ruff"))
        .find(|p| p.is_file())
}

/// Runs `ruff check --fix` then `ruff format` on `files` (relative to `root`).
pub fn run(root: &Path, files: &[String]) -> RuffOutcome {
    let Some(ruff) = find_ruff() else {
        return RuffOutcome::Missing;
    };
    let before: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap_or_default())
        .collect();
    let mut failures = Vec::new();
    for args in [
        &["check", "--fix", "--quiet", "--no-cache"][..],
        &["format", "--quiet", "--no-cache"][..],
    ] {
        match Command::new(&ruff)
            .args(args)
            .args(files)
            .current_dir(root)
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => failures.push(format!(
                "ruff {}: {}",
                args[0],
                String::from_utf8_lossy(&out.stdout).trim().to_string()
                    + String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => failures.push(format!("ruff {}: {e}", args[0])),
        }
    }
    let changed = files
        .iter()
        .zip(before)
        .filter(|(f, text)| std::fs::read_to_string(root.join(f)).unwrap_or_default() != *text)
        .map(|(f, _)| f.clone())
        .collect();
    RuffOutcome::Ran { changed, failures }
}
