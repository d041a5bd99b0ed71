//! What the estimator leaves out for a given model config, found by setting the config beside
//! what the estimator read from it.
//!
//! Each caveat is raised only when the estimate itself shows the gap: a config key the
//! estimator's `ModelConfig` has no field for (when the driver could list its fields), a count it
//! read as 0, layers it sized as MoE that the config makes dense, rotary caches longer than the
//! model's context. So a later estimator that models one of these stops getting the caveat.

use serde_json::Value;

use super::figures::{Estimate, Part};

const MIB: f64 = (1u64 << 20) as f64;

fn count(config: &Value, key: &str) -> Option<u64> {
    config.get(key).and_then(Value::as_u64).filter(|n| *n > 0)
}

/// Sentences on what this estimate does not model for `config` (the model's config.json).
pub fn caveats(config: &Value, estimate: &Estimate) -> Vec<String> {
    let fields = &estimate.model.fields;
    let unknown = |key: &str| !fields.is_empty() && !fields.contains_key(key);
    let mut out = Vec::new();

    if let Some(experts) = count(config, "num_local_experts")
        && estimate.model.experts == 0
    {
        let dense = config
            .get("intermediate_size")
            .and_then(Value::as_u64)
            .map_or(String::new(), |n| format!(" of intermediate_size {n}"));
        out.push(format!(
            "the estimator read 0 experts: this config names its {experts} experts \
             `num_local_experts`, which it does not read, so every layer was sized as a dense \
             MLP{dense}"
        ));
    }
    if let Some(k) = count(config, "first_k_dense_replace") {
        let moe_below_k = estimate
            .layers
            .iter()
            .any(|p| matches!(p.part, Part::Layer { layer, .. } if u64::from(layer) < k) && p.moe);
        if moe_below_k {
            let (layers, them) = if k == 1 {
                ("layer 0 is".to_owned(), "it as an MoE layer")
            } else {
                (format!("layers 0-{} are", k - 1), "them as MoE layers")
            };
            out.push(format!(
                "{layers} dense in PithTrain (first_k_dense_replace {k}) but the estimator sized \
                 {them}"
            ));
        }
    }
    if let Some(rank) = count(config, "kv_lora_rank")
        && unknown("kv_lora_rank")
    {
        out.push(format!(
            "multi-head latent attention (kv_lora_rank {rank}) is not modelled: the estimator \
             sizes attention from num_key_value_heads and head_dim {}",
            fields
                .get("head_dim")
                .map_or_else(|| "?".to_owned(), Value::to_string)
        ));
    }
    if let Some(shared) = count(config, "n_shared_experts")
        && unknown("n_shared_experts")
    {
        out.push(format!(
            "the {shared} shared expert(s) per MoE layer (n_shared_experts) are not counted"
        ));
    }
    // The estimator's head_dim, else the config's own (or hidden_size / heads, its default).
    let head_dim = fields
        .get("head_dim")
        .and_then(Value::as_u64)
        .or_else(|| count(config, "head_dim"))
        .or_else(|| Some(count(config, "hidden_size")? / count(config, "num_attention_heads")?));
    if let Some(positions) = count(config, "max_position_embeddings")
        && let Some(head_dim) = head_dim
        && let Some(params) = estimate.params.first()
    {
        // cos and sin caches, bf16: rows × head_dim × 2 tensors × 2 bytes.
        let rows = params.rotary_bytes as u64 / (head_dim * 4).max(1);
        if rows > positions {
            out.push(format!(
                "the rotary cos/sin caches are counted at {rows} positions ({:.1} MiB per \
                 module) while the config's max_position_embeddings is {positions}",
                params.rotary_bytes as f64 / MIB
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::from_driver_json;

    fn config(name: &str) -> Value {
        let path = format!("{}/../../e2e/configs/{name}", env!("CARGO_MANIFEST_DIR"));
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn deepseek_v2_tiny_gets_its_dense_layer_mla_shared_experts_and_rotary_caveats() {
        let json = include_str!("../../../tests/data/estimate/dsv2-tiny-pp1.json");
        let estimate = &from_driver_json(json).unwrap()[0];
        assert_eq!(
            caveats(&config("deepseek-v2-tiny.json"), estimate),
            [
                "layer 0 is dense in PithTrain (first_k_dense_replace 1) but the estimator sized \
                 it as an MoE layer",
                "multi-head latent attention (kv_lora_rank 128) is not modelled: the estimator \
                 sizes attention from num_key_value_heads and head_dim 64",
                "the 1 shared expert(s) per MoE layer (n_shared_experts) are not counted",
                "the rotary cos/sin caches are counted at 40960 positions (10.0 MiB per module) \
                 while the config's max_position_embeddings is 512",
            ]
        );
    }

    #[test]
    fn qwen3_tiny_gets_only_the_rotary_caveat() {
        let json = include_str!("../../../tests/data/estimate/qwen3-tiny-pp1.json");
        let estimate = &from_driver_json(json).unwrap()[0];
        let notes = caveats(&config("qwen3-moe-tiny.json"), estimate);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("the rotary cos/sin caches are counted at 40960"));
    }

    #[test]
    fn zero_experts_read_from_a_num_local_experts_config_is_called_out() {
        let json = include_str!("../../../tests/data/estimate/gpt-oss-20b-pp2.json");
        let estimate = &from_driver_json(json).unwrap()[0];
        assert_eq!(estimate.model.experts, 0);
        // The two keys of gpt-oss-20b's config.json that matter here.
        let gpt_oss = serde_json::json!({"num_local_experts": 32, "intermediate_size": 2880});
        assert_eq!(
            caveats(&gpt_oss, estimate),
            [
                "the estimator read 0 experts: this config names its 32 experts \
              `num_local_experts`, which it does not read, so every layer was sized as a dense \
              MLP of intermediate_size 2880"
            ]
        );
    }
}
