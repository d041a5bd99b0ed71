//! Helpers shared by the commit and crash tests: running memprints with the crash hook armed or
//! not, telling a killed run from one that finished, and the tree's files apart from memprints'
//! own `.memprints/` folder.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::process::Output;

use crate::codemod::{Tree, memprints};

/// `add` as the crash tests run it.
pub const ADD: &[&str] = &["add", "tiny-moe", "--ranks", "3,14", "--no-ruff"];

/// Runs memprints in `tree`; with `crash_at`, it kills itself before that step.
pub fn run(tree: &Tree, args: &[&str], crash_at: Option<u32>) -> Output {
    let mut cmd = memprints();
    cmd.current_dir(tree.path())
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove(memprints_commit::CRASH_AT);
    if let Some(step) = crash_at {
        cmd.env(memprints_commit::CRASH_AT, step.to_string());
    }
    cmd.output().unwrap()
}

/// Whether the run was killed by SIGKILL.
pub fn killed(out: &Output) -> bool {
    out.status.signal() == Some(9)
}

/// stdout and stderr, for assertion messages.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs memprints and asserts it finished with exit code 0.
pub fn ok(tree: &Tree, args: &[&str]) -> Output {
    let out = run(tree, args, None);
    assert!(out.status.success(), "memprints {args:?}: {}", text(&out));
    out
}

/// The tree's files apart from `.memprints/`.
pub fn user_files(tree: &Tree) -> BTreeMap<String, Vec<u8>> {
    let mut files = tree.snapshot();
    files.retain(|rel, _| !rel.starts_with(".memprints/"));
    files
}

/// Asserts two tree snapshots are equal, naming the files that differ.
pub fn assert_same(
    now: &BTreeMap<String, Vec<u8>>,
    want: &BTreeMap<String, Vec<u8>>,
    context: &str,
) {
    assert!(
        now == want,
        "{context}: files differ: {:?}",
        crate::codemod::changed(now, want)
    );
}

/// A fixture tree with tiny-moe instrumented.
pub fn instrumented() -> Tree {
    let tree = Tree::new();
    ok(&tree, ADD);
    tree
}
