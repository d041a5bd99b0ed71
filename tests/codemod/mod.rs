//! Helpers shared by the codemod tests (`add`, `remove`, `status`, models): copies of the fixture
//! tree in temporary folders, the binary, whole-tree snapshots, and the external checks (ruff,
//! py_compile).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

pub use assert_cmd::assert::OutputAssertExt;

/// `tests/fixtures/minitrain`.
pub fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minitrain")
}

/// The six files a tiny-moe instrumentation edits.
pub const SIX: [&str; 6] = [
    "pithtrain/dualpipe/execution.py",
    "pithtrain/dualpipe/dualpipev.py",
    "pithtrain/models/tiny_moe.py",
    "pithtrain/modules/distributed.py",
    "pithtrain/modules/training.py",
    "pithtrain/tasks/pretrain_lm.py",
];

/// A fresh copy of the fixture tree.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Self {
        Self::from(&fixture())
    }

    pub fn from(source: &Path) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(source, dir.path());
        Tree { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    pub fn write(&self, rel: &str, text: &str) {
        std::fs::write(self.path().join(rel), text).unwrap();
    }

    /// Replaces the one occurrence of `from` in `rel` by `to`.
    pub fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = self.read(rel);
        assert_eq!(
            text.matches(from).count(),
            1,
            "{rel}: `{from}` must occur once"
        );
        self.write(rel, &text.replacen(from, to, 1));
    }

    /// Every file's bytes, by relative path.
    pub fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        walk(self.path(), self.path(), &mut files);
        files
    }

    /// Runs memprints with `args` in the tree.
    pub fn run(&self, args: &[&str]) -> assert_cmd::assert::Assert {
        memprints()
            .current_dir(self.path())
            .args(args)
            .env("NO_COLOR", "1")
            .assert()
    }
}

/// The memprints binary under test, without ruff on PATH unless asked (so runs are hermetic).
pub fn memprints() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("memprints"));
    cmd.env("PATH", "/usr/bin:/bin");
    cmd
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "__pycache__" {
                copy_dir(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn walk(root: &Path, dir: &Path, files: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let path = entry.path();
        if path.is_dir() {
            walk(root, &path, files);
        } else {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            files.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

/// The names of files whose bytes differ between two snapshots (added or removed count too).
pub fn changed(a: &BTreeMap<String, Vec<u8>>, b: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let mut names: Vec<String> = a.keys().chain(b.keys()).cloned().collect();
    names.sort();
    names.dedup();
    names.into_iter().filter(|n| a.get(n) != b.get(n)).collect()
}

/// Asserts that the two trees hold the same files with the same bytes.
pub fn assert_same_files(want: &Tree, got: &Tree) {
    assert_eq!(
        changed(&want.snapshot(), &got.snapshot()),
        Vec::<String>::new()
    );
}

/// The `ruff` executable: required when CI is set, else the test is skipped with a note.
pub fn ruff() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("ruff"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "ruff must be installed in CI (.ci/run does pip install ruff)"
        );
        eprintln!("note: ruff not on PATH; skipping the ruff checks");
    }
    found
}

/// Runs `ruff format --check`, `ruff check` and `python3 -m py_compile` on `files` in `root`,
/// panicking with their output when one fails.
pub fn assert_python_clean(root: &Path, files: &[&str]) {
    if let Some(ruff) = ruff() {
        for args in [
            &["format", "--check", "--no-cache"][..],
            &["check", "--no-cache"][..],
        ] {
            let out = Command::new(&ruff)
                .args(args)
                .args(files)
                .current_dir(root)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "ruff {args:?} failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let script = "import py_compile, sys, tempfile\nd = tempfile.mkdtemp()\nfor f in sys.argv[1:]:\n    py_compile.compile(f, cfile=d + '/x.pyc', doraise=True)\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(files)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "py_compile failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `python3 -m py_compile` on `files` in `root`, panicking with its output when one fails.
pub fn assert_compiles(root: &Path, files: &[&str]) {
    let script = "import py_compile, sys, tempfile\nd = tempfile.mkdtemp()\nfor f in sys.argv[1:]:\n    py_compile.compile(f, cfile=d + '/x.pyc', doraise=True)\n";
    let out = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(files)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "py_compile failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A unified diff of one file between two trees, for snapshots.
pub fn diff(rel: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(2)
        .header(&format!("a/{rel}"), &format!("b/{rel}"))
        .to_string()
}
