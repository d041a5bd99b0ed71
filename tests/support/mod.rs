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

/// Writes `path`: two print lines of 100 MB each (ranks 0 and 1, a `setup_model` print whose
/// `alloc=` number runs on for 100 MiB of digits), written without holding them in memory, then
/// one normal print of rank 2 (label `b`).
pub fn write_two_hundred_megabyte_print_lines(path: &Path) {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let block = vec![b'7'; 1 << 20];
    for rank in 0..2 {
        write!(out, "[rank={rank}] setup_model | a: alloc=1.").unwrap();
        for _ in 0..100 {
            out.write_all(&block).unwrap();
        }
        out.write_all(b" cached=0.00 non-pt=1.00\n").unwrap();
    }
    out.write_all(b"[rank=2] setup_model | b: alloc=1.00 cached=0.00 non-pt=1.00\n")
        .unwrap();
    out.flush().unwrap();
}
