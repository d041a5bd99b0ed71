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
    let out = tree.run(&["add", "layered-moe"]).success();
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
        ])
        .success();
    assert!(stdout_of(&out).contains("detail layers (5, 6)"));
}

#[test]
fn plan_shows_the_v_shape_and_which_detail_layers_print() {
    let tree = Tree::new();
    let out = tree
        .run(&[
            "plan",
            "tiny-moe",
            "--pp",
            "2",
            "--ranks",
            "0,1",
            "--detail-layers",
            "0,1",
            "--json",
        ])
        .success();
    let json: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let chunks: Vec<(u64, u64, Vec<u64>)> = json["chunks"]
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
            )
        })
        .collect();
    assert_eq!(
        chunks,
        vec![
            (0, 0, vec![0]),
            (0, 1, vec![3]),
            (1, 0, vec![1]),
            (1, 1, vec![2])
        ]
    );
    assert_eq!(
        json["detail_layers"][1]["printing_ranks"],
        serde_json::json!([])
    );
    let out = tree
        .run(&[
            "plan",
            "tiny-moe",
            "--script",
            "examples/pretrain_lm/tiny/script.py",
        ])
        .success();
    assert!(stdout_of(&out).contains("not profiled"));
}

#[test]
fn add_warns_when_a_detail_layer_prints_nowhere() {
    let tree = Tree::new();
    let out = tree
        .run(&[
            "add",
            "tiny-moe",
            "--ranks",
            "0,1",
            "--detail-layers",
            "0,1",
            "--pp",
            "2",
        ])
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("warning: detail layer 1 will print nowhere"),
        "{stderr}"
    );
    assert!(!stderr.contains("detail layer 0 will"), "{stderr}");
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
