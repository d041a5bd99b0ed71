//! The command line as a user meets it: arguments parsed (ast-grep style, `Cli::try_parse_from`)
//! and validated, the help examples, closed and full stdout, exit codes, `--json` and `--quiet`,
//! completions and man pages.

mod codemod;

use std::io::Read;
use std::process::{Command, Stdio};

use clap::{CommandFactory, Parser};
use codemod::{SIX, Tree, memprints};
use memprints::cli::{Cli, Command as Cmd};
use serde_json::Value;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("memprints").chain(args.iter().copied()))
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs memprints in `tree` with stdout as given.
fn run_with_stdout(tree: &Tree, args: &[&str], out: Stdio) -> std::process::Output {
    memprints()
        .current_dir(tree.path())
        .args(args)
        .env("NO_COLOR", "1")
        .stdout(out)
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

/// A stdout whose reader is already gone: every write gets EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    writer.into()
}

fn dev_full() -> Stdio {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
        .into()
}

const REAL_LOG: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/e2e/qwen3-tiny-pp1-instr.log"
);

// -- parsing ---------------------------------------------------------------------------------

#[test]
fn add_parses_its_model_lists_and_sizes() {
    let cli = parse(&[
        "add",
        "qwen3-moe",
        "--ranks",
        "3,14",
        "--pp",
        "2",
        "--ep",
        "4",
        "--dry-run",
        "--json",
    ])
    .unwrap();
    let Cmd::Add(args) = cli.command else {
        panic!("not add")
    };
    assert_eq!(args.model, "qwen3-moe");
    assert_eq!(args.ranks, "3,14");
    assert_eq!((args.parallel.pp, args.parallel.ep), (Some(2), 4));
    assert!(args.dry_run && args.json && !args.quiet);
    assert!(parse(&["add"]).is_err(), "the model is required");
    assert!(parse(&["add", "m", "--pp", "2", "--script", "s.py"]).is_err());
}

#[test]
fn every_size_is_refused_outside_one_to_a_million_before_anything_runs() {
    for (flag, value) in [
        ("--world", "0"),
        ("--pp", "0"),
        ("--ep", "4294967295"),
        ("--cp", "1048577"),
    ] {
        for command in ["add", "plan"] {
            let err = parse(&[command, "tiny-moe", flag, value]).unwrap_err();
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{flag} {value}"
            );
        }
    }
    assert!(parse(&["plan", "m", "--pp", "-1"]).is_err());
    assert!(parse(&["plan", "m", "--pp", "1048576", "--world", "1048576"]).is_ok());
}

#[test]
fn remove_status_plan_demo_and_check_parse() {
    let Cmd::Remove(r) = parse(&["remove", "--dry-run", "--json", "-q"])
        .unwrap()
        .command
    else {
        panic!()
    };
    assert!(r.dry_run && r.json && r.quiet);
    let Cmd::Status(s) = parse(&["status", "--json", "--repo", "x"]).unwrap().command else {
        panic!()
    };
    assert!(s.json);
    assert_eq!(s.repo.repo.as_deref(), Some(std::path::Path::new("x")));
    let Cmd::Plan(p) = parse(&["plan", "deepseek-v2", "--script", "s.py", "--json"])
        .unwrap()
        .command
    else {
        panic!()
    };
    assert_eq!(p.model, "deepseek-v2");
    assert!(p.json && p.parallel.script.is_some());
    let Cmd::Demo(d) = parse(&["demo", "--keep", "/tmp/d", "--quiet"])
        .unwrap()
        .command
    else {
        panic!()
    };
    assert!(d.quiet && d.keep.is_some());
    let Cmd::Check(c) = parse(&["check", "a.py", "b.py"]).unwrap().command else {
        panic!()
    };
    assert_eq!(c.files.len(), 2);
}

#[test]
fn report_snapshot_skill_completions_and_man_parse() {
    assert!(matches!(
        parse(&["report", "a.log", "--rank", "0", "--format", "json"])
            .unwrap()
            .command,
        Cmd::Report(_)
    ));
    assert!(parse(&["report"]).is_err(), "report needs an input");
    assert!(matches!(
        parse(&["snapshot", "diff", "a.pickle", "b.pickle", "--top", "3"])
            .unwrap()
            .command,
        Cmd::Snapshot(_)
    ));
    let Cmd::Skill(s) = parse(&["skill", "--write", "--force"]).unwrap().command else {
        panic!()
    };
    assert!(s.write && s.force);
    assert!(
        parse(&["skill", "--force"]).is_err(),
        "--force needs --write"
    );
    for shell in ["bash", "zsh", "fish"] {
        assert!(parse(&["completions", shell]).is_ok(), "{shell}");
    }
    assert!(parse(&["completions", "cmd.exe"]).is_err());
    assert!(matches!(
        parse(&["man", "--out", "d"]).unwrap().command,
        Cmd::Man(_)
    ));
}

#[test]
fn the_clap_definitions_are_consistent() {
    Cli::command().debug_assert();
}

/// Every example line of every `--help` (`  memprints …`), up to a shell operator.
fn help_examples(command: &clap::Command) -> Vec<String> {
    command
        .get_after_help()
        .map(|h| h.to_string())
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().strip_prefix("memprints "))
        .map(|line| {
            let end = line.find(['|', '>', '&']).unwrap_or(line.len());
            line[..end].trim().to_string()
        })
        .collect()
}

#[test]
fn every_command_has_help_examples_and_each_one_parses() {
    for command in Cli::command().get_subcommands() {
        let examples = help_examples(command);
        assert!(
            examples.len() >= 2,
            "`memprints {} --help` has {} examples",
            command.get_name(),
            examples.len()
        );
        for example in examples {
            let words = shlex::split(&example).unwrap();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            assert_eq!(words[0], command.get_name(), "{example}");
            parse(&words).unwrap_or_else(|e| panic!("memprints {example}: {e}"));
        }
    }
}

#[test]
fn snapshot_diffs_two_arguments_are_described() {
    let mut cli = Cli::command();
    let diff = cli
        .find_subcommand_mut("snapshot")
        .unwrap()
        .find_subcommand_mut("diff")
        .unwrap();
    for arg in ["a", "b"] {
        let arg = diff.get_arguments().find(|a| a.get_id() == arg).unwrap();
        assert!(
            arg.get_help().is_some(),
            "{:?} has no description",
            arg.get_id()
        );
    }
}

// -- validation ------------------------------------------------------------------------------

#[test]
fn a_model_name_that_climbs_out_of_the_repo_writes_nothing_anywhere() {
    let outer = tempfile::tempdir().unwrap();
    let root = outer.path().join("repo");
    let fixture = Tree::new();
    std::fs::rename(fixture.path(), &root).unwrap();
    // What `add ../../../x` would have instrumented: <root>/../x.py, outside the repository.
    let victim = outer.path().join("x.py");
    let model = std::fs::read(root.join(SIX[2])).unwrap();
    std::fs::write(&victim, &model).unwrap();
    let out = memprints()
        .current_dir(&root)
        .args(["add", "../../../x", "--no-ruff"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: invalid model name `../../../x`: a model is named by its file in \
         pithtrain/models/ without `.py` (letters, digits, `-`, `_`), e.g. qwen3-moe\n"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), model);
    assert!(
        !root.join(".memprints").exists(),
        "not even the lock was taken"
    );
}

#[test]
fn sizes_whose_product_overflows_are_one_line_errors() {
    let tree = Tree::new();
    for args in [
        &["plan", "tiny-moe", "--pp", "65536", "--ep", "65536"][..],
        &[
            "add",
            "tiny-moe",
            "--pp",
            "65536",
            "--ep",
            "65536",
            "--dry-run",
        ][..],
    ] {
        let out = run_with_stdout(&tree, args, Stdio::piped());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("pp * cp * ep = 4294967296 is more than 1048576 GPUs"),
            "{err}"
        );
        assert!(
            !err.contains("world="),
            "no --world was given, so none is shown: {err}"
        );
    }
    let out = run_with_stdout(&tree, &["plan", "tiny-moe", "--world", "0"], Stdio::piped());
    assert_eq!(out.status.code(), Some(2), "a usage error, as clap's are");
    assert!(!stderr(&out).contains("panicked"));
}

#[test]
fn report_out_never_overwrites_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("v.log");
    std::fs::copy(REAL_LOG, &log).unwrap();
    let before = std::fs::read(&log).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("link.log");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    for (inputs, out) in [
        (vec![log.clone()], log.clone()),
        (vec![log.clone()], link.clone()),
        (vec![dir.path().to_path_buf()], log.clone()),
        (
            vec![dir.path().to_path_buf()],
            dir.path().join("report.txt"),
        ),
    ] {
        let result = memprints()
            .arg("report")
            .args(&inputs)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(result.status.code(), Some(1), "{inputs:?} --out {out:?}");
        assert!(
            stderr(&result).starts_with("error: invalid --out "),
            "{}",
            stderr(&result)
        );
        assert_eq!(std::fs::read(&log).unwrap(), before);
        assert!(!dir.path().join("report.txt").exists());
    }
    let fine = outside.path().join("report.txt");
    let result = memprints()
        .arg("report")
        .arg(&log)
        .arg("--out")
        .arg(&fine)
        .output()
        .unwrap();
    assert!(result.status.success(), "{}", stderr(&result));
    assert!(std::fs::read_to_string(&fine).unwrap().contains("rank"));
}

#[test]
fn report_out_never_overwrites_a_snapshot_given_or_found_beside_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("v.log");
    std::fs::write(
        &log,
        "[rank=0] init_process_group | cuda_ctx=0.52 after_nccl_world=1.10 nccl_world_cost=0.58\n\
         [rank=0] Memory snapshot saved to snap_rank0_step0.pickle\n",
    )
    .unwrap();
    let beside = dir.path().join("snap_rank0_step0.pickle");
    std::fs::write(&beside, b"\x80\x04beside").unwrap();
    let given_dir = tempfile::tempdir().unwrap();
    let given = given_dir.path().join("given_rank0_step0.pickle");
    std::fs::write(&given, b"\x80\x04given").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let symlink = outside.path().join("link.html");
    std::os::unix::fs::symlink(&beside, &symlink).unwrap();
    let hard = outside.path().join("hard.html");
    std::fs::hard_link(&beside, &hard).unwrap();
    let snapshots = |path: &std::path::Path| vec!["--snapshots".into(), path.to_path_buf()];
    let cases: [(Vec<std::path::PathBuf>, &std::path::Path); 6] = [
        (snapshots(&given), &given),
        (snapshots(given_dir.path()), &given),
        (
            snapshots(given_dir.path()),
            &given_dir.path().join("new.html"),
        ),
        (vec![], &beside),
        (vec![], &symlink),
        (vec![], &hard),
    ];
    for (extra, out) in cases {
        let result = memprints()
            .arg("report")
            .arg(&log)
            .args(&extra)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        assert_eq!(result.status.code(), Some(1), "{extra:?} --out {out:?}");
        assert!(
            stderr(&result).starts_with("error: invalid --out "),
            "{}",
            stderr(&result)
        );
        assert_eq!(std::fs::read(&beside).unwrap(), b"\x80\x04beside");
        assert_eq!(std::fs::read(&given).unwrap(), b"\x80\x04given");
        assert!(!given_dir.path().join("new.html").exists());
    }
}

#[test]
fn snapshot_out_never_overwrites_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let pickle = dir.path().join("rank0.pickle.gz");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz"
        ),
        &pickle,
    )
    .unwrap();
    let before = std::fs::read(&pickle).unwrap();
    let p = pickle.to_str().unwrap();
    for args in [
        vec!["snapshot", p, "--out", p],
        vec!["snapshot", dir.path().to_str().unwrap(), "--out", p],
        vec!["snapshot", "diff", p, p, "--out", p],
    ] {
        let out = memprints().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("invalid --out"), "{}", stderr(&out));
        assert_eq!(std::fs::read(&pickle).unwrap(), before);
    }
}

// -- closed and full stdout ------------------------------------------------------------------

fn instrumented() -> Tree {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe", "--ranks", "0,1", "--no-ruff"])
        .success();
    tree
}

#[test]
fn a_closed_stdout_is_a_quiet_success_for_every_command_that_prints() {
    let tree = instrumented();
    let clean = Tree::new();
    for (tree, args) in [
        (&tree, &["status"][..]),
        (&tree, &["status", "--json"][..]),
        (&tree, &["remove", "--dry-run"][..]),
        (&clean, &["plan", "tiny-moe", "--pp", "2"][..]),
        (&clean, &["plan", "tiny-moe", "--json"][..]),
        (&clean, &["add", "tiny-moe", "--dry-run"][..]),
        (&clean, &["demo"][..]),
        (&clean, &["report", REAL_LOG][..]),
        (&clean, &["report", REAL_LOG, "--format", "json"][..]),
        (&clean, &["skill"][..]),
        (&clean, &["completions", "bash"][..]),
        (&clean, &["man"][..]),
    ] {
        let out = run_with_stdout(tree, args, closed_pipe());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            !err.contains("panicked") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_closed_stdout_does_not_stop_remove_halfway() {
    let tree = instrumented();
    let original = Tree::new().snapshot();
    let out = run_with_stdout(&tree, &["remove"], closed_pipe());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let mut now = tree.snapshot();
    now.retain(|rel, _| !rel.starts_with(".memprints/"));
    assert_eq!(codemod::changed(&now, &original), Vec::<String>::new());
}

#[test]
fn a_full_stdout_is_one_line_and_the_tree_stays_consistent() {
    let original = Tree::new().snapshot();
    let user_files = |tree: &Tree| {
        let mut files = tree.snapshot();
        files.retain(|rel, _| !rel.starts_with(".memprints/"));
        files
    };
    // `add` says where the detail layers print before it writes (with --ranks 0,1 that is on
    // stdout): it stops there, unwritten.
    let tree = Tree::new();
    let out = run_with_stdout(
        &tree,
        &["add", "tiny-moe", "--no-ruff", "--ranks", "0,1"],
        dev_full(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: cannot write to stdout: No space left on device (os error 28)\n"
    );
    assert_eq!(user_files(&tree), original);
    // `remove` prints after its commit: the tree is fully restored, and the error says so (3).
    let tree = instrumented();
    let out = run_with_stdout(&tree, &["remove"], dev_full());
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: the tree was changed (6 files written)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(user_files(&tree), original);
    for args in [&["status"][..], &["demo"][..], &["report", REAL_LOG][..]] {
        let out = run_with_stdout(&Tree::new(), args, dev_full());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
}

// -- exit codes, --json, --quiet ---------------------------------------------------------------

#[test]
fn status_exit_codes_say_complete_clean_or_partial() {
    let clean = Tree::new();
    assert_eq!(clean.run(&["status"]).get_output().status.code(), Some(1));
    let tree = instrumented();
    tree.run(&["status"]).success();
    std::fs::write(tree.path().join(SIX[0]), Tree::new().read(SIX[0])).unwrap();
    assert_eq!(tree.run(&["status"]).get_output().status.code(), Some(2));
}

#[test]
fn add_json_says_what_was_written_where_and_which_groups() {
    let tree = Tree::new();
    let out = tree
        .run(&["add", "tiny-moe", "--ranks", "3,14", "--json", "--no-ruff"])
        .success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["model"], "tiny-moe");
    assert_eq!(json["action"], "added");
    assert_eq!(json["written"], true);
    assert_eq!(json["ranks"], serde_json::json!([3, 14]));
    assert_eq!(json["snapshot_dir"], "/tmp");
    assert_eq!(json["ruff"], Value::Null);
    let files = json["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, SIX);
    let groups: Vec<&str> = files
        .iter()
        .flat_map(|f| f["groups"].as_array().unwrap())
        .map(|g| g["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        groups,
        ["1B", "5A", "1A", "4", "5B-5E", "2", "1C", "3", "6", "7"]
    );
    assert!(files.iter().all(|f| f["changed"] == true));
    assert!(
        json["labels"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().contains("init_process_group"))
    );
    // The note on how the detail layers were chosen went to stderr, not into the JSON.
    assert!(String::from_utf8_lossy(&out.get_output().stderr).contains("detail layers"));

    let again = tree
        .run(&["add", "tiny-moe", "--on-existing", "skip", "--json"])
        .success();
    let skipped: Value = serde_json::from_slice(&again.get_output().stdout).unwrap();
    assert_eq!(
        (skipped["action"].as_str(), skipped["written"].as_bool()),
        (Some("skipped"), Some(false))
    );
}

#[test]
fn remove_json_names_each_restored_file_with_its_groups() {
    let tree = instrumented();
    let dry = tree.run(&["remove", "--dry-run", "--json"]).success();
    let json: Value = serde_json::from_slice(&dry.get_output().stdout).unwrap();
    assert_eq!(json["written"], false);
    assert_eq!(json["model"], "tiny-moe");
    let out = tree.run(&["remove", "--json"]).success();
    let json: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["written"], true);
    let files = json["files"].as_array().unwrap();
    assert_eq!(files.len(), 6);
    assert_eq!(files[2]["path"], SIX[2]);
    assert_eq!(files[2]["groups"], serde_json::json!(["5B-5E"]));
    assert!(
        files
            .iter()
            .all(|f| f["restored"] == true && f["left_alone"].is_null())
    );
    let nothing = tree.run(&["remove", "--json"]).success();
    let json: Value = serde_json::from_slice(&nothing.get_output().stdout).unwrap();
    assert_eq!(
        (json["model"].clone(), json["files"].clone()),
        (Value::Null, serde_json::json!([]))
    );
}

#[test]
fn quiet_add_remove_and_demo_print_no_listing() {
    let tree = Tree::new();
    let add = tree.run(&["add", "tiny-moe", "--quiet"]).success();
    assert_eq!(stdout(add.get_output()), "");
    let remove = tree.run(&["remove", "-q"]).success();
    assert_eq!(stdout(remove.get_output()), "");
    assert_eq!(tree.run(&["status"]).get_output().status.code(), Some(1));
    let demo = tree.run(&["demo", "--quiet"]).success();
    assert_eq!(
        stdout(demo.get_output()),
        "== every file of the sample is back, byte for byte; its bundled log reads 120 memory \
         prints, 0 unparsed\n"
    );
}

// -- completions and man -----------------------------------------------------------------------

#[test]
fn completion_scripts_name_every_command_and_bash_reads_its_own() {
    let names: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for shell in ["bash", "zsh", "fish"] {
        let out = memprints().args(["completions", shell]).output().unwrap();
        assert!(out.status.success());
        let script = stdout(&out);
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell}: {name}");
        }
    }
    let out = memprints().args(["completions", "bash"]).output().unwrap();
    let mut bash = Command::new("bash")
        .arg("-n")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(bash.stdin.as_mut().unwrap(), &out.stdout).unwrap();
    let status = bash.wait().unwrap();
    let mut err = String::new();
    bash.stderr.unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "bash -n: {err}");
}

#[test]
fn the_man_page_comes_from_the_clap_definitions() {
    let out = memprints().arg("man").output().unwrap();
    assert!(out.status.success());
    let page = stdout(&out);
    assert!(
        page.starts_with(".ie \\n(.g .ds Aq") || page.contains(".TH memprints"),
        "{page}"
    );
    assert!(page.contains("memprints\\-add"), "lists the commands");
    let dir = tempfile::tempdir().unwrap();
    let out = memprints()
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    for page in [
        "memprints.1",
        "memprints-add.1",
        "memprints-check.1",
        "memprints-snapshot-diff.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page}");
    }
}

#[test]
fn the_models_protocol_file_is_named_as_such_not_as_missing() {
    let tree = Tree::new();
    tree.write(
        "pithtrain/models/interface.py",
        "class ModelProtocol:\n    pass\n",
    );
    let out = run_with_stdout(&tree, &["add", "interface", "--dry-run"], Stdio::piped());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: `interface` is not a model: pithtrain/models/interface.py is the \
         protocol every model implements; models in this tree: biased-moe, fused-moe, \
         layered-moe, tiny-moe\n"
    );
}

#[test]
fn repo_may_name_the_package_folder_of_the_checkout() {
    let tree = Tree::new();
    let want = stdout(&run_with_stdout(&tree, &["status"], Stdio::piped()));
    let package = tree.path().join("pithtrain");
    for repo in [package.to_str().unwrap(), "pithtrain"] {
        let out = run_with_stdout(&tree, &["status", "--repo", repo], Stdio::piped());
        assert_eq!(stderr(&out), "", "--repo {repo}");
        assert_eq!(stdout(&out), want, "--repo {repo}");
    }
}

#[test]
fn a_rank_past_u32_is_too_large_not_garbage() {
    let tree = Tree::new();
    let out = run_with_stdout(
        &tree,
        &["add", "tiny-moe", "--ranks", "4294967296", "--dry-run"],
        Stdio::piped(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "error: invalid --ranks `4294967296`: 4294967296 is too large: each must be \
         0 to 1048575\n"
    );
}

// -- the face: short output, one error style, file errors with hints (issue 23) ---------------

/// Every path under `root` (folders too) with a file's bytes: what `diff -r` compares, ruff's
/// and Python's caches aside.
fn whole_tree(root: &std::path::Path) -> Vec<(String, Option<Vec<u8>>)> {
    let mut all = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name == "__pycache__" || name == ".ruff_cache" {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if path.is_dir() {
                all.push((rel, None));
                stack.push(path);
            } else {
                all.push((rel, Some(std::fs::read(&path).unwrap())));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn add_says_what_changed_and_the_next_step_in_at_most_six_lines() {
    let tree = Tree::new();
    let out = run_with_stdout(&tree, &["add", "tiny-moe", "--no-ruff"], Stdio::piped());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.lines().count() <= 6, "{all}");
    assert!(
        all.contains("memprints report logging/pretrain_lm/tiny_node0.log"),
        "{all}"
    );
    assert!(stdout(&out).starts_with("Added memory prints for tiny-moe to 6 files"));
    assert!(!all.contains("log labels you will see:"), "{all}");
    // The details are behind --verbose.
    let tree = Tree::new();
    let out = run_with_stdout(
        &tree,
        &["add", "tiny-moe", "--no-ruff", "--verbose"],
        Stdio::piped(),
    );
    assert!(stdout(&out).contains("log labels you will see:"));
    assert!(stdout(&out).contains("group 5A"));
}

#[test]
fn a_dry_run_a_refusal_and_status_leave_the_tree_exactly_as_it_was() {
    let tree = Tree::new();
    let before = whole_tree(tree.path());
    for (args, code) in [
        (&["add", "tiny-moe", "--dry-run", "--no-ruff"][..], 0),
        (&["add", "nope", "--no-ruff"][..], 1),
        (&["status"][..], 1),
    ] {
        let out = run_with_stdout(&tree, args, Stdio::piped());
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert_eq!(whole_tree(tree.path()), before, "{args:?}");
    }
    // An old PithTrain is refused after the lock is taken: the lock's folder goes with it.
    tree.edit(
        "pithtrain/dualpipe/execution.py",
        "def layer_forward(",
        "def layer_forward_old(",
    );
    let before = whole_tree(tree.path());
    let out = run_with_stdout(&tree, &["add", "tiny-moe", "--no-ruff"], Stdio::piped());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("predates"), "{}", stderr(&out));
    assert_eq!(whole_tree(tree.path()), before);
    // A written add and its remove: the tree is as before, no .memprints/ left.
    let tree = Tree::new();
    let before = whole_tree(tree.path());
    for args in [&["add", "tiny-moe", "--no-ruff"][..], &["remove"][..]] {
        let out = run_with_stdout(&tree, args, Stdio::piped());
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!tree.path().join(".memprints").exists(), "{args:?}");
    }
    assert_eq!(whole_tree(tree.path()), before);
}

#[test]
fn errors_say_error_then_hint_and_name_the_option_they_came_from() {
    let tree = Tree::new();
    let cases: [(&[&str], &str, &str); 3] = [
        (
            &["add", "tiny-moe", "--config", "nope.json"],
            "error: --config nope.json: no such file\n",
            "hint: pass a Hugging Face config.json",
        ),
        (
            &["plan", "tiny-moe", "--config", "nope.json"],
            "error: --config nope.json: no such file\n",
            "hint: pass a Hugging Face config.json",
        ),
        (
            &["check", "nope.py"],
            "error: FILE nope.py: no such file\n",
            "hint: pass Python files to check",
        ),
    ];
    for (args, error, hint) in cases {
        let out = run_with_stdout(&tree, args, Stdio::piped());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr(&out);
        assert!(err.starts_with(error), "{args:?}: {err}");
        assert!(err.lines().nth(1).unwrap().starts_with(hint), "{err}");
        assert!(!err.contains("os error"), "{err}");
    }
}

#[test]
fn a_log_given_as_a_snapshot_and_a_snapshot_given_as_a_log_point_to_the_right_command() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.log");
    std::fs::copy(
        codemod::fixture().join("../../data/report/pp1_default_prefix.log"),
        &log,
    )
    .unwrap();
    let pickle = dir.path().join("x.pickle");
    std::fs::copy(
        codemod::fixture().join("../../data/snapshot/basic_p5.pickle"),
        &pickle,
    )
    .unwrap();
    let out = memprints()
        .args(["snapshot", log.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("not a memory snapshot pickle"), "{err}");
    assert!(
        err.lines()
            .nth(1)
            .unwrap()
            .starts_with("hint: `memprints report "),
        "{err}"
    );
    let out = memprints()
        .args(["report", pickle.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), "");
    let err = stderr(&out);
    assert!(
        err.contains("a memory snapshot (a pickle), not a training log"),
        "{err}"
    );
    assert!(err.contains("`memprints snapshot "), "{err}");
    assert!(err.contains("--snapshots"), "{err}");
}

#[test]
fn a_rank_the_log_does_not_have_is_named_with_the_ranks_it_has() {
    let log = codemod::fixture().join("../../data/report/pp1_default_prefix.log");
    let out = memprints()
        .args(["report", log.to_str().unwrap(), "--rank", "5"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("error: --rank 5: the logs hold no memory prints of that rank\n"),
        "{err}"
    );
    assert!(
        err.contains("hint: the logs hold prints of ranks 0, 1;"),
        "{err}"
    );
    assert!(!err.contains("instrumented"), "{err}");
    // One of several missing: a warning, the report for the others.
    let out = memprints()
        .args([
            "report",
            log.to_str().unwrap(),
            "--rank",
            "1",
            "--rank",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).starts_with("warning: --rank 5:"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_rank_past_the_world_is_warned_about() {
    let tree = Tree::new();
    // The sample's script: pp=2, world 2.
    let out = run_with_stdout(
        &tree,
        &[
            "add",
            "tiny-moe",
            "--ranks",
            "0,1,14",
            "--no-ruff",
            "--dry-run",
        ],
        Stdio::piped(),
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains(
            "warning: --ranks: rank 14 does not exist in a world of 2 GPUs (ranks 0-1); it prints nothing"
        ),
        "{}",
        stderr(&out)
    );
    let out = run_with_stdout(
        &tree,
        &[
            "plan", "tiny-moe", "--ranks", "3,14", "--pp", "2", "--ep", "4",
        ],
        Stdio::piped(),
    );
    assert!(
        stderr(&out).contains("warning: --ranks: ranks 14 do not exist")
            || stderr(&out).contains("warning: --ranks: rank 14 does not exist in a world of 8"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_example_variant_is_mapped_to_its_model_with_a_note() {
    let tree = Tree::new();
    let out = run_with_stdout(&tree, &["add", "tiny", "--no-ruff"], Stdio::piped());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "note: tiny is an example variant: its config.json says model_type \"tiny_moe\", so the model is tiny-moe"
        ),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("logging/pretrain_lm/tiny_node0.log"));
    assert_ne!(
        tree.read(SIX[2]),
        Tree::new().read(SIX[2]),
        "the model file is instrumented"
    );
}

#[test]
fn colour_follows_the_color_flag_and_never_reaches_a_pipe_by_default() {
    let tree = Tree::new();
    let plain = run_with_stdout(&tree, &["add", "nope"], Stdio::piped());
    assert!(stderr(&plain).starts_with("error: "), "{}", stderr(&plain));
    let out = memprints()
        .current_dir(tree.path())
        .args(["add", "nope", "--color", "always"])
        .output()
        .unwrap();
    assert!(stderr(&out).contains("\x1b["), "{}", stderr(&out));
    let diff = memprints()
        .current_dir(tree.path())
        .args([
            "--color",
            "always",
            "add",
            "tiny-moe",
            "--dry-run",
            "--no-ruff",
        ])
        .output()
        .unwrap();
    assert!(stdout(&diff).contains("\x1b[32m+"), "green added lines");
    let out = memprints()
        .current_dir(tree.path())
        .args(["add", "tiny-moe", "--dry-run", "--no-ruff"])
        .output()
        .unwrap();
    assert!(!stdout(&out).contains('\x1b'));
}
