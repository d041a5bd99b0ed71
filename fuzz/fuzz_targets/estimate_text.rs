//! The estimator bridge's reading of the estimator's output (`memprints-estimate`).
//!
//! The first byte picks the reader, the rest is its text (UTF-8, lossy):
//! 0 `text::from_text` (one pp rank's text output, the fallback reader),
//! 1 `figures::from_driver_output` (the driver's stdout, its marker line),
//! 2 `figures::from_driver_json` (the driver's JSON document),
//! 3 `LoggedConfig::find_in` / `parse` (PithTrain's logged config line).
//! What must hold: no panic, a value or an error; where an estimate is accepted, its accessors
//! (peak, static bytes, schedule, autograd figures), the caveats and `compare` with fixed
//! measurements (none, a short pipeline, a long one with saved tensors) never panic; the first
//! config line of a log is the one `find_in` finds.

#![no_main]

use libfuzzer_sys::fuzz_target;
use memprints_estimate::compare::{MeasuredPrint, MeasuredSaved};
use memprints_estimate::figures::{DRIVER_MARKER, from_driver_json, from_driver_output};
use memprints_estimate::schedule::PrintPoint;
use memprints_estimate::text::from_text;
use memprints_estimate::{Estimate, LoggedConfig, Measured, Tolerance, caveats, compare};

const GIB: i64 = 1 << 30;

fn print(label: &str, allocated: i64) -> MeasuredPrint {
    MeasuredPrint {
        point: PrintPoint::parse(label).expect("a print label"),
        allocated,
        cached: allocated / 8,
        non_pytorch: GIB,
    }
}

fn measurements() -> Vec<Measured> {
    let short = Measured {
        pp_rank: 0,
        pipeline: vec![
            print("Before pipeline", GIB / 50),
            print("After Step1 (0 F0)", GIB / 50),
            print("Step2 i=0 forward_chunk(0)", GIB / 12),
            print("After Step8 (end of pipeline)", GIB / 40),
        ],
        params_after_setup: Some(GIB / 50),
        optimizer_state: None,
        saved_tensors: vec![],
        // Without a snapshot: the workspace correction is not applied.
        cublas_workspace: None,
        workspace_from: None,
    };
    let long = Measured {
        pp_rank: 1,
        pipeline: vec![
            print("Before pipeline", 3 * GIB),
            print("Step1 F0 i=0", 4 * GIB),
            print("After Step1 (2 F0)", 5 * GIB),
            print("Step2 i=0 forward_chunk(0)", 6 * GIB),
            print("Step2 i=0 forward_chunk(1)", 7 * GIB),
            print("After Step2 (1 F0F1)", 7 * GIB),
            print("Step3 i=0 before B1", 8 * GIB),
            print("Step3 i=0 after B1", 7 * GIB),
            print("Step3 i=0 after W1", 6 * GIB),
            print("Step3 i=0 after F1", 8 * GIB),
            print("After Step3 (1 B1W1F1)", 8 * GIB),
            print("Step4 i=0", 9 * GIB),
            print("After Step4 (1 F0B1F1B0)", 5 * GIB),
            print("After Step8 (end of pipeline)", 0),
        ],
        params_after_setup: Some(2 * GIB),
        optimizer_state: Some(i64::MAX / 4),
        saved_tensors: vec![
            MeasuredSaved {
                layer: 0,
                stage: 1,
                activations: GIB / 3,
            },
            MeasuredSaved {
                layer: 1,
                stage: 3,
                activations: 0,
            },
            MeasuredSaved {
                layer: u32::MAX,
                stage: 5,
                activations: -1,
            },
        ],
        // A snapshot's workspace larger than any print: the correction must not overflow.
        cublas_workspace: Some(i64::MAX / 2),
        workspace_from: Some("snapshot.pickle".to_owned()),
    };
    vec![Measured::default(), short, long]
}

fn exercise(estimate: &Estimate) {
    let _ = estimate.peak();
    let _ = estimate.static_bytes();
    let _ = estimate.schedule();
    for layer in [0, 1, 2, u32::MAX] {
        for stage in [1, 3, 5] {
            let _ = estimate.autograd_of(layer, stage);
        }
    }
    for config in [
        serde_json::json!({}),
        serde_json::json!({"model_type": "qwen3_moe", "num_hidden_layers": 2}),
        serde_json::json!({"model_type": "deepseek_v2", "q_lora_rank": null, "first_k_dense_replace": 1}),
        serde_json::json!({"model_type": "gpt_oss", "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"]}),
    ] {
        let _ = caveats::caveats(&config, estimate);
    }
    for measured in measurements() {
        for tolerance in [
            Tolerance::default(),
            Tolerance {
                relative: 0.0,
                absolute_bytes: 0,
            },
        ] {
            let comparison = compare(estimate, &measured, tolerance);
            let _ = format!("{comparison:?}");
            let _ = serde_json::to_string(&comparison);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    match mode % 4 {
        0 => {
            if let Ok(estimate) = from_text(&text) {
                exercise(&estimate);
            }
        }
        1 => {
            if let Ok(estimates) = from_driver_output(&text) {
                estimates.iter().for_each(exercise);
            }
        }
        2 => {
            if let Ok(estimates) = from_driver_json(&text) {
                estimates.iter().for_each(exercise);
            }
            // The same document as the driver prints it, after other output.
            let stdout = format!("warming up\n{DRIVER_MARKER}{text}");
            let _ = from_driver_output(&stdout);
        }
        _ => {
            let found = LoggedConfig::find_in(&text);
            let first = text.lines().find_map(LoggedConfig::parse);
            assert_eq!(found.is_some(), first.is_some());
            let _ = format!("{found:?}");
        }
    }
});
