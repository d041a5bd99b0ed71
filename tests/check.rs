//! `memprints check` and the `memprints-check` pre-commit hook: non-zero, naming file and group,
//! when memory prints are in the files or the tree; zero on a clean one. The hook is run by a
//! real `pre-commit` when one is installed (skipped with a note otherwise), and always the way
//! pre-commit would run it: its `entry` with the staged Python files appended.

mod codemod;

use std::path::{Path, PathBuf};
use std::process::Command;

use codemod::{SIX, Tree};
use yaml_rust2::YamlLoader;

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn instrumented() -> Tree {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe", "--ranks", "0,1", "--no-ruff"])
        .success();
    tree
}

#[test]
fn a_clean_tree_and_its_files_pass() {
    let tree = Tree::new();
    tree.run(&["check"]).success().stdout("");
    let mut args = vec!["check"];
    args.extend(SIX);
    tree.run(&args).success().stdout("");
}

#[test]
fn an_instrumented_tree_fails_naming_every_file_and_its_groups() {
    let tree = instrumented();
    let out = tree.run(&["check"]).code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert_eq!(
        stdout,
        "pithtrain/dualpipe/execution.py: memory prints of groups 1B, 5A
pithtrain/dualpipe/dualpipev.py: memory prints of groups 1A, 4
pithtrain/models/tiny_moe.py: memory prints of group 5B-5E
pithtrain/modules/distributed.py: memory prints of group 2
pithtrain/modules/training.py: memory prints of groups 1C, 3
pithtrain/tasks/pretrain_lm.py: memory prints of groups 6, 7
memprints: memory prints in 6 files; take them out with `memprints remove` before committing
"
    );
}

#[test]
fn given_files_are_checked_wherever_they_lie_and_clean_ones_are_not_named() {
    let tree = instrumented();
    // A copy of an instrumented file, committed elsewhere, is still caught.
    std::fs::copy(
        tree.path().join(SIX[4]),
        tree.path().join("backup_training.py"),
    )
    .unwrap();
    let out = tree
        .run(&["check", "backup_training.py", "pithtrain/ops.py"])
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.starts_with("backup_training.py: memory prints of groups 1C, 3\n"),
        "{stdout}"
    );
    assert!(!stdout.contains("ops.py"), "{stdout}");
    let missing = tree.run(&["check", "nope.py"]).code(1);
    let err = String::from_utf8_lossy(&missing.get_output().stderr).to_string();
    assert!(
        err.starts_with("error: FILE nope.py: no such file\nhint: "),
        "{err}"
    );
}

#[test]
fn check_passes_again_after_remove() {
    let tree = instrumented();
    tree.run(&["remove"]).success();
    tree.run(&["check"]).success();
}

/// The hook as `.pre-commit-hooks.yaml` defines it.
struct Hook {
    entry: String,
    types: Vec<String>,
    pass_filenames: bool,
    language: String,
}

fn hook() -> Hook {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    let docs = YamlLoader::load_from_str(&text).unwrap();
    let hooks = docs[0].as_vec().expect("a list of hooks");
    let hook = hooks
        .iter()
        .find(|h| h["id"].as_str() == Some("memprints-check"))
        .expect("the memprints-check hook");
    Hook {
        entry: hook["entry"].as_str().unwrap().to_string(),
        types: hook["types"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap().to_string())
            .collect(),
        pass_filenames: hook["pass_filenames"].as_bool().unwrap(),
        language: hook["language"].as_str().unwrap().to_string(),
    }
}

/// PATH with the memprints under test first, as `language: system` needs.
fn path_with_memprints() -> std::ffi::OsString {
    let bin = assert_cmd::cargo::cargo_bin("memprints");
    let mut dirs = vec![bin.parent().unwrap().to_path_buf()];
    dirs.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    std::env::join_paths(dirs).unwrap()
}

#[test]
fn the_hooks_entry_run_as_pre_commit_would_fails_on_prints_and_passes_without() {
    let hook = hook();
    assert_eq!(hook.language, "system");
    assert_eq!(hook.types, ["python"]);
    assert!(hook.pass_filenames);
    let words = shlex::split(&hook.entry).unwrap();
    let tree = instrumented();
    let staged: Vec<&str> = SIX.to_vec();
    let run = |tree: &Tree| {
        Command::new(&words[0])
            .args(&words[1..])
            .args(&staged)
            .current_dir(tree.path())
            .env("PATH", path_with_memprints())
            .output()
            .unwrap()
    };
    let out = run(&tree);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("pithtrain/models/tiny_moe.py: memory prints of group 5B-5E"));
    let out = run(&Tree::new());
    assert!(out.status.success(), "{}", text(&out));
}

fn pre_commit() -> Option<PathBuf> {
    let found = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("pre-commit"))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!(
            "note: pre-commit not on PATH (pip install pre-commit); skipping the real pre-commit run"
        );
    }
    found
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
}

#[test]
fn a_real_pre_commit_run_refuses_staged_prints() {
    let Some(pre_commit) = pre_commit() else {
        return;
    };
    let tree = Tree::new();
    git(tree.path(), &["init", "-q"]);
    git(tree.path(), &["add", "-A"]);
    git(tree.path(), &["commit", "-q", "-m", "clean"]);
    tree.run(&["add", "tiny-moe", "--no-ruff"]).success();
    git(tree.path(), &["add", "-A"]);
    let home = tempfile::tempdir().unwrap();
    // The hook repository as a user's `repos:` entry sees it: this repository's
    // .pre-commit-hooks.yaml, committed (the hook is `language: system`, so nothing else of
    // the repository is needed, and an uncommitted edit of the file is tested too).
    let hooks = tempfile::tempdir().unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(".pre-commit-hooks.yaml"),
        hooks.path().join(".pre-commit-hooks.yaml"),
    )
    .unwrap();
    git(hooks.path(), &["init", "-q"]);
    git(hooks.path(), &["add", "-A"]);
    git(hooks.path(), &["commit", "-q", "-m", "hooks"]);
    let run = || {
        Command::new(&pre_commit)
            .arg("try-repo")
            .arg(hooks.path())
            .arg("memprints-check")
            .current_dir(tree.path())
            .env("PATH", path_with_memprints())
            .env("PRE_COMMIT_HOME", home.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap()
    };
    let out = run();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("memprints check"), "{said}");
    assert!(said.contains("Failed"), "{said}");
    assert!(
        said.contains("pithtrain/dualpipe/execution.py: memory prints of groups 1B, 5A"),
        "{said}"
    );
    // Taken out again, and the user's own change staged: the commit may go.
    tree.run(&["remove"]).success();
    tree.write(
        SIX[4],
        &format!("{}# a line of the user's own\n", tree.read(SIX[4])),
    );
    git(tree.path(), &["add", "-A"]);
    let out = run();
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Passed"), "{}", text(&out));
}

#[test]
fn a_tree_without_any_target_file_is_an_error_not_clean() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        codemod::fixture().join("pyproject.toml"),
        dir.path().join("pyproject.toml"),
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("pithtrain")).unwrap();
    let out = codemod::memprints()
        .current_dir(dir.path())
        .arg("check")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).starts_with("error: none of the files `add` edits is in "),
        "{}",
        text(&out)
    );
}
