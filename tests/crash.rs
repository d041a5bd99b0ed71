//! Crash consistency. `add` and `remove` are killed (SIGKILL, through the `MEMPRINTS_CRASH_AT`
//! hook) before each of their file-system steps in turn — the lock, every write, fsync, rename
//! and removal of the commit, the recovery itself — and after each kill the next command must
//! find either the tree from before or the full new one: one `remove` then gives back the
//! original bytes exactly, and the lock, when left, is never a partial one. The issue's `strace`
//! fault injection is replayed too, and a kill at each of the first writes (the lock's own).

mod codemod;
mod commit_support;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use codemod::Tree;
use commit_support::{ADD, assert_same, instrumented, killed, ok, run, text, user_files};
use memprints_commit::{Lock, recover};

/// More steps than any run here takes; each loop ends at the first run that is not killed.
const MAX_STEPS: u32 = 300;
/// The steps of a six-file commit: the lock (written under a temp name, fsynced, renamed in);
/// the journal (write, fsync, rename, fsync of its folder); per file a temp file (write, fsync)
/// and its swap (exchange, removal of the old bytes); fsync of the four folders; the journal's
/// removal and its fsync; the lock's release.
const COMMIT_STEPS: u32 = 3 + 4 + 6 * 4 + 4 + 2 + 1;
/// Runs at once: they mostly wait on fsync, so a few overlap well even on two cores.
const AT_ONCE: u32 = 4;

/// Kills `args` at every step on a fresh copy of `start`; after each kill, `check` gets the tree.
/// Returns how many steps the command has.
fn kill_at_every_step(
    start: &(dyn Fn() -> Tree + Sync),
    args: &[&str],
    check: &(dyn Fn(&Tree, u32) + Sync),
) -> u32 {
    let mut first = 1;
    while first <= MAX_STEPS {
        let finished = std::thread::scope(|scope| {
            let runs: Vec<_> = (first..first + AT_ONCE)
                .map(|step| {
                    scope.spawn(move || {
                        let tree = start();
                        let out = run(&tree, args, Some(step));
                        if !killed(&out) {
                            assert!(out.status.success(), "{args:?} unkilled: {}", text(&out));
                            return true;
                        }
                        assert_lock_whole(&tree, &format!("{args:?} killed at step {step}"));
                        check(&tree, step);
                        false
                    })
                })
                .collect();
            let finished: Vec<bool> = runs
                .into_iter()
                .map(|run| run.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect();
            finished.iter().position(|&f| f)
        });
        if let Some(i) = finished {
            return first + i as u32 - 1;
        }
        first += AT_ONCE;
    }
    panic!("{args:?} was still killed at step {MAX_STEPS}");
}

/// Rolls back what a killed run left, as the first step of every command does.
fn recover_in_process(tree: &Tree) {
    let lock = Lock::acquire(tree.path(), "test").unwrap();
    recover(&lock, &memprints_codemod::pithtrain::TARGET_FOLDERS).unwrap();
}

#[test]
fn add_killed_at_any_step_is_undone_by_one_remove() {
    let original = Tree::new().snapshot();
    let steps = kill_at_every_step(&Tree::new, ADD, &|tree, step| {
        let status = run(tree, &["status"], None);
        if status.status.code() == Some(1) {
            assert_eq!(user_files(tree), original, "step {step}: status said clean");
        }
        let out = ok(tree, &["remove"]);
        assert_same(
            &tree.snapshot(),
            &original,
            &format!("step {step}: {}", text(&out)),
        );
    });
    assert_eq!(steps, COMMIT_STEPS);
}

#[test]
fn remove_killed_at_any_step_leaves_the_instrumented_or_the_clean_tree() {
    let original = Tree::new().snapshot();
    let template = instrumented();
    let with_prints = template.snapshot();
    let steps = kill_at_every_step(
        &|| Tree::from(template.path()),
        &["remove"],
        &|tree, step| {
            recover_in_process(tree);
            let now = tree.snapshot();
            assert!(
                now == with_prints || now == original,
                "step {step}: a mix of instrumented and clean files"
            );
            ok(tree, &["remove"]);
            assert_same(&tree.snapshot(), &original, &format!("step {step}"));
        },
    );
    assert_eq!(steps, COMMIT_STEPS);
}

/// The steps of `add` after which the tree is a mix: some files new, a journal to roll back.
fn mixed_steps() -> Vec<u32> {
    let original = Tree::new().snapshot();
    let mut steps = Vec::new();
    for step in 1..=MAX_STEPS {
        let tree = Tree::new();
        if !killed(&run(&tree, ADD, Some(step))) {
            break;
        }
        if tree.path().join(".memprints/journal.json").exists() && user_files(&tree) != original {
            steps.push(step);
        }
    }
    steps
}

#[test]
fn recovery_killed_at_any_step_is_finished_by_the_next_command() {
    let original = Tree::new().snapshot();
    let mixed = mixed_steps();
    assert!(mixed.len() >= 5, "{mixed:?}");
    // Half the files swapped in, and all of them (only the journal's removal was left).
    for add_step in [mixed[mixed.len() / 2], mixed[mixed.len() - 1]] {
        let crashed = || {
            let tree = Tree::new();
            assert!(killed(&run(&tree, ADD, Some(add_step))));
            tree
        };
        let steps = kill_at_every_step(&crashed, &["remove"], &|tree, step| {
            let out = ok(tree, &["remove"]);
            let context = format!(
                "add killed at {add_step}, recovery at {step}: {}",
                text(&out)
            );
            assert_same(&tree.snapshot(), &original, &context);
        });
        assert!(steps > 5, "recovery took only {steps} steps");
    }
}

/// A fixture tree whose model file has a second hard link, `linked/tiny_moe.py`.
fn hard_linked(from: &Path) -> Tree {
    let tree = Tree::from(from);
    std::fs::create_dir(tree.path().join("linked")).unwrap();
    std::fs::hard_link(
        tree.path().join("pithtrain/models/tiny_moe.py"),
        tree.path().join("linked/tiny_moe.py"),
    )
    .unwrap();
    tree
}

fn assert_still_linked(tree: &Tree) {
    let a = std::fs::metadata(tree.path().join("pithtrain/models/tiny_moe.py")).unwrap();
    let b = std::fs::metadata(tree.path().join("linked/tiny_moe.py")).unwrap();
    assert_eq!((a.ino(), a.nlink()), (b.ino(), 2));
}

/// `remove` shrinks the model file, so a kill between its in-place overwrite and the truncation
/// leaves new bytes followed by the old file's tail: recovery must know that state for its own.
#[test]
fn a_hard_linked_file_overwritten_in_place_survives_a_kill_at_any_step() {
    let original = hard_linked(&codemod::fixture()).snapshot();
    let template = instrumented();
    let relinked = || hard_linked(template.path());
    let with_prints = relinked().snapshot();
    kill_at_every_step(&relinked, &["remove"], &|tree, step| {
        recover_in_process(tree);
        let now = tree.snapshot();
        assert!(
            now == with_prints || now == original,
            "remove killed at {step}: a mix"
        );
        ok(tree, &["remove"]);
        assert_same(
            &tree.snapshot(),
            &original,
            &format!("remove killed at {step}"),
        );
        assert_still_linked(tree);
    });
}

/// `strace`, when installed (CI installs it; elsewhere the test is skipped with a note).
fn strace() -> Option<&'static str> {
    let found = Path::new("/usr/bin/strace").exists();
    if !found {
        eprintln!("note: strace not installed; skipping the fault-injection replay");
    }
    found.then_some("/usr/bin/strace")
}

/// The issue's command: SIGKILL at the `when`-th rename of any kind.
fn run_killed_at_rename(tree: &Tree, strace: &str, args: &[&str], when: u32) -> bool {
    let out = Command::new(strace)
        .args(["-f", "-qq", "-o", "/dev/null", "-e"])
        .arg(format!(
            "inject=rename,renameat,renameat2:signal=KILL:when={when}"
        ))
        .arg(assert_cmd::cargo::cargo_bin("memprints"))
        .args(args)
        .current_dir(tree.path())
        .env("PATH", "/usr/bin:/bin")
        .env_remove(memprints_commit::CRASH_AT)
        .output()
        .unwrap();
    let finished = out.status.success();
    assert!(
        finished || out.status.code() == Some(137) || killed(&out),
        "{}",
        text(&out)
    );
    !finished
}

#[test]
fn the_issues_strace_kill_at_each_rename_is_undone_by_one_remove() {
    let Some(strace) = strace() else {
        return;
    };
    let original: BTreeMap<String, Vec<u8>> = Tree::new().snapshot();
    let template = instrumented();
    for (start, args) in [(None, ADD), (Some(&template), &["remove"][..])] {
        let mut renames = 0;
        for when in 1..=20 {
            let tree = start.map_or_else(Tree::new, |t| Tree::from(t.path()));
            if !run_killed_at_rename(&tree, strace, args, when) {
                break;
            }
            renames = when;
            ok(&tree, &["remove"]);
            let context = format!("{args:?} killed at rename {when}");
            assert_same(&tree.snapshot(), &original, &context);
        }
        // strace counts each syscall apart: the record's `rename`, then six `renameat2` swaps.
        assert!(renames >= 6, "{args:?}: only {renames} renames");
    }
}

/// The lock, when there is one, is a whole lock: it never shows partial content.
fn assert_lock_whole(tree: &Tree, context: &str) {
    let Ok(lock) = std::fs::read(tree.path().join(".memprints/lock")) else {
        return;
    };
    let holder: Result<serde_json::Value, _> = serde_json::from_slice(&lock);
    assert!(
        holder.is_ok_and(|h| h["pid"].is_u64()),
        "{context}: the lock holds {:?}",
        String::from_utf8_lossy(&lock)
    );
}

/// SIGKILL at each of `add`'s first writes of file bytes — the first is the lock's own — never
/// leaves a lock with partial content, and the next `add` goes ahead at once.
#[test]
fn a_kill_at_any_of_the_first_writes_never_leaves_a_partial_lock() {
    let Some(strace) = strace() else {
        return;
    };
    let original = Tree::new().snapshot();
    for when in 1..=3 {
        let tree = Tree::new();
        let out = Command::new(strace)
            .args(["-f", "-qq", "-o", "/dev/null", "-e"])
            .arg(format!(
                "inject=write,pwrite64,writev:signal=KILL:when={when}"
            ))
            .arg(assert_cmd::cargo::cargo_bin("memprints"))
            .args(ADD)
            .current_dir(tree.path())
            .env("PATH", "/usr/bin:/bin")
            .env_remove(memprints_commit::CRASH_AT)
            .output()
            .unwrap();
        assert!(
            out.status.code() == Some(137) || killed(&out),
            "write {when}: {}",
            text(&out)
        );
        let context = format!("add killed at write {when}");
        assert_lock_whole(&tree, &context);
        let started = std::time::Instant::now();
        let out = ok(&tree, ADD);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{context}: the next add took {:?}: {}",
            started.elapsed(),
            text(&out)
        );
        ok(&tree, &["remove"]);
        assert_same(&tree.snapshot(), &original, &context);
    }
}
