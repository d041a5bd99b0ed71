//! `memprints add` on the fixture tree: the exact output (snapshots), that it is valid and
//! ruff-clean Python, all-or-nothing behaviour on missing anchors, `--dry-run`, and what happens
//! on an already instrumented tree.

mod codemod;

use codemod::{OutputAssertExt, SIX, Tree, assert_python_clean, changed, diff};

#[test]
fn add_instruments_exactly_the_six_files_as_the_snapshot_shows() {
    let tree = Tree::new();
    let before = tree.snapshot();
    tree.run(&[
        "add",
        "tiny-moe",
        "--ranks",
        "3,14",
        "--detail-layers",
        "0,1",
    ])
    .success();
    let after = tree.snapshot();
    assert_eq!(changed(&before, &after), {
        let mut six: Vec<String> = SIX.iter().map(|s| s.to_string()).collect();
        six.sort();
        six
    });
    let mut all = String::new();
    for rel in SIX {
        all.push_str(&diff(
            rel,
            &String::from_utf8_lossy(&before[rel]),
            &tree.read(rel),
        ));
    }
    insta::assert_snapshot!("add_tiny_moe", all);
}

#[test]
fn instrumented_files_parse_compile_and_pass_ruff_with_the_fixture_settings() {
    for model in ["tiny-moe", "layered-moe", "fused-moe", "biased-moe"] {
        let tree = Tree::new();
        tree.run(&["add", model, "--ranks", "0,1"]).success();
        let model_file = format!("pithtrain/models/{}.py", model.replace('-', "_"));
        let mut files: Vec<&str> = SIX
            .iter()
            .copied()
            .filter(|f| !f.contains("/models/"))
            .collect();
        files.push(&model_file);
        assert_python_clean(tree.path(), &files);
    }
}

#[test]
fn set_device_moves_above_init_process_group() {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    let text = tree.read("pithtrain/modules/distributed.py");
    let set_device = text
        .find("torch.cuda.set_device(distributed.local_rank)")
        .unwrap();
    let init = text
        .find("torch.distributed.init_process_group(**kwargs)")
        .unwrap();
    assert!(set_device < init, "{text}");
    assert_eq!(text.matches("torch.cuda.set_device(").count(), 1);
}

#[test]
fn dry_run_prints_the_diff_and_writes_nothing() {
    let tree = Tree::new();
    let before = tree.snapshot();
    let out = tree.run(&["add", "tiny-moe", "--dry-run"]).success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.contains("+++ b/pithtrain/dualpipe/dualpipev.py"),
        "{stdout}"
    );
    assert!(stdout.contains("+def _mem_gb() -> float:"));
    assert_eq!(tree.snapshot(), before);
}

#[test]
fn the_summary_names_groups_files_and_labels() {
    let tree = Tree::new();
    let out = tree
        .run(&["add", "tiny-moe", "--ranks", "3,14", "--verbose"])
        .success();
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    for needle in [
        "group 4",
        "group 5A",
        "group 7",
        "pithtrain/tasks/pretrain_lm.py",
        "Before pipeline",
        "load_ckpt | optimizer state:",
    ] {
        assert!(stdout.contains(needle), "summary lacks {needle}:\n{stdout}");
    }
    assert!(stdout.contains("ruff is not on PATH"), "{stdout}");
}

/// Each case removes one anchor from a copy: (file, text to replace, replacement, words the
/// error must contain).
const ANCHORS: &[(&str, &str, &str, &[&str])] = &[
    (
        "pithtrain/dualpipe/execution.py",
        "    # Stage 1.\n",
        "",
        &["layer_forward", "# Stage 1."],
    ),
    (
        "pithtrain/dualpipe/execution.py",
        "    nvtx.range_pop()\n\n    # Stage 3.",
        "\n    # Stage 3.",
        &["layer_forward", "range_pop", "Stage 2"],
    ),
    (
        "pithtrain/dualpipe/execution.py",
        "block.forward_stage5(",
        "block.forward_last(",
        &["layer_forward", "forward_stage5"],
    ),
    (
        "pithtrain/dualpipe/execution.py",
        "    layer_record.stage1 = (hidden_states, dispatch_tokens)\n",
        "",
        &["layer_forward", ".stage1"],
    ),
    (
        "pithtrain/dualpipe/dualpipev.py",
        "        self.comm_stream = torch.cuda.Stream()\n",
        "",
        &["__init__", "self.comm_stream"],
    ),
    (
        "pithtrain/dualpipe/dualpipev.py",
        "        assert WeightGradStore.funcs_queue.empty()\n",
        "",
        &["DualPipeV.step", "funcs_queue.empty()"],
    ),
    (
        "pithtrain/dualpipe/dualpipev.py",
        "for i in range(step_3):",
        "for i in range(step_3 + 0):",
        &["DualPipeV.step", "range(step_3)"],
    ),
    (
        "pithtrain/dualpipe/dualpipev.py",
        "            self._forward_backward_chunk(1, 0)\n\n        # Step 5",
        "\n        # Step 5",
        &["DualPipeV.step", "_forward_backward_chunk(1, 0)"],
    ),
    (
        "pithtrain/models/tiny_moe.py",
        "= prepare_dispatch(",
        "= dispatch(",
        &["forward_stage1", "prepare_dispatch"],
    ),
    (
        "pithtrain/models/tiny_moe.py",
        "        return padded_index_gather(outs, reverse_shuffle_idxs)\n",
        "        return outs[reverse_shuffle_idxs]\n",
        &["forward_stage3", "padded_index_gather"],
    ),
    (
        "pithtrain/models/tiny_moe.py",
        "        self.experts = TinyExperts(config, self.experts_per_rank)\n",
        "",
        &["TinyDecoderLayer.__init__", "experts class"],
    ),
    (
        "pithtrain/modules/distributed.py",
        "    torch.distributed.init_process_group(**kwargs)\n",
        "",
        &["setup_default_process_group", "init_process_group"],
    ),
    (
        "pithtrain/modules/distributed.py",
        "    torch.cuda.set_device(distributed.local_rank)\n",
        "",
        &["setup_default_process_group", "set_device"],
    ),
    (
        "pithtrain/modules/training.py",
        "    modules = []\n",
        "    modules = list()\n",
        &["setup_model", "modules = []"],
    ),
    (
        "pithtrain/modules/training.py",
        "    apply_fsdp(modules, mesh)\n",
        "",
        &["setup_model", "apply_fsdp"],
    ),
    (
        "pithtrain/tasks/pretrain_lm.py",
        "    dcp.load(state, checkpoint_id=checkpoints[-1])\n",
        "",
        &["load_checkpoint", "dcp.load"],
    ),
    (
        "pithtrain/tasks/pretrain_lm.py",
        "    model.train()\n",
        "",
        &["train_step", "model.train()"],
    ),
];

#[test]
fn a_missing_anchor_names_file_function_and_anchor_and_writes_nothing() {
    for (file, from, to, words) in ANCHORS {
        let tree = Tree::new();
        tree.edit(file, from, to);
        let before = tree.snapshot();
        let out = tree
            .run(&["add", "tiny-moe", "--detail-layers", "0,1"])
            .failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(
            stderr.starts_with(&format!("error: {file}: in `")),
            "{file} / {from:?}:\n{stderr}"
        );
        for word in *words {
            assert!(
                stderr.contains(word),
                "error for {from:?} lacks `{word}`:\n{stderr}"
            );
        }
        assert!(stderr.contains(" | "), "no source context shown:\n{stderr}");
        assert_eq!(
            tree.snapshot(),
            before,
            "tree changed after a failed add ({from:?})"
        );
    }
}

#[test]
fn an_already_instrumented_tree_aborts_without_a_terminal_and_names_the_flag() {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    let before = tree.snapshot();
    let out = tree.run(&["add", "tiny-moe"]).failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("--on-existing"), "{stderr}");
    assert_eq!(tree.snapshot(), before);
}

#[test]
fn on_existing_skip_changes_nothing() {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe", "--ranks", "3"]).success();
    let before = tree.snapshot();
    tree.run(&["add", "tiny-moe", "--ranks", "5", "--on-existing", "skip"])
        .success();
    assert_eq!(tree.snapshot(), before);
}

#[test]
fn on_existing_update_changes_only_ranks_layers_and_snapshot_folder() {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe", "--ranks", "3", "--detail-layers", "0,1"])
        .success();
    let before = tree.snapshot();
    tree.run(&[
        "add",
        "tiny-moe",
        "--ranks",
        "5,6",
        "--detail-layers",
        "2",
        "--snapshot-dir",
        "/scratch/snaps",
        "--on-existing",
        "update",
    ])
    .success();
    let after = tree.snapshot();
    for rel in changed(&before, &after) {
        let old = String::from_utf8_lossy(&before[&rel]).to_string();
        let new = String::from_utf8_lossy(&after[&rel]).to_string();
        for change in similar::TextDiff::from_lines(&old, &new).iter_all_changes() {
            if change.tag() == similar::ChangeTag::Equal {
                continue;
            }
            let line = change.value();
            let expected = [
                "{3}",
                "{5, 6}",
                "(0, 1)",
                "(2,)",
                "/tmp/memory_snapshot",
                "/scratch/snaps/memory_snapshot",
            ];
            // A longer folder may make Ruff wrap the path assignment in parentheses.
            let rewrapped = matches!(line.trim(), "snapshot_path = (" | ")");
            assert!(
                rewrapped || expected.iter().any(|e| line.contains(e)),
                "{rel}: unexpected change {line:?}"
            );
        }
    }
    let status = tree.run(&["status", "--json"]).success();
    let json: serde_json::Value = serde_json::from_slice(&status.get_output().stdout).unwrap();
    assert_eq!(json["ranks"], serde_json::json!([5, 6]));
    assert_eq!(json["detail_layers"], serde_json::json!([2]));
    assert_eq!(json["snapshot_dir"], "/scratch/snaps");
}

#[test]
fn bad_arguments_are_one_line_errors() {
    let tree = Tree::new();
    for (args, needle) in [
        (
            &["add", "tiny-moe", "--ranks", "3,x"][..],
            "`x` is not a non-negative integer",
        ),
        (
            &["add", "tiny-moe", "--ranks=-1"][..],
            "`-1` is not a non-negative integer",
        ),
        (&["add", "nope"][..], "unknown model `nope`"),
        (
            &["add", "tiny-moe", "--detail-layers", "9"][..],
            "layer 9 is out of range",
        ),
        (
            &["add", "tiny-moe", "--snapshot-dir", "/tmp/{x}"][..],
            "--snapshot-dir",
        ),
    ] {
        let out = tree.run(args).failure();
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = tree.run(&["add", "nope"]).failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("biased-moe, fused-moe, layered-moe, tiny-moe"),
        "models not listed: {stderr}"
    );
}

#[test]
fn a_tree_that_is_not_pithtrain_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = codemod::memprints()
        .current_dir(dir.path())
        .args(["add", "tiny-moe"])
        .assert()
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("no PithTrain checkout"), "{stderr}");
}

#[test]
fn the_ruff_step_never_removes_a_line_of_the_user_and_remove_restores_it() {
    let Some(ruff) = codemod::ruff() else { return };
    let tree = Tree::new();
    let rel = "pithtrain/modules/training.py";
    tree.edit(
        rel,
        "\"\"\"Model construction.\"\"\"\n\nimport torch\n",
        "\"\"\"Model construction.\"\"\"\n\nimport json\n\nimport torch\n",
    );
    let before = tree.snapshot();
    let path = format!("{}:/usr/bin:/bin", ruff.parent().unwrap().display());
    let out = codemod::memprints()
        .current_dir(tree.path())
        .env("PATH", &path)
        .args(["add", "tiny-moe", "-q"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(tree.read(rel).contains("\nimport json\n"), "add removed it");
    assert!(
        stderr.contains(
            "warning: ruff would also fix F401 (`json` imported but unused) at \
             pithtrain/modules/training.py:3, which memprints leaves to you"
        ),
        "{stderr}"
    );
    codemod::memprints()
        .current_dir(tree.path())
        .env("PATH", &path)
        .args(["remove", "-q"])
        .assert()
        .success();
    assert_eq!(changed(&before, &tree.snapshot()), Vec::<String>::new());
}

/// What the inserted `init_process_group` print writes on one H200, where
/// `torch.cuda.mem_get_info()` gives a total of 150,110,011,392 bytes: the instrumented file
/// run under a stand-in `torch` that answers as that GPU would (no GPU here), the line compared
/// whole, and read back by the log reader as that total, exact.
#[test]
fn the_process_group_print_records_the_gpus_total_as_an_h200_prints_it() {
    const H200_TOTAL: i64 = 150_110_011_392;
    const LINE: &str = "[rank=0] init_process_group | cuda_ctx=0.51 after_nccl_world=1.10 \
                        nccl_world_cost=0.59 gpu_total=139.80 (150110011392 bytes)";
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe", "--ranks", "0"]).success();
    let runner = format!(
        r#"
import os, sys, types

calls = []
free = iter([{total} - 547356672, {total} - 1178599424])
cuda = types.SimpleNamespace(
    set_device=lambda d: calls.append(("set_device", d)),
    synchronize=lambda: None,
    mem_get_info=lambda: (next(free), {total}),
)
dist = types.SimpleNamespace(
    init_process_group=lambda **kw: calls.append(("init_process_group", kw)),
    destroy_process_group=lambda: None,
)
sys.modules["torch"] = types.SimpleNamespace(cuda=cuda, distributed=dist)
sys.path.insert(0, ".")
os.environ.update(RANK="0", LOCAL_RANK="0")
from pithtrain.modules import distributed as m

m.setup_default_process_group(None)
assert calls == [
    ("set_device", 0),
    ("init_process_group", dict(backend="nccl", device_id=0)),
], calls
"#,
        total = H200_TOTAL
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &runner])
        .current_dir(tree.path())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout, format!("{LINE}\n"));
    let print = memprints_log::parse::parse_print(LINE.as_bytes()).expect("the reader reads it");
    assert!(matches!(
        print.event,
        memprints_log::parse::Event::ProcessGroup {
            gpu_total: Some(H200_TOTAL),
            ..
        }
    ));
}
