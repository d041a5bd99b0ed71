//! Every model shape: the experts variants, dense-first layers, auto detail layers, placement
//! warnings, and the refusal of a PithTrain older than the 5-stage API.

mod codemod;

use std::path::Path;

use codemod::Tree;

fn stdout_of(out: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&out.get_output().stdout).to_string()
}

#[test]
fn experts_internals_follow_the_data_flow_of_each_shape() {
    let cases: &[(&str, &[&str])] = &[
        (
            "tiny-moe",
            &[
                "experts: after gate_proj   g=",
                "experts: after up_proj     u=",
                "experts: after silu_mul    gu=",
                "experts: after down_proj   out=",
            ],
        ),
        (
            "fused-moe",
            &[
                "experts: after gate_up_proj gate_up=",
                "experts: after slice       gate=",
                "experts: after slice       up=",
                "experts: after silu_mul    gu=",
            ],
        ),
        (
            "biased-moe",
            &[
                "experts: after gate_up_proj gate_up=",
                "experts: after indexed_bias_add gate_up=",
                "experts: after clamped_swiglu activated=",
                "experts: after down_proj   out=",
                "experts: after indexed_bias_add out=",
            ],
        ),
    ];
    for (model, labels) in cases {
        let tree = Tree::new();
        tree.run(&["add", model]).success();
        let text = tree.read(&format!("pithtrain/models/{}.py", model.replace('-', "_")));
        assert!(
            text.contains("experts: input             x={tuple(x.shape)}"),
            "{model}"
        );
        for label in *labels {
            assert!(text.contains(label), "{model} lacks {label}");
        }
    }
}

#[test]
fn a_body_that_returns_a_name_keeps_its_return() {
    let tree = Tree::new();
    tree.run(&["add", "biased-moe"]).success();
    let text = tree.read("pithtrain/models/biased_moe.py");
    assert!(!text.contains("gu = "), "biased experts must not be split");
    assert_eq!(text.matches("        return out\n").count(), 1);
}

#[test]
fn plain_mlp_classes_are_never_touched() {
    let tree = Tree::new();
    let before = tree.read("pithtrain/models/tiny_moe.py");
    tree.run(&["add", "tiny-moe"]).success();
    let after = tree.read("pithtrain/models/tiny_moe.py");
    let mlp =
        |t: &str| t[t.find("class TinyMLP").unwrap()..t.find("class TinyMoE").unwrap()].to_string();
    assert_eq!(mlp(&before), mlp(&after));
}

#[test]
fn dense_layers_return_before_every_probe_that_needs_experts() {
    let tree = Tree::new();
    tree.run(&["add", "layered-moe"]).success();
    let text = tree.read("pithtrain/models/layered_moe.py");
    let stage3 =
        &text[text.find("def forward_stage3").unwrap()..text.find("def forward_stage5").unwrap()];
    let early = stage3.find("return self.mlp(gathered_tokens)").unwrap();
    assert!(stage3.find("before expand gather").unwrap() > early);
    let stage1 =
        &text[text.find("def forward_stage1(").unwrap()..text.find("def forward_stage3").unwrap()];
    assert!(
        stage1.find("after forward_stage1_compute").unwrap()
            < stage1.find("return hidden_states, residual, None").unwrap()
    );
    assert!(
        stage1.find("after dispatch_prep").unwrap()
            > stage1.find("return hidden_states, residual, None").unwrap()
    );
}

#[test]
fn the_router_outside_the_compiled_block_gets_its_own_probe() {
    let tree = Tree::new();
    tree.run(&["add", "biased-moe"]).success();
    let text = tree.read("pithtrain/models/biased_moe.py");
    assert!(text.contains("after forward_stage1_compute (LN+Attn+LN)\")"));
    assert!(text.contains("stage1: after router"));
}

#[test]
fn compiled_functions_never_get_prints() {
    for model in ["tiny-moe", "layered-moe", "fused-moe", "biased-moe"] {
        let tree = Tree::new();
        tree.run(&["add", model]).success();
        let text = tree.read(&format!("pithtrain/models/{}.py", model.replace('-', "_")));
        for block in text.split("@torch.compile(fullgraph=True)\n").skip(1) {
            let body_end = block[4..].find("\n    def ").map_or(block.len(), |i| i + 4);
            assert!(
                !block[..body_end].contains("_lmem"),
                "{model}: a compiled function got a print"
            );
        }
    }
}

#[test]
fn auto_detail_layers_read_the_moe_rule_and_the_config() {
    let tree = Tree::new();
    let out = tree.run(&["add", "layered-moe", "--verbose"]).success();
    let stdout = stdout_of(&out);
    assert!(stdout.contains("detail layers (2, 3)"), "{stdout}");
    assert!(
        stdout.contains("has_experts = layer_id >= config.first_k_dense_replace"),
        "{stdout}"
    );
    assert!(
        stdout.contains("examples/pretrain_lm/layered/config.json"),
        "{stdout}"
    );
}

#[test]
fn an_explicit_config_changes_the_auto_layers() {
    let tree = Tree::new();
    let config = tree.path().join("custom.json");
    std::fs::write(
        &config,
        r#"{"model_type": "layered_moe", "num_hidden_layers": 8, "first_k_dense_replace": 5}"#,
    )
    .unwrap();
    let out = tree
        .run(&[
            "add",
            "layered-moe",
            "--config",
            config.to_str().unwrap(),
            "--dry-run",
            "--verbose",
        ])
        .success();
    assert!(stdout_of(&out).contains("detail layers (5, 6)"));
}

#[test]
fn plan_shows_the_v_shape_and_which_detail_layers_print() {
    let tree = Tree::new();
    let plan = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["plan", "tiny-moe", "--detail-layers", "0,1", "--json"];
        args.extend_from_slice(extra);
        let out = tree.run(&args).success();
        serde_json::from_slice(&out.get_output().stdout).unwrap()
    };
    let json = plan(&["--pp", "2", "--ranks", "0,1"]);
    let chunks: Vec<(u64, u64, Vec<u64>, &str)> = json["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["pp_rank"].as_u64().unwrap(),
                c["phase"].as_u64().unwrap(),
                c["layers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|l| l.as_u64().unwrap())
                    .collect(),
                c["profiled_in"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        chunks,
        vec![
            (0, 0, vec![0], "Step1 i=1"),
            (0, 1, vec![3], "Step2 i=0 forward_chunk(1)"),
            (1, 0, vec![1], "Step2 i=0 forward_chunk(0)"),
            (1, 1, vec![2], "Step2 i=0 forward_chunk(1)")
        ]
    );
    // Layer 1 sits in phase 0 of the last pp rank, which Step 2's i == 0 profiles.
    assert_eq!(
        json["detail_layers"][1]["printing_ranks"],
        serde_json::json!([1])
    );
    assert_eq!(
        json["detail_layers"][1]["rank_to_add"],
        serde_json::Value::Null
    );
    assert_eq!(json["suggested_ranks"], serde_json::Value::Null);
    assert_eq!(json["layout"]["source"], "arguments");

    // With the default ranks {0}, the facts name the rank to add.
    let json = plan(&["--pp", "2"]);
    assert_eq!(
        json["detail_layers"][1]["printing_ranks"],
        serde_json::json!([])
    );
    assert_eq!(json["detail_layers"][1]["rank_to_add"], 1);
    assert_eq!(json["detail_layers"][1]["pp_rank"], 1);
    assert_eq!(
        json["detail_layers"][1]["host_ranks"],
        serde_json::json!([1, 1])
    );
    assert_eq!(json["suggested_ranks"], serde_json::json!([0, 1]));
    assert_eq!(
        json["detail_prints"],
        "detail layers print: layer 0 on rank 0; layer 1 on none of ranks 0: add rank 1 \
         (--ranks 0,1) (layout pp=2 ep=1 cp=1 world=2 from --pp/--ep/--cp)"
    );
    // The fields plan --json always had are still there, unrenamed.
    for key in [
        "model",
        "num_layers",
        "moe_layers",
        "rule",
        "config",
        "pp",
        "ep",
        "cp",
        "world",
    ] {
        assert!(json.get(key).is_some(), "{key}: {json}");
    }

    // No sizes given: the model's example launch script.
    let json = plan(&[]);
    assert_eq!(json["layout"]["source"], "example_script");
    assert_eq!(
        json["layout"]["script"],
        "examples/pretrain_lm/tiny/script.py"
    );
    assert_eq!(json["pp"], 2);

    let out = tree
        .run(&[
            "plan",
            "tiny-moe",
            "--script",
            "examples/pretrain_lm/tiny/script.py",
        ])
        .success();
    let stdout = stdout_of(&out);
    assert!(
        stdout.contains("profiled in Step2 i=0 forward_chunk(0)"),
        "{stdout}"
    );
    assert!(!stdout.contains("not profiled"), "{stdout}");
    assert!(
        stdout.contains(
            "(layout pp=2 ep=1 cp=1 world=2 from --script examples/pretrain_lm/tiny/script.py)"
        ),
        "{stdout}"
    );
}

#[test]
fn add_says_in_one_line_which_ranks_print_each_detail_layer() {
    let stderr_of = |out: &assert_cmd::assert::Assert| {
        String::from_utf8_lossy(&out.get_output().stderr).to_string()
    };
    let tree = Tree::new();
    // Default arguments: the layout is the example script's (pp=2), where layer 1 runs on
    // rank 1 only; the line is a warning and names the rank to add.
    let out = tree.run(&["add", "tiny-moe", "--dry-run"]).success();
    assert_eq!(
        stderr_of(&out),
        "warning: detail layers print: layer 0 on rank 0; layer 1 on none of ranks 0: \
         add rank 1 (--ranks 0,1) (layout pp=2 ep=1 cp=1 world=2 from examples/pretrain_lm/tiny/script.py)\n"
    );
    assert!(!stdout_of(&out).contains("detail layers print"));

    // Every layer prints: the line goes to stdout with the summary, no warning.
    let out = tree
        .run(&["add", "tiny-moe", "--ranks", "0,1", "--dry-run"])
        .success();
    assert_eq!(stderr_of(&out), "");
    assert!(
        stdout_of(&out).contains(
            "detail layers print: layer 0 on rank 0; layer 1 on rank 1 (layout pp=2 ep=1 cp=1 world=2 from examples/pretrain_lm/tiny/script.py)\n"
        ),
        "{}",
        stdout_of(&out)
    );
    // pp=1: both halves of the layers are on rank 0, and both are profiled.
    let out = tree
        .run(&["add", "tiny-moe", "--pp", "1", "--dry-run"])
        .success();
    assert!(
        stdout_of(&out).contains(
            "detail layers print: layer 0 on rank 0; layer 1 on rank 0 (layout pp=1 ep=1 cp=1 world=1 from --pp/--ep/--cp)"
        ),
        "{}",
        stdout_of(&out)
    );

    // No example script for the model: said, in the same line.
    let out = tree.run(&["add", "layered-moe", "--dry-run"]).success();
    assert!(
        stdout_of(&out).contains(
            "detail layers print: layout unknown: no --pp/--script given and no \
             examples/pretrain_lm/*/script.py for layered-moe; pass --pp/--ep/--cp or --script"
        ),
        "{}",
        stdout_of(&out)
    );

    // --json: the line is a note on stderr, the facts are in the JSON.
    let out = tree
        .run(&["add", "tiny-moe", "--ranks", "0,1", "--dry-run", "--json"])
        .success();
    assert!(
        stderr_of(&out).starts_with("note: detail layers print: layer 0 on rank 0;"),
        "{}",
        stderr_of(&out)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let prints = &json["detail_prints"];
    assert_eq!(prints["layout"]["source"], "example_script");
    assert_eq!(
        prints["layers"][1]["printing_ranks"],
        serde_json::json!([1])
    );
    assert_eq!(
        prints["layers"][1]["profiled_in"],
        "Step2 i=0 forward_chunk(0)"
    );
}

#[test]
fn a_pithtrain_older_than_the_5_stage_api_is_refused_and_untouched() {
    let tree = Tree::from(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/legacy"));
    let before = tree.snapshot();
    let out = tree
        .run(&["add", "qwen3-moe", "--detail-layers", "0,1"])
        .failure();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("old stage API") || stderr.contains("predates the 5-stage layer API"),
        "{stderr}"
    );
    assert!(stderr.lines().count() <= 4, "{stderr}");
    assert_eq!(tree.snapshot(), before);
}
