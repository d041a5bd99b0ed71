//! The codemod on a real PithTrain checkout, when `MEMPRINTS_PITHTRAIN` names one (read-only:
//! each model works on its own copy): for each of the four models `add` with default arguments
//! says that every detail layer prints on rank 0 (under the example script and at pp 1, 2, 4),
//! its files pass `ruff format --check`, `ruff check` and `py_compile`, and `remove` gives back
//! every byte.

mod codemod;

use std::path::PathBuf;

use codemod::{Tree, assert_python_clean};

/// The models of the PithTrain export and their default detail layers.
const MODELS: [(&str, [u32; 2]); 4] = [
    ("qwen3-moe", [0, 1]),
    ("qwen35-moe", [0, 1]),
    ("deepseek-v2", [1, 2]),
    ("gpt-oss", [0, 1]),
];

fn pithtrain() -> Option<PathBuf> {
    match std::env::var_os("MEMPRINTS_PITHTRAIN") {
        Some(tree) => Some(PathBuf::from(tree)),
        None => {
            eprintln!("skipped: set MEMPRINTS_PITHTRAIN=/path/to/pith-train to run on a real tree");
            None
        }
    }
}

/// A copy of the checkout, links and all (`cp -a`: PithTrain's tree holds symlinks).
fn copy(source: &std::path::Path) -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(source.join("."))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "cp -a {}", source.display());
    Tree { dir }
}

#[test]
fn default_add_prints_every_detail_layer_on_rank_0_and_round_trips_on_a_real_tree() {
    let Some(source) = pithtrain() else {
        return;
    };
    for (model, [a, b]) in MODELS {
        let tree = copy(&source);
        let before = tree.snapshot();
        let expected =
            format!("detail layers print: layer {a} on rank 0; layer {b} on rank 0 (layout ");
        for pp in [None, Some("1"), Some("2"), Some("4")] {
            let mut args = vec!["add", model, "--dry-run"];
            args.extend(pp.iter().flat_map(|pp| ["--pp", pp]));
            let out = tree.run(&args).success();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&out.get_output().stdout).to_string(),
                String::from_utf8_lossy(&out.get_output().stderr).to_string(),
            );
            assert!(stdout.contains(&expected), "{model} {pp:?}: {stdout}");
            assert!(!stderr.contains("warning"), "{model} {pp:?}: {stderr}");
            if pp.is_none() {
                assert!(
                    stdout.contains(" from examples/pretrain_lm/"),
                    "{model}: the example script's layout: {stdout}"
                );
            }
        }
        let out = tree.run(&["add", model, "--no-ruff", "--json"]).success();
        let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let files: Vec<&str> = json["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert_eq!(files.len(), 6, "{model}");
        let execution = tree.read("pithtrain/dualpipe/execution.py");
        assert!(
            execution.contains("_SavedTensorsProfiler(layer, \"stage1\")"),
            "{model}"
        );
        assert!(!execution.contains("_wt_ptrs"), "{model}");
        assert!(
            tree.read("pithtrain/dualpipe/dualpipev.py")
                .contains("if _profiling and i == 0 and step_1 < 2:"),
            "{model}"
        );
        assert_python_clean(tree.path(), &files);
        tree.run(&["status"]).success();
        tree.run(&["remove", "--quiet"]).success();
        let after = tree.snapshot();
        let changed: Vec<String> = codemod::changed(&before, &after)
            .into_iter()
            .filter(|f| !f.starts_with(".memprints") && !f.contains("__pycache__"))
            .collect();
        assert!(changed.is_empty(), "{model}: remove left {changed:?}");
    }
}
