//! Writes a generated multi-rank log of an instrumented PithTrain run to stdout (used by
//! `bench/report.sh`). Flags: `--world N --pp N --chunks N --profiled-steps N --train-steps N
//! --noise N --size-mib N --seed N --prefix none|srun|rank|default`.

#[path = "../tests/support/loggen.rs"]
mod loggen;

use std::io::{BufWriter, Write};

fn main() {
    let mut cfg = loggen::LogConfig {
        world: 64,
        pp: 8,
        num_chunks: 32,
        ..loggen::LogConfig::default()
    };
    let mut ranks_all = true;
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, value] = pair else {
            eprintln!("gen_report_log: flag {} has no value", pair[0]);
            std::process::exit(2);
        };
        let n = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{flag} wants a number"))
        };
        match flag.as_str() {
            "--world" => cfg.world = n() as u32,
            "--pp" => cfg.pp = n() as u32,
            "--chunks" => cfg.num_chunks = n() as u32,
            "--profiled-steps" => cfg.profiled_steps = n() as u32,
            "--train-steps" => cfg.train_steps = n() as u32,
            "--noise" => cfg.noise = n() as u32,
            "--seed" => cfg.seed = n(),
            "--size-mib" => cfg.max_bytes = Some(n() << 20),
            "--rank" => {
                if ranks_all {
                    cfg.ranks.clear();
                    ranks_all = false;
                }
                cfg.ranks.push(n() as u32);
            }
            "--prefix" => {
                cfg.prefix = match value.as_str() {
                    "srun" => loggen::Prefix::Srun,
                    "rank" => loggen::Prefix::TorchrunRank,
                    "default" => loggen::Prefix::TorchrunDefault,
                    _ => loggen::Prefix::None,
                }
            }
            other => {
                eprintln!("gen_report_log: unknown flag {other}");
                std::process::exit(2);
            }
        }
    }
    if ranks_all {
        cfg.ranks = (0..cfg.world).collect();
    }
    let stdout = std::io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 20, stdout);
    let counts = loggen::write_log(&cfg, &mut out).expect("write log");
    out.flush().expect("flush");
    eprintln!(
        "gen_report_log: {} bytes, {} [rank= tags",
        counts.bytes, counts.tags
    );
}
