//! Every reachable state has a way forward: `remove` takes the prints out of any subset of the
//! six files, finishes after the user undoes an edit, takes edited blocks with `--force`;
//! `add --on-existing update` finishes a partial tree; `status` says `edited`, `missing`, and
//! errors on unreadable files; 30 and 64 ranks, CRLF and tab-indented files round-trip to the
//! byte; a file of long comment runs comes out right.

mod codemod;

use codemod::{SIX, Tree, assert_same_files, changed};

fn stderr(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stderr).to_string()
}

fn stdout(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).to_string()
}

fn status_json(tree: &Tree, code: i32) -> serde_json::Value {
    let out = tree.run(&["status", "--json"]).code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

/// The six files' instrumented texts, from a fresh tree.
fn instrumented(args: &[&str]) -> Vec<String> {
    let tree = Tree::new();
    let mut add = vec!["add", "tiny-moe", "--no-ruff", "-q"];
    add.extend_from_slice(args);
    tree.run(&add).success();
    SIX.iter().map(|rel| tree.read(rel)).collect()
}

#[test]
fn remove_takes_the_prints_out_of_any_subset_of_the_six_files() {
    let original = Tree::new();
    let texts = instrumented(&["--ranks", "0,3"]);
    for mask in 1u32..(1 << SIX.len()) {
        let tree = Tree::new();
        for (i, rel) in SIX.iter().enumerate() {
            if mask & (1 << i) != 0 {
                tree.write(rel, &texts[i]);
            }
        }
        let partial = mask != (1 << SIX.len()) - 1;
        let json = status_json(&tree, if partial { 2 } else { 0 });
        assert_eq!(
            json["state"],
            if partial { "partial" } else { "complete" },
            "{mask:06b}"
        );
        let out = tree.run(&["remove"]).code(0);
        let restored = stdout(&out).matches("memprints: restored ").count();
        assert_eq!(restored, mask.count_ones() as usize, "{mask:06b}");
        assert_eq!(
            changed(&original.snapshot(), &tree.snapshot()),
            Vec::<String>::new(),
            "{mask:06b}"
        );
    }
}

#[test]
fn status_on_a_partial_tree_names_each_files_groups() {
    let texts = instrumented(&[]);
    let tree = Tree::new();
    tree.write(SIX[1], &texts[1]);
    let json = status_json(&tree, 2);
    for file in json["files"].as_array().unwrap() {
        for group in file["groups"].as_array().unwrap() {
            let expected = if file["path"] == SIX[1] {
                "complete"
            } else {
                "absent"
            };
            assert_eq!(group["state"], expected, "{file}");
        }
    }
    let text = stdout(&tree.run(&["status"]).code(2));
    assert!(text.contains("partially instrumented"), "{text}");
    assert!(
        text.contains("pithtrain/dualpipe/dualpipev.py      group 4      Complete (14/14)"),
        "{text}"
    );
}

const EDITED_FROM: &str = "        G = 1024**3\n";
const EDITED_TO: &str = "        G = 1000**3\n";
const TRAINING: &str = "pithtrain/modules/training.py";

/// The 1-based line of the one occurrence of `needle` in `text`.
fn line_of(text: &str, needle: &str) -> usize {
    text[..text.find(needle).unwrap()].matches('\n').count() + 1
}

#[test]
fn after_the_user_undoes_an_edit_remove_finishes_to_the_byte() {
    let tree = Tree::new();
    let original = Tree::new();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    tree.edit(TRAINING, EDITED_FROM, EDITED_TO);
    let line = line_of(&tree.read(TRAINING), EDITED_TO);

    // status: edited, with the line, not complete.
    let text = stdout(&tree.run(&["status"]).code(2));
    assert!(
        text.contains(&format!("{TRAINING}:{line}: edited")),
        "{text}"
    );
    assert!(!text.contains("group 3      Complete"), "{text}");
    let json = status_json(&tree, 2);
    let training = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == TRAINING)
        .unwrap();
    assert_eq!(training["edited"], serde_json::json!([[line, line]]));
    assert_eq!(training["groups"][1]["state"], "edited");

    // remove leaves the file, names the line and the way on.
    let out = tree.run(&["remove"]).code(2);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("left {TRAINING} as it is: line {line} differs")),
        "{err}"
    );
    assert!(err.contains("memprints remove --force"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    // The user undoes the edit: the next remove finishes.
    tree.edit(TRAINING, EDITED_TO, EDITED_FROM);
    let out = tree.run(&["remove"]).code(0);
    assert!(stdout(&out).contains(&format!("restored {TRAINING}")));
    assert_same_files(&original, &tree);
    tree.run(&["status"]).code(1);
}

#[test]
fn remove_force_takes_edited_blocks_and_the_dry_run_names_the_lines_that_go() {
    let tree = Tree::new();
    let original = Tree::new();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    tree.edit(TRAINING, EDITED_FROM, EDITED_TO);
    let line = line_of(&tree.read(TRAINING), EDITED_TO);
    let before = tree.snapshot();

    let out = tree.run(&["remove", "--dry-run", "--force"]).code(0);
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "--force also takes out these lines of {TRAINING} that you edited:\n  {TRAINING}:{line}:         G = 1000**3\n"
        )),
        "{text}"
    );
    assert!(
        text.contains("-        G = 1000**3"),
        "the diff shows it: {text}"
    );
    assert_eq!(tree.snapshot(), before, "a dry run writes nothing");

    let out = tree.run(&["remove", "--force"]).code(0);
    assert!(
        stdout(&out).contains(&format!(
            "restored {TRAINING} (--force: line {line} differs"
        )),
        "{}",
        stdout(&out)
    );
    assert_same_files(&original, &tree);
}

#[test]
fn update_finishes_a_partly_instrumented_tree_with_the_new_ranks() {
    let texts = instrumented(&["--ranks", "3"]);
    let tree = Tree::new();
    let original = Tree::new();
    for i in [0, 1, 3] {
        tree.write(SIX[i], &texts[i]);
    }
    tree.run(&[
        "add",
        "tiny-moe",
        "--ranks",
        "5,6",
        "--on-existing",
        "update",
        "--no-ruff",
        "-q",
    ])
    .success();
    let json = status_json(&tree, 0);
    assert_eq!(json["state"], "complete");
    assert_eq!(json["ranks"], serde_json::json!([5, 6]));
    let fresh = instrumented(&["--ranks", "5,6"]);
    for (rel, text) in SIX.iter().zip(&fresh) {
        assert_eq!(&tree.read(rel), text, "{rel}");
    }
    tree.run(&["remove", "-q"]).success();
    assert_same_files(&original, &tree);
}

#[test]
fn status_errors_on_an_unreadable_or_non_utf8_file_and_names_a_missing_one() {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    let mut bytes = tree.read(TRAINING).into_bytes();
    bytes.extend_from_slice(b"# \xff\xfe\n");
    std::fs::write(tree.path().join(TRAINING), &bytes).unwrap();
    let err = stderr(&tree.run(&["status"]).code(1));
    assert!(
        err.contains(&format!("{TRAINING}: not UTF-8 text")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    tree.run(&["remove"]).code(1);

    std::fs::remove_file(tree.path().join(TRAINING)).unwrap();
    std::fs::create_dir(tree.path().join(TRAINING)).unwrap();
    let err = stderr(&tree.run(&["status"]).code(1));
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("training.py"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    std::fs::remove_dir(tree.path().join(TRAINING)).unwrap();
    let text = stdout(&tree.run(&["status"]).code(2));
    assert!(text.contains(&format!("  {TRAINING}: missing")), "{text}");
    let json = status_json(&tree, 2);
    let training = json["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == TRAINING)
        .unwrap();
    assert_eq!(training["missing"], true);
}

fn ranks(n: u32) -> String {
    (0..n).map(|r| r.to_string()).collect::<Vec<_>>().join(",")
}

#[test]
fn thirty_and_sixty_four_ranks_round_trip() {
    for n in [30, 64] {
        let tree = Tree::new();
        let original = tree.snapshot();
        tree.run(&["add", "tiny-moe", "--ranks", &ranks(n), "--no-ruff", "-q"])
            .success();
        assert!(
            tree.read(SIX[0])
                .contains("_layer_mem_ranks = {\n    0,\n    1,\n"),
            "ruff wraps the set over lines"
        );
        let json = status_json(&tree, 0);
        assert_eq!(json["ranks"], serde_json::json!((0..n).collect::<Vec<_>>()));
        tree.run(&[
            "add",
            "tiny-moe",
            "--ranks",
            &ranks(n - 1),
            "--on-existing",
            "update",
            "--no-ruff",
            "-q",
        ])
        .success();
        let json = status_json(&tree, 0);
        assert_eq!(
            json["ranks"],
            serde_json::json!((0..n - 1).collect::<Vec<_>>())
        );
        tree.run(&["remove"]).success();
        assert_eq!(
            changed(&original, &tree.snapshot()),
            Vec::<String>::new(),
            "{n}"
        );
    }
}

/// `text` with `\r\n` line ends.
fn crlf(text: &str) -> String {
    text.replace('\n', "\r\n")
}

/// `text` with each leading group of four spaces a tab.
fn tabs(text: &str) -> String {
    text.split_inclusive('\n')
        .map(|line| {
            let spaces = line.len() - line.trim_start_matches(' ').len();
            format!(
                "{}{}",
                "\t".repeat(spaces / 4),
                &line[spaces - spaces % 4..]
            )
        })
        .collect()
}

#[test]
fn crlf_files_keep_their_line_ends_and_round_trip() {
    let tree = Tree::new();
    for rel in [SIX[0], SIX[2], SIX[4]] {
        tree.write(rel, &crlf(&tree.read(rel)));
    }
    let original = tree.snapshot();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    for (i, rel) in SIX.iter().enumerate() {
        let text = tree.read(rel);
        let lone = text.replace("\r\n", "").matches('\n').count();
        if [0, 2, 4].contains(&i) {
            assert_eq!(lone, 0, "{rel}: every line ends in \\r\\n");
            assert!(text.contains("_mem") || text.contains("_lmem"), "{rel}");
        } else {
            assert!(!text.contains('\r'), "{rel} stays \\n");
        }
    }
    assert_eq!(status_json(&tree, 0)["state"], "complete");
    tree.run(&["remove"]).success();
    assert_eq!(changed(&original, &tree.snapshot()), Vec::<String>::new());
}

#[test]
fn tab_indented_files_round_trip_and_placed_code_nests_with_tabs() {
    let tree = Tree::new();
    for rel in SIX {
        tree.write(rel, &tabs(&tree.read(rel)));
    }
    let original = tree.snapshot();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    let training = tree.read(TRAINING);
    assert!(
        training.contains("\n\t_setup_mem(\"after apply_fsdp\")\n"),
        "{training}"
    );
    assert!(tree.read(SIX[2]).contains("_do_mem"));
    // execution.py's formatted part (above its `# fmt: off`) has no indented line of its own,
    // so it is stable under the repository's space indentation, and the helpers placed there
    // keep it so.
    for rel in SIX.iter().filter(|r| !r.ends_with("execution.py")) {
        for line in tree.read(rel).lines() {
            let indent = &line[..line.len() - line.trim_start().len()];
            assert!(
                !indent.contains("    "),
                "{rel}: space-indented line {line:?}"
            );
        }
    }
    codemod::assert_compiles(tree.path(), &SIX);
    assert_eq!(status_json(&tree, 0)["state"], "complete");
    tree.run(&["remove"]).success();
    assert_eq!(changed(&original, &tree.snapshot()), Vec::<String>::new());
}

#[test]
fn a_file_of_long_comment_runs_is_instrumented_and_restored_to_the_byte() {
    let tree = Tree::new();
    let mut text = tree.read(TRAINING);
    let run: String = (0..3000)
        .map(|i| format!("# a plain comment line, number {i}\n"))
        .collect();
    text = text.replacen("\ndef setup_model(", &format!("\n{run}def setup_model("), 1);
    text.push_str(&run);
    tree.write(TRAINING, &text);
    let original = tree.snapshot();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    let instrumented = tree.read(TRAINING);
    assert!(
        instrumented.ends_with(&run),
        "the trailing comments stay last"
    );
    assert!(instrumented.contains("_setup_mem(\"after apply_fsdp\")"));
    assert_eq!(status_json(&tree, 0)["state"], "complete");
    tree.run(&["remove"]).success();
    assert_eq!(changed(&original, &tree.snapshot()), Vec::<String>::new());
}

/// Found by the `strip` fuzz target: a statement ending in a multi-byte character (`Š`) made
/// the line arithmetic slice inside the character. Each kept crash input runs through what the
/// target runs; the CLI case is the same statement in an instrumented file.
#[test]
fn fuzz_crash_inputs_stay_fixed() {
    use memprints_codemod::instrument::verify;
    use memprints_codemod::pithtrain::Target;
    use memprints_python::PySource;
    use memprints_python::edit::format::FormatSettings;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fuzz/strip");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        let (&which, rest) = data.split_first().unwrap();
        let target = Target::ALL[which as usize % Target::ALL.len()];
        let Ok(text) = std::str::from_utf8(rest) else {
            continue;
        };
        if let Ok(src) = PySource::parse("fuzz.py", text.to_string()) {
            let settings = FormatSettings::default();
            let _ = memprints_codemod::instrument::strip::strip(&src, &settings);
            let fallback = memprints_codemod::params::Params {
                ranks: vec![0],
                detail_layers: vec![0, 1],
                snapshot_dir: "/tmp".into(),
            };
            let _ = verify::check(&settings, target, &src, &fallback);
        }
        seen += 1;
    }
    assert!(seen > 0);

    let tree = Tree::new();
    let expected = Tree::new();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    for t in [&tree, &expected] {
        let text = t.read(TRAINING);
        t.write(TRAINING, &format!("{text}\nrésumé = 1\nrésumé\nŠ\n"));
    }
    tree.run(&["status"]).code(0);
    tree.run(&["remove"]).success();
    assert_same_files(&expected, &tree);
}

#[test]
fn files_with_different_ranks_are_partial_and_update_or_remove_puts_them_right() {
    let one = instrumented(&["--ranks", "1"]);
    let two = instrumented(&["--ranks", "2"]);
    let original = Tree::new();
    let mixed = || {
        let tree = Tree::new();
        for (i, rel) in SIX.iter().enumerate() {
            tree.write(rel, if i < 3 { &one[i] } else { &two[i] });
        }
        tree
    };
    let tree = mixed();
    let json = status_json(&tree, 2);
    assert_eq!(json["state"], "partial");
    let text = stdout(&tree.run(&["status"]).code(2));
    assert!(
        text.contains("ranks differ between files: {1} in pithtrain/dualpipe/execution.py"),
        "{text}"
    );
    assert!(
        text.contains("{2} in pithtrain/modules/distributed.py"),
        "{text}"
    );
    tree.run(&["remove", "-q"]).success();
    assert_same_files(&original, &tree);

    let tree = mixed();
    tree.run(&[
        "add",
        "tiny-moe",
        "--ranks",
        "2",
        "--on-existing",
        "update",
        "--no-ruff",
        "-q",
    ])
    .success();
    for (rel, text) in SIX.iter().zip(&two) {
        assert_eq!(&tree.read(rel), text, "{rel}");
    }
    assert_eq!(status_json(&tree, 0)["inconsistent"], serde_json::json!([]));
}

#[test]
fn a_deleted_inserted_line_or_a_deleted_anchor_is_named_and_force_takes_the_rest() {
    // The user took one probe out by hand: status and remove say inserted lines were deleted.
    let tree = Tree::new();
    let original = Tree::new();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    tree.edit(TRAINING, "    _setup_mem(\"after apply_fsdp\")\n", "");
    let text = stdout(&tree.run(&["status"]).code(2));
    assert!(
        text.contains(&format!("{TRAINING}: edited: inserted lines were deleted")),
        "{text}"
    );
    let err = stderr(&tree.run(&["remove"]).code(2));
    assert!(err.contains("inserted lines were deleted"), "{err}");
    tree.run(&["remove", "--force"]).success();
    assert_same_files(&original, &tree);

    // The user deleted an anchor: the removal cannot be verified; --force writes the stripped
    // text, which keeps the deletion.
    let tree = Tree::new();
    let expected = Tree::new();
    tree.run(&["add", "tiny-moe", "--no-ruff", "-q"]).success();
    for t in [&tree, &expected] {
        t.edit(TRAINING, "    apply_fsdp(modules, mesh)\n", "");
    }
    let text = stdout(&tree.run(&["status"]).code(2));
    assert!(
        text.contains(&format!("{TRAINING}: cannot be checked against `add`")),
        "{text}"
    );
    let err = stderr(&tree.run(&["remove", "--dry-run"]).code(2));
    assert!(err.contains("cannot verify the removal"), "{err}");
    let out = stdout(&tree.run(&["remove", "--dry-run", "--force"]).code(0));
    assert!(
        out.contains(&format!(
            "--force restores {TRAINING} although cannot verify"
        )),
        "{out}"
    );
    tree.run(&["remove", "--force", "-q"]).success();
    assert_same_files(&expected, &tree);
}
