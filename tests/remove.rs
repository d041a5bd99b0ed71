//! `memprints remove` and `status`: instrumentation comes out to the byte, the user's edits made
//! after `add` stay, edits inside inserted code leave that file alone, and the state is read back
//! from the tree alone.

mod codemod;

use codemod::{SIX, Tree, assert_same_files, changed};
use proptest::prelude::*;

#[test]
fn add_then_remove_gives_back_the_original_bytes_for_every_model() {
    for model in ["tiny-moe", "layered-moe", "fused-moe", "biased-moe"] {
        let tree = Tree::new();
        let before = tree.snapshot();
        tree.run(&["add", model, "--ranks", "0,3"]).success();
        assert_ne!(tree.snapshot(), before);
        tree.run(&["remove"]).success();
        assert_eq!(
            changed(&before, &tree.snapshot()),
            Vec::<String>::new(),
            "{model}"
        );
    }
}

#[test]
fn remove_keeps_a_new_function_and_a_new_comment_the_user_added() {
    let tree = Tree::new();
    let expected = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    for t in [&tree, &expected] {
        let training = t.read("pithtrain/modules/training.py");
        t.write(
            "pithtrain/modules/training.py",
            &format!("{training}\n\ndef user_helper():\n    return 42\n"),
        );
        let dualpipev = t.read("pithtrain/dualpipe/dualpipev.py");
        t.write(
            "pithtrain/dualpipe/dualpipev.py",
            &format!("# my note\n{dualpipev}"),
        );
    }
    tree.run(&["remove"]).success();
    assert_same_files(&expected, &tree);
}

#[test]
fn an_edit_inside_inserted_code_leaves_that_file_and_cleans_the_others() {
    let tree = Tree::new();
    let original = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    tree.edit(
        "pithtrain/modules/training.py",
        "        G = 1024**3\n",
        "        G = 1000**3\n",
    );
    let edited = tree.read("pithtrain/modules/training.py");
    let out = tree.run(&["remove"]).code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("left pithtrain/modules/training.py as it is"),
        "{stderr}"
    );
    assert!(stderr.contains("lines "), "{stderr}");
    assert_eq!(tree.read("pithtrain/modules/training.py"), edited);
    for rel in SIX.iter().filter(|r| !r.ends_with("training.py")) {
        assert_eq!(tree.read(rel), original.read(rel), "{rel} was not cleaned");
    }
}

#[test]
fn a_file_whose_removal_cannot_be_verified_is_left_alone_and_the_others_are_cleaned() {
    let tree = Tree::new();
    let original = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    // The user deleted an anchor: re-adding to the stripped file fails, so it cannot be verified.
    tree.edit(
        "pithtrain/modules/training.py",
        "    apply_fsdp(modules, mesh)\n",
        "",
    );
    let edited = tree.read("pithtrain/modules/training.py");
    let out = tree.run(&["remove"]).code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("left pithtrain/modules/training.py as it is: cannot verify the removal"),
        "{stderr}"
    );
    assert_eq!(tree.read("pithtrain/modules/training.py"), edited);
    for rel in SIX.iter().filter(|r| !r.ends_with("training.py")) {
        assert_eq!(tree.read(rel), original.read(rel), "{rel} was not cleaned");
    }
}

#[test]
fn remove_dry_run_writes_nothing() {
    let tree = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    let before = tree.snapshot();
    let out = tree.run(&["remove", "--dry-run"]).success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("-def _mem_gb() -> float:"));
    assert_eq!(tree.snapshot(), before);
}

#[test]
fn remove_on_a_clean_tree_says_so_and_changes_nothing() {
    let tree = Tree::new();
    let before = tree.snapshot();
    let out = tree.run(&["remove"]).success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("nothing to remove"));
    assert_eq!(tree.snapshot(), before);
}

#[test]
fn status_exit_codes_follow_the_state() {
    let tree = Tree::new();
    tree.run(&["status"]).code(1);
    tree.run(&[
        "add",
        "layered-moe",
        "--ranks",
        "2",
        "--snapshot-dir",
        "/data/snaps",
    ])
    .success();
    let out = tree.run(&["status", "--json"]).code(0);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["state"], "complete");
    assert_eq!(json["models"], serde_json::json!(["layered-moe"]));
    assert_eq!(json["ranks"], serde_json::json!([2]));
    assert_eq!(json["detail_layers"], serde_json::json!([2, 3]));
    assert_eq!(json["snapshot_dir"], "/data/snaps");
    let text = tree.read("pithtrain/modules/training.py");
    tree.write(
        "pithtrain/modules/training.py",
        &text.replacen("    _setup_mem(\"after apply_fsdp\")\n", "", 1),
    );
    let out = tree.run(&["status", "--json"]).code(2);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["state"], "partial");
}

/// A tree instrumented by a memprints from before `init_process_group` recorded the GPU's total
/// memory is still complete for `status`, and `remove` gives its bytes back without `--force`.
#[test]
fn a_tree_instrumented_before_the_gpu_total_was_printed_is_complete_and_comes_out() {
    let tree = Tree::new();
    let before = tree.snapshot();
    tree.run(&["add", "tiny-moe", "--ranks", "0,3"]).success();
    let now = "            f\"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f} \"\n            f\"gpu_total={_total / G:.2f} ({_total} bytes)\",\n";
    let then = "            f\"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f}\",\n";
    tree.edit("pithtrain/modules/distributed.py", now, then);
    let out = tree.run(&["status", "--json"]).code(0);
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(json["state"], "complete");
    tree.run(&["remove"]).success();
    assert_eq!(changed(&before, &tree.snapshot()), Vec::<String>::new());
    // Any other edit of those lines is still an edit.
    tree.run(&["add", "tiny-moe", "--ranks", "0,3"]).success();
    tree.edit(
        "pithtrain/modules/distributed.py",
        now,
        "            f\"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.3f}\",\n",
    );
    tree.run(&["remove"]).code(2);
}

#[test]
fn status_finds_every_marker_block_of_every_group_after_add() {
    for model in ["tiny-moe", "layered-moe", "fused-moe", "biased-moe"] {
        let tree = Tree::new();
        tree.run(&["add", model]).success();
        let out = tree.run(&["status", "--json"]).code(0);
        let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        let groups: Vec<&serde_json::Value> = json["files"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| f["groups"].as_array().unwrap())
            .collect();
        assert_eq!(groups.len(), 10, "{model}: {json}");
        for group in groups {
            assert_eq!(group["state"], "complete", "{model}: {group}");
            assert!(group["expected"].as_u64().unwrap() > 0, "{model}: {group}");
            assert_eq!(group["found"], group["expected"], "{model}: {group}");
        }
    }
}

#[test]
fn remove_works_on_a_fresh_copy_with_nothing_but_the_tree() {
    let tree = Tree::new();
    tree.run(&["add", "fused-moe", "--ranks", "1"]).success();
    let copy = Tree::from(tree.path());
    copy.run(&["remove"]).success();
    assert_eq!(
        changed(&Tree::new().snapshot(), &copy.snapshot()),
        Vec::<String>::new()
    );
}

/// A user edit that lies outside inserted code, applied the same way to an instrumented tree
/// and to the clean tree it is compared with.
#[derive(Debug, Clone)]
enum UserEdit {
    /// A comment line right before the line that starts with this text.
    CommentBefore(&'static str, &'static str),
    /// A new function appended to the file.
    AppendFunction(&'static str),
    /// A changed line (present in both trees).
    Replace(&'static str, &'static str, &'static str),
}

const ANCHOR_LINES: &[(&str, &str)] = &[
    ("pithtrain/dualpipe/dualpipev.py", "def layer_partition("),
    ("pithtrain/dualpipe/dualpipev.py", "class WeightGradStore:"),
    ("pithtrain/dualpipe/execution.py", "def exchange("),
    ("pithtrain/modules/training.py", "def init_weights("),
    ("pithtrain/modules/distributed.py", "def setup_device_mesh("),
    ("pithtrain/tasks/pretrain_lm.py", "def criterion("),
    ("pithtrain/models/tiny_moe.py", "class TinyMLP("),
];
const REPLACEMENTS: &[(&str, &str, &str)] = &[
    (
        "pithtrain/modules/training.py",
        "nn.init.normal_(param, std=0.02 / num_layers)",
        "nn.init.normal_(param, std=0.01 / num_layers)",
    ),
    (
        "pithtrain/dualpipe/dualpipev.py",
        "        self.chunks_ready += 1\n",
        "        self.chunks_ready += 2\n",
    ),
    (
        "pithtrain/tasks/pretrain_lm.py",
        "\"\"\"Pretrain a language model.\"\"\"",
        "\"\"\"Pretrain a language model (edited).\"\"\"",
    ),
];

fn user_edit() -> impl Strategy<Value = UserEdit> {
    prop_oneof![
        (0..ANCHOR_LINES.len(), 0..3usize).prop_map(|(i, n)| {
            const NOTES: [&str; 3] = [
                "# note\n",
                "# TODO: tune this\n",
                "# a longer note, with punctuation: ok?\n",
            ];
            UserEdit::CommentBefore(
                ANCHOR_LINES[i].0,
                Box::leak(format!("{}{}", NOTES[n], ANCHOR_LINES[i].1).into_boxed_str()),
            )
        }),
        (0..SIX.len()).prop_map(|i| UserEdit::AppendFunction(SIX[i])),
        (0..REPLACEMENTS.len()).prop_map(|i| UserEdit::Replace(
            REPLACEMENTS[i].0,
            REPLACEMENTS[i].1,
            REPLACEMENTS[i].2
        )),
    ]
}

fn apply(tree: &Tree, edit: &UserEdit) {
    match edit {
        UserEdit::CommentBefore(rel, with_comment) => {
            let line = with_comment.split_once('\n').unwrap().1;
            let text = tree.read(rel);
            let at = text.find(&format!("\n{line}")).expect("anchor line") + 1;
            tree.write(
                rel,
                &format!(
                    "{}{}{}",
                    &text[..at],
                    with_comment.split_once('\n').unwrap().0.to_owned() + "\n",
                    &text[at..]
                ),
            );
        }
        UserEdit::AppendFunction(rel) => {
            let text = tree.read(rel);
            tree.write(
                rel,
                &format!("{text}\n\ndef added_by_user(x):\n    return x + 1\n"),
            );
        }
        UserEdit::Replace(rel, from, to) => {
            let text = tree.read(rel);
            tree.write(rel, &text.replacen(from, to, 1));
        }
    }
}

fn ranks_text(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]

    #[test]
    fn remove_keeps_random_user_edits_and_restores_everything_else(
        ranks in proptest::collection::btree_set(0u32..64, 1..4),
        layers in proptest::collection::btree_set(0u32..4, 1..3),
        edits in proptest::collection::vec(user_edit(), 0..4),
    ) {
        let ranks: Vec<u32> = ranks.into_iter().collect();
        let layers: Vec<u32> = layers.into_iter().collect();
        let tree = Tree::new();
        let expected = Tree::new();
        tree.run(&["add", "tiny-moe", "--ranks", &ranks_text(&ranks), "--detail-layers", &ranks_text(&layers)]).success();
        for edit in &edits {
            apply(&tree, edit);
            apply(&expected, edit);
        }
        tree.run(&["remove"]).success();
        prop_assert_eq!(
            changed(&expected.snapshot(), &tree.snapshot()),
            Vec::<String>::new()
        );
    }

    #[test]
    fn add_is_idempotent_and_add_update_remove_is_the_original(
        first in proptest::collection::btree_set(0u32..16, 1..3),
        second in proptest::collection::btree_set(0u32..16, 1..3),
        layers in proptest::collection::btree_set(0u32..4, 1..3),
    ) {
        let (first, second, layers): (Vec<u32>, Vec<u32>, Vec<u32>) =
            (first.into_iter().collect(), second.into_iter().collect(), layers.into_iter().collect());
        let tree = Tree::new();
        let original = tree.snapshot();
        tree.run(&["add", "tiny-moe", "--ranks", &ranks_text(&first)]).success();
        let instrumented = tree.snapshot();
        tree.run(&["add", "tiny-moe", "--ranks", &ranks_text(&first), "--on-existing", "skip"]).success();
        prop_assert_eq!(&tree.snapshot(), &instrumented);
        tree.run(&["add", "tiny-moe", "--ranks", &ranks_text(&first), "--on-existing", "update"]).success();
        prop_assert_eq!(&tree.snapshot(), &instrumented);
        tree.run(&["add", "tiny-moe", "--ranks", &ranks_text(&second), "--detail-layers", &ranks_text(&layers), "--on-existing", "update"]).success();
        tree.run(&["remove"]).success();
        prop_assert_eq!(changed(&original, &tree.snapshot()), Vec::<String>::new());
    }
}

/// After the user re-wraps code memprints split (here `return padded_index_gather(…)`, which
/// `add` made `outs = padded_index_gather(…)` … `return outs`, as `ruff format --line-length 60`
/// does), `remove --force` gives the statement back in the user's layout, not in the one it had
/// before `add`: only what was inserted goes.
#[test]
fn remove_keeps_the_users_layout_of_a_split_return() {
    const MODEL: &str = "pithtrain/models/tiny_moe.py";
    let (one_line, wrapped) = (
        "padded_index_gather(outs, reverse_shuffle_idxs)\n",
        "padded_index_gather(\n            outs, reverse_shuffle_idxs\n        )\n",
    );
    let tree = Tree::new();
    let expected = Tree::new();
    tree.run(&["add", "tiny-moe"]).success();
    tree.edit(
        MODEL,
        &format!("outs = {one_line}"),
        &format!("outs = {wrapped}"),
    );
    expected.edit(
        MODEL,
        &format!("return {one_line}"),
        &format!("return {wrapped}"),
    );
    tree.run(&["remove", "--force"]).success();
    assert_eq!(tree.read(MODEL), expected.read(MODEL));
    assert_same_files(&expected, &tree);
}
