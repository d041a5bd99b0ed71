//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod chromium;
pub mod loggen;
pub mod pithtrain;
pub mod schema;

use std::path::{Path, PathBuf};

/// The crate root: tests run the binary from here so paths in reports are relative and stable.
pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/data/report/<name>`, relative to the crate root.
pub fn fixture(name: &str) -> PathBuf {
    Path::new("tests/data/report").join(name)
}

/// The fixture logs and the generator settings they were made with.
pub fn fixtures() -> Vec<(&'static str, loggen::LogConfig)> {
    use loggen::{LogConfig, Prefix};
    vec![
        (
            "pp2_plain.log",
            LogConfig {
                world: 4,
                pp: 2,
                num_chunks: 6,
                ranks: vec![0, 1, 2, 3],
                ..LogConfig::default()
            },
        ),
        (
            "pp4_srun_ansi_crlf.log",
            LogConfig {
                world: 8,
                pp: 4,
                num_chunks: 10,
                ranks: vec![0, 2, 4, 6],
                prefix: Prefix::Srun,
                ansi: true,
                crlf: true,
                timestamps: true,
                glue_per_mille: 60,
                garbage: true,
                cut_last_line: true,
                seed: 7,
                ..LogConfig::default()
            },
        ),
        (
            "oom_torchrun.log",
            LogConfig {
                world: 4,
                pp: 2,
                num_chunks: 6,
                prefix: Prefix::TorchrunRank,
                oom_rank: Some(1),
                seed: 3,
                ..LogConfig::default()
            },
        ),
        (
            "pp1_default_prefix.log",
            LogConfig {
                world: 2,
                pp: 1,
                num_chunks: 4,
                ranks: vec![0, 1],
                prefix: Prefix::TorchrunDefault,
                checkpoint: false,
                seed: 5,
                ..LogConfig::default()
            },
        ),
    ]
}
