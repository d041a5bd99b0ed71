//! The commit's promises apart from crashes: one writer at a time (the lock, stale locks, two
//! `add`s at once), file identity (symlinks, hard links, mode, owner, read-only files), leftovers
//! that `status` reports and the next command removes, a file-size limit as a clear error, and a
//! file the user edited after a crash that recovery never overwrites.

mod codemod;
mod commit_support;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use codemod::{SIX, Tree, memprints};
use commit_support::{ADD, assert_same, killed, ok, run, text, user_files};
use memprints_commit::{Lock, Options, Replacement, write_all};

const MODEL: &str = "pithtrain/models/tiny_moe.py";
const EXECUTION: &str = "pithtrain/dualpipe/execution.py";

fn status_json(tree: &Tree) -> serde_json::Value {
    serde_json::from_slice(&run(tree, &["status", "--json"], None).stdout).unwrap()
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn two_adds_started_together_leave_one_consistent_tree() {
    for round in 0..5 {
        let tree = Tree::new();
        let start = |ranks: &str| {
            memprints()
                .current_dir(tree.path())
                .args(["add", "tiny-moe", "--no-ruff", "--ranks", ranks])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (start("1"), start("2"));
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let winners: Vec<usize> = (0..2).filter(|&i| outs[i].status.success()).collect();
        assert_eq!(
            winners.len(),
            1,
            "round {round}: {}{}",
            text(&outs[0]),
            text(&outs[1])
        );
        let loser = text(&outs[1 - winners[0]]);
        // Refused by the lock (its holder named, or "just starting" when the lock was read
        // between its creation and its first write), or run after the winner had finished.
        assert!(
            loser.contains("error: another memprints (")
                || loser.contains("the tree is already instrumented"),
            "round {round}: {loser}"
        );
        let status = status_json(&tree);
        assert_eq!(status["state"], "complete", "round {round}");
        assert_eq!(
            status["ranks"],
            serde_json::json!([winners[0] + 1]),
            "round {round}"
        );
    }
}

#[test]
fn an_add_while_another_run_holds_the_lock_refuses_and_changes_nothing() {
    let tree = Tree::new();
    let before = tree.snapshot();
    let lock = Lock::acquire(tree.path(), "add").unwrap();
    let out = run(&tree, ADD, None);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!(
        "error: another memprints (`memprints add`, pid {}",
        std::process::id()
    );
    assert!(text(&out).starts_with(&expected), "{}", text(&out));
    assert!(text(&out).contains("wait for it to finish and run again"));
    drop(lock);
    assert_same(&tree.snapshot(), &before, "refused add");
    ok(&tree, ADD);
}

#[test]
fn the_lock_of_a_killed_run_is_taken_over_with_a_note() {
    let tree = Tree::new();
    // Steps 1 to 3 create the lock; the run dies right after them.
    assert!(killed(&run(&tree, ADD, Some(4))));
    assert!(tree.path().join(".memprints/lock").exists());
    let out = ok(&tree, ADD);
    assert!(
        text(&out).contains("note: took over the lock of `memprints add` (pid "),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("): it is no longer running"));
    assert!(!tree.path().join(".memprints/lock").exists());
}

#[test]
fn a_lock_from_another_host_is_left_to_the_user() {
    let tree = Tree::new();
    fs::create_dir(tree.path().join(".memprints")).unwrap();
    let lock = r#"{"pid":1,"start":null,"boot":null,"host":"gpu-node-7","command":"remove"}"#;
    tree.write(".memprints/lock", lock);
    let out = run(&tree, ADD, None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(
            "(`memprints remove`, pid 1 on host gpu-node-7 (if it is no longer running there, delete the lock)"
        ),
        "{}",
        text(&out)
    );
}

/// Writes `text` as the tree's lock, as a run that died or another tool would have left it.
fn leave_lock(tree: &Tree, text: &str) {
    fs::create_dir_all(tree.path().join(".memprints")).unwrap();
    tree.write(".memprints/lock", text);
}

/// A pid no process has: a child that has exited and been waited for.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

/// An empty lock (a run killed between creating and writing it, or a full disk), a cut-off one
/// and one whose holder is gone are taken over at once: the next `add` does not wait or refuse.
#[test]
fn a_lock_with_no_live_holder_is_taken_over_at_once() {
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let dead = format!(
        r#"{{"pid":{},"start":null,"boot":null,"host":"{}","command":"add"}}"#,
        dead_pid(),
        host.trim()
    );
    for (lock, note) in [
        ("", "took over an unreadable lock file"),
        (r#"{"pid":12"#, "took over an unreadable lock file"),
        (dead.as_str(), "): it is no longer running"),
    ] {
        let tree = Tree::new();
        leave_lock(&tree, lock);
        let started = std::time::Instant::now();
        let out = run(&tree, ADD, None);
        let took = started.elapsed();
        assert!(out.status.success(), "lock {lock:?}: {}", text(&out));
        assert!(
            took < Duration::from_secs(5),
            "lock {lock:?}: took {took:?}"
        );
        assert!(text(&out).contains(note), "lock {lock:?}: {}", text(&out));
        assert!(!tree.path().join(".memprints/lock").exists());
        assert_eq!(status_json(&tree)["state"], "complete", "lock {lock:?}");
    }
}

#[test]
fn a_symlinked_file_stays_a_link_and_its_target_gets_the_prints() {
    let tree = Tree::new();
    let original = tree.read(MODEL);
    fs::create_dir(tree.path().join("vendor")).unwrap();
    fs::rename(
        tree.path().join(MODEL),
        tree.path().join("vendor/tiny_moe.py"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../../vendor/tiny_moe.py", tree.path().join(MODEL)).unwrap();
    ok(&tree, ADD);
    let link = tree.path().join(MODEL);
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_ne!(tree.read("vendor/tiny_moe.py"), original);
    assert!(
        !tree
            .path()
            .join("vendor/.tiny_moe.py.memprints-tmp")
            .exists()
    );
    ok(&tree, &["remove"]);
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert_eq!(tree.read("vendor/tiny_moe.py"), original);
}

#[test]
fn a_hard_linked_file_keeps_its_links() {
    let tree = Tree::new();
    let original = tree.read(MODEL);
    fs::hard_link(tree.path().join(MODEL), tree.path().join("tiny_moe.link")).unwrap();
    ok(&tree, ADD);
    let (a, b) = (
        fs::metadata(tree.path().join(MODEL)).unwrap(),
        fs::metadata(tree.path().join("tiny_moe.link")).unwrap(),
    );
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
    assert_ne!(tree.read("tiny_moe.link"), original);
    ok(&tree, &["remove"]);
    assert_eq!(tree.read("tiny_moe.link"), original);
}

#[test]
fn mode_and_owner_are_kept() {
    let tree = Tree::new();
    let path = |rel: &str| tree.path().join(rel);
    fs::set_permissions(path(EXECUTION), fs::Permissions::from_mode(0o640)).unwrap();
    fs::set_permissions(path(MODEL), fs::Permissions::from_mode(0o755)).unwrap();
    if is_root() {
        std::os::unix::fs::chown(path(EXECUTION), Some(4242), Some(4343)).unwrap();
    } else {
        eprintln!("note: not root; the owner half of this test is skipped");
    }
    let identity = |rel: &str| {
        let meta = fs::metadata(path(rel)).unwrap();
        (meta.mode() & 0o7777, meta.uid(), meta.gid())
    };
    let before = (identity(EXECUTION), identity(MODEL));
    ok(&tree, ADD);
    assert!(tree.read(EXECUTION).contains("_SavedTensorsProfiler"));
    assert_eq!((identity(EXECUTION), identity(MODEL)), before);
    ok(&tree, &["remove"]);
    assert_eq!((identity(EXECUTION), identity(MODEL)), before);
}

#[test]
fn a_read_only_file_is_refused_and_nothing_changes() {
    let tree = Tree::new();
    fs::set_permissions(tree.path().join(MODEL), fs::Permissions::from_mode(0o444)).unwrap();
    let before = tree.snapshot();
    let out = run(&tree, ADD, None);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(
            "error: pithtrain/models/tiny_moe.py is read-only (mode 0444); memprints does not replace read-only files"
        ),
        "{}",
        text(&out)
    );
    assert_same(&tree.snapshot(), &before, "refused add");
}

#[test]
fn allow_read_only_writes_a_read_only_file_and_keeps_it_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.py");
    fs::write(&path, "x = 1\n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).unwrap();
    let lock = Lock::acquire(dir.path(), "test").unwrap();
    let file = [Replacement {
        rel: "f.py",
        expected: "x = 1\n",
        updated: "x = 2\n",
    }];
    let refused = write_all(&lock, &file, &Options::default()).unwrap_err();
    assert!(refused.to_string().contains("is read-only"), "{refused}");
    let allow = Options {
        allow_read_only: true,
    };
    write_all(&lock, &file, &allow).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "x = 2\n");
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o444);
}

/// Two names of one file in one commit: the second write finds the first's bytes, so the commit
/// stops after two files were written and must put both back (and the link stays).
#[test]
fn a_commit_that_fails_midway_puts_back_the_files_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let write = |rel: &str, text: &str| fs::write(dir.path().join(rel), text).unwrap();
    write("first.py", "x = 1\n");
    write("twin.py", "y = 1\n");
    fs::hard_link(dir.path().join("twin.py"), dir.path().join("twin2.py")).unwrap();
    let lock = Lock::acquire(dir.path(), "test").unwrap();
    let files = [
        Replacement {
            rel: "first.py",
            expected: "x = 1\n",
            updated: "x = 2\n",
        },
        Replacement {
            rel: "twin.py",
            expected: "y = 1\n",
            updated: "y = 2\n",
        },
        Replacement {
            rel: "twin2.py",
            expected: "y = 1\n",
            updated: "y = 3\n",
        },
    ];
    let err = write_all(&lock, &files, &Options::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "twin2.py: changed on disk while memprints was working; nothing was written"
    );
    let read = |rel: &str| fs::read_to_string(dir.path().join(rel)).unwrap();
    assert_eq!(
        (read("first.py"), read("twin.py")),
        ("x = 1\n".into(), "y = 1\n".into())
    );
    assert_eq!(fs::metadata(dir.path().join("twin.py")).unwrap().nlink(), 2);
    let names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(
        fs::read_dir(dir.path().join(".memprints")).unwrap().count(),
        1
    );
}

#[test]
fn two_symlinks_to_one_file_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("real.py"), "x = 1\n").unwrap();
    std::os::unix::fs::symlink("real.py", dir.path().join("alias.py")).unwrap();
    let lock = Lock::acquire(dir.path(), "test").unwrap();
    let file = |rel| Replacement {
        rel,
        expected: "x = 1\n",
        updated: "x = 2\n",
    };
    let err = write_all(
        &lock,
        &[file("real.py"), file("alias.py")],
        &Options::default(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "alias.py: is the same file as real.py; nothing was written"
    );
    assert_eq!(
        fs::read_to_string(dir.path().join("real.py")).unwrap(),
        "x = 1\n"
    );
}

#[test]
fn leftover_temp_files_are_reported_by_status_and_removed_by_the_next_add() {
    let tree = Tree::new();
    let temp = "pithtrain/dualpipe/.execution.py.memprints-tmp";
    tree.write(temp, "half of an old run's file");
    let out = run(&tree, &["status"], None);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "memprints: leftover temp files ({temp}); the next"
        )),
        "{stdout}"
    );
    assert!(!stdout.contains(": clean\n"), "{stdout}");
    assert!(status_json(&tree)["interrupted"].is_string());
    let out = ok(&tree, ADD);
    assert!(
        text(&out).contains(&format!(
            "removed what an interrupted memprints run left: {temp}"
        )),
        "{}",
        text(&out)
    );
    assert!(!tree.path().join(temp).exists());
}

#[test]
fn a_file_size_limit_is_a_clear_error_and_the_tree_is_unchanged() {
    let tree = Tree::new();
    let before = tree.snapshot();
    // 5 KiB: the journal, which holds a copy of every file, does not fit; without SIGXFSZ
    // ignored the process would die of the signal here instead of saying so.
    let binary = assert_cmd::cargo::cargo_bin("memprints");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "ulimit -f 5 && exec {} add tiny-moe --no-ruff",
            binary.display()
        ))
        .current_dir(tree.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the file-size limit (ulimit -f) is too small for it"),
        "{}",
        text(&out)
    );
    assert_same(&tree.snapshot(), &before, "add under ulimit -f 5");
}

/// The step before which `add` has swapped in exactly its first three files (execution.py,
/// dualpipev.py, the model): lock 3, journal 4, six temp files 12, then two steps per swap.
const AFTER_THREE_SWAPS: u32 = 3 + 4 + 12 + 3 * 2 + 1;

#[test]
fn status_never_calls_a_half_committed_tree_clean() {
    let tree = Tree::new();
    assert!(killed(&run(&tree, ADD, Some(AFTER_THREE_SWAPS))));
    let out = run(&tree, &["status"], None);
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with(
            "memprints: an interrupted `memprints add` left its journal in .memprints/journal.json"
        ),
        "{stdout}"
    );
    assert!(status_json(&tree)["interrupted"].is_string());
}

#[test]
fn a_file_edited_after_a_crash_is_never_overwritten() {
    let original = Tree::new().snapshot();
    let tree = Tree::new();
    assert!(killed(&run(&tree, ADD, Some(AFTER_THREE_SWAPS))));
    let changed: Vec<String> = codemod::changed(&original, &user_files(&tree));
    let swapped: Vec<&String> = changed
        .iter()
        .filter(|c| SIX.contains(&c.as_str()))
        .collect();
    assert_eq!(swapped.len(), 3, "{changed:?}");
    let edited = format!("{}# my own line\n", tree.read(EXECUTION));
    tree.write(EXECUTION, &edited);

    let out = run(&tree, &["remove"], None);
    assert_eq!(out.status.code(), Some(1));
    let before_copy = tree.path().join(".memprints/before").join(EXECUTION);
    let message = format!(
        "after an interrupted memprints commit, {EXECUTION} (its bytes from before: {}) changed again",
        before_copy.canonicalize().unwrap().display()
    );
    assert!(text(&out).contains(&message), "{}", text(&out));
    assert_eq!(tree.read(EXECUTION), edited);
    for rel in SIX.iter().filter(|&&rel| rel != EXECUTION) {
        assert_eq!(tree.read(rel).as_bytes(), original[*rel], "{rel}");
    }

    // Going back as the message says: copy the old bytes over, run again.
    fs::copy(&before_copy, tree.path().join(EXECUTION)).unwrap();
    let out = ok(&tree, &["remove"]);
    assert!(text(&out).contains("every file was already as before an interrupted `memprints add`"));
    assert_same(&tree.snapshot(), &original, "after the copy");
    assert!(!Path::new(&before_copy).exists());
}

/// A journal while a live run holds the lock is that run at work, not an interrupted one:
/// `status` says who is changing the tree and exits 75; once the lock is free it is interrupted.
#[test]
fn status_tells_a_running_command_from_an_interrupted_one() {
    let tree = Tree::new();
    assert!(killed(&run(&tree, ADD, Some(AFTER_THREE_SWAPS))));
    // This test process takes the dead run's lock over and holds it, journal left in place,
    // as a live `add` halfway through its commit would.
    let lock = Lock::acquire(tree.path(), "add").unwrap();
    assert!(tree.path().join(".memprints/journal.json").exists());
    let out = run(&tree, &["status"], None);
    assert_eq!(out.status.code(), Some(75), "{}", text(&out));
    let busy = format!(
        "memprints: another memprints (pid {}, `add`) is changing this tree right now",
        std::process::id()
    );
    assert!(text(&out).contains(&busy), "{}", text(&out));
    assert!(!text(&out).contains("interrupted"), "{}", text(&out));
    let json = run(&tree, &["status", "--json"], None);
    assert_eq!(json.status.code(), Some(75));
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(json["busy"]["pid"], std::process::id());
    assert_eq!(json["busy"]["command"], "add");
    assert!(json.get("interrupted").is_none(), "{json}");

    drop(lock);
    let out = run(&tree, &["status"], None);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("an interrupted `memprints add` left its journal"));
}

/// Runs memprints in `tree` with stdout on `/dev/full`.
fn run_to_full_disk(tree: &Tree, args: &[&str]) -> std::process::Output {
    memprints()
        .current_dir(tree.path())
        .args(args)
        .stdout(fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap()
}

/// A command that changed the tree and then could not write its summary says both, and exits
/// 3 rather than 1 (which says nothing changed).
#[test]
fn a_full_stdout_after_the_tree_changed_exits_3_and_says_the_change_happened() {
    let original = Tree::new().snapshot();
    let tree = Tree::new();
    for (args, want_instrumented) in [
        (&["add", "tiny-moe", "--json"][..], true),
        (&["remove"][..], false),
    ] {
        let out = run_to_full_disk(&tree, args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{args:?}: {stderr}");
        assert!(
            stderr.contains(
                "error: the tree was changed (6 files written), but writing the summary to stdout failed: No space left on device"
            ),
            "{args:?}: {stderr}"
        );
        let state = status_json(&tree)["state"].clone();
        assert_eq!(state == "complete", want_instrumented, "{args:?}: {state}");
    }
    assert_same(
        &tree.snapshot(),
        &original,
        "add then remove to a full disk",
    );
    // A refusal that changed nothing stays exit code 1.
    let out = run_to_full_disk(&tree, &["remove"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// The recovery note goes to stderr: `add --json` after an interrupted run prints JSON alone on
/// stdout, and the note on stderr.
#[test]
fn add_json_after_an_interrupted_run_prints_json_alone_on_stdout() {
    let tree = Tree::new();
    assert!(killed(&run(&tree, ADD, Some(AFTER_THREE_SWAPS))));
    assert!(tree.path().join(".memprints/journal.json").exists());
    let out = run(&tree, &["add", "tiny-moe", "--no-ruff", "--json"], None);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(json["written"], true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("note: "), "{stderr}");
    assert!(!tree.path().join(".memprints").exists());
}
