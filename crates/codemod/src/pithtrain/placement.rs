//! Where each layer runs, and which detail layers will actually print: PithTrain's own
//! `layer_partition` spreads layers over `2 * pp` stages; pipeline rank `r` runs stage `r` as
//! model chunk phase 0 and stage `2*pp-1-r` as phase 1 (the V shape). The device mesh is
//! (pp, dp, cp, ep), row-major, so pipeline rank `r` holds global ranks
//! `r*dp*cp*ep .. (r+1)*dp*cp*ep`.
//!
//! Per-layer detail prints from one forward of every chunk (group 4 switches the profiling on):
//! phase 0 at Step 1's `i == 1` where Step 1 has a second iteration (`pp_rank < pp - 1`), else
//! (the last pp rank, whose Step 1 is empty) at Step 2's `i == 0`; phase 1 at Step 2's `i == 0`.
//! So every layer prints on the global ranks that host it, when they are printing ranks.

use crate::error::{Error, Result};

/// Parallel sizes of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parallel {
    /// Pipeline-parallel size.
    pub pp: u32,
    /// Expert-parallel size.
    pub ep: u32,
    /// Context-parallel size.
    pub cp: u32,
    /// World size (number of GPUs).
    pub world: u32,
}

impl Parallel {
    /// Checks the sizes (each 1 to [`MAX_SIZE`], the product without overflow) and derives
    /// `dp = world / (pp * cp * ep)`.
    pub fn dp(&self) -> Result<u32> {
        let invalid = |reason: String| Error::InvalidArgument {
            what: "parallel sizes",
            // The world is named only when it is not the default (given, or read from a
            // script): the default of sizes too large is a saturated product, not a size.
            input: if self.world == default_world(self.pp, self.ep, self.cp) {
                format!("pp={} ep={} cp={}", self.pp, self.ep, self.cp)
            } else {
                format!(
                    "pp={} ep={} cp={} world={}",
                    self.pp, self.ep, self.cp, self.world
                )
            },
            reason,
        };
        let sizes = [("pp", self.pp), ("ep", self.ep), ("cp", self.cp)];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| !(1..=MAX_SIZE).contains(v)) {
            return Err(invalid(format!("{name} must be between 1 and {MAX_SIZE}")));
        }
        // Each size is at most 2^20, so the product fits in a u64.
        let divisor = u64::from(self.pp) * u64::from(self.cp) * u64::from(self.ep);
        if divisor > u64::from(MAX_SIZE) {
            return Err(invalid(format!(
                "pp * cp * ep = {divisor} is more than {MAX_SIZE} GPUs"
            )));
        }
        let divisor = divisor as u32;
        if !(1..=MAX_SIZE).contains(&self.world) {
            return Err(invalid(format!("world must be between 1 and {MAX_SIZE}")));
        }
        if !self.world.is_multiple_of(divisor) {
            return Err(invalid(
                "world must be a positive multiple of pp * cp * ep".into(),
            ));
        }
        Ok(self.world / divisor)
    }

    /// Reads `pipeline_parallel_size`, `expert_parallel_size` and `context_parallel_size` from a
    /// PithTrain launch script (`examples/pretrain_lm/<variant>/script.py`); `world` defaults to
    /// `pp * cp * ep` (one data-parallel replica).
    pub fn from_script(text: &str, world: Option<u32>) -> Self {
        let read = |name: &str| {
            regex::Regex::new(&format!(r"{name}\s*=\s*(\d+)"))
                .expect("valid regex")
                .captures(text)
                .and_then(|c| c[1].parse().ok())
                .unwrap_or(1)
        };
        let (pp, ep, cp) = (
            read("pipeline_parallel_size"),
            read("expert_parallel_size"),
            read("context_parallel_size"),
        );
        Parallel {
            pp,
            ep,
            cp,
            world: world.unwrap_or(default_world(pp, ep, cp)),
        }
    }
}

/// The largest parallel size memprints accepts (a million GPUs); larger values are typos, and
/// would make the placement tables unboundedly large.
pub const MAX_SIZE: u32 = 1 << 20;

/// `pp * ep * cp` (one data-parallel replica), saturated instead of wrapped so that
/// [`Parallel::dp`] refuses an overflowing product rather than seeing a small world.
pub fn default_world(pp: u32, ep: u32, cp: u32) -> u32 {
    pp.saturating_mul(ep).saturating_mul(cp)
}

/// PithTrain's `layer_partition(num_layers, stage_count, stage_index)`: a contiguous block per
/// stage, as even as possible, with the two edge stages kept lighter.
pub fn layer_partition(
    num_layers: u32,
    stage_count: u32,
    stage_index: u32,
) -> std::ops::Range<u32> {
    let (base, remainder) = (num_layers / stage_count, num_layers % stage_count);
    let mut layers = vec![base; stage_count as usize];
    for _ in 0..remainder {
        let min = *layers.iter().min().expect("stage_count > 0");
        let inner = (1..stage_count.saturating_sub(1) as usize).find(|&i| layers[i] == min);
        let best =
            inner.unwrap_or_else(|| layers.iter().position(|&l| l == min).expect("min exists"));
        layers[best] += 1;
    }
    let begin: u32 = layers[..stage_index as usize].iter().sum();
    begin..begin + layers[stage_index as usize]
}

/// One model chunk on one pipeline rank.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Chunk {
    /// The pipeline rank that holds it.
    pub pp_rank: u32,
    /// 0 for the chunk of the V's down stroke, 1 for its up stroke.
    pub phase: u32,
    /// Its pipeline stage (0-based, `2 * pp` stages).
    pub stage: u32,
    /// The decoder layers it holds.
    pub layers: Vec<u32>,
    /// The global ranks that run it.
    pub global_ranks: Vec<u32>,
    /// Whether the pipeline switches per-layer profiling on for this chunk (every chunk is).
    pub profiled: bool,
    /// The forward the profiling covers, as the pipeline's prints name it: `Step1 i=1`,
    /// `Step2 i=0 forward_chunk(0)` or `Step2 i=0 forward_chunk(1)`.
    pub profiled_in: &'static str,
}

/// The forward of `phase` on pipeline rank `pp_rank` that group 4 profiles: Step 1's second
/// forward of phase 0 where Step 1 has one (`step_1 = 2 * (pp - 1 - pp_rank) >= 2`), else Step
/// 2's first.
pub fn profiled_forward(pp_rank: u32, phase: u32, pp: u32) -> &'static str {
    match phase {
        0 if pp_rank + 1 < pp => "Step1 i=1",
        0 => "Step2 i=0 forward_chunk(0)",
        _ => "Step2 i=0 forward_chunk(1)",
    }
}

/// Every chunk of every pipeline rank.
pub fn chunks(num_layers: u32, parallel: &Parallel) -> Result<Vec<Chunk>> {
    let dp = parallel.dp()?;
    // 2 * pp <= 2 * MAX_SIZE fits; a stage without a layer is no placement to show.
    if 2 * parallel.pp > num_layers {
        return Err(Error::InvalidArgument {
            what: "--pp",
            input: parallel.pp.to_string(),
            reason: format!(
                "pp={} makes {} pipeline stages (two per rank), more than the model's {num_layers} layers",
                parallel.pp,
                2 * parallel.pp
            ),
        });
    }
    let per_pp = dp * parallel.cp * parallel.ep;
    let stage_count = 2 * parallel.pp;
    let mut out = Vec::new();
    for r in 0..parallel.pp {
        let global_ranks: Vec<u32> = (r * per_pp..(r + 1) * per_pp).collect();
        for (phase, stage) in [(0, r), (1, stage_count - 1 - r)] {
            out.push(Chunk {
                pp_rank: r,
                phase,
                stage,
                layers: layer_partition(num_layers, stage_count, stage).collect(),
                global_ranks: global_ranks.clone(),
                profiled: true,
                profiled_in: profiled_forward(r, phase, parallel.pp),
            });
        }
    }
    Ok(out)
}

/// The chunk that holds `layer` (a layer is in exactly one), `None` past the last layer.
pub fn host(chunks: &[Chunk], layer: u32) -> Option<&Chunk> {
    chunks.iter().find(|c| c.layers.contains(&layer))
}

/// For each detail layer, the global ranks (among `ranks`) where it prints per-layer detail.
pub fn detail_printers(
    chunks: &[Chunk],
    detail_layers: &[u32],
    ranks: &[u32],
) -> Vec<(u32, Vec<u32>)> {
    detail_layers
        .iter()
        .map(|&layer| {
            let printers = chunks
                .iter()
                .filter(|c| c.profiled && c.layers.contains(&layer))
                .flat_map(|c| c.global_ranks.iter().copied().filter(|g| ranks.contains(g)))
                .collect();
            (layer, printers)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_matches_pithtrain_for_uneven_counts() {
        // 27 layers (deepseek-v2-lite) over 4 stages: the remainder fills inner stages first.
        let sizes: Vec<u32> = (0..4)
            .map(|i| layer_partition(27, 4, i).len() as u32)
            .collect();
        assert_eq!(sizes, vec![7, 7, 7, 6]);
        assert_eq!(layer_partition(4, 4, 1), 1..2);
        assert_eq!(layer_partition(48, 2, 1), 24..48);
    }

    #[test]
    fn four_layers_on_two_pipeline_ranks_form_a_v() {
        let parallel = Parallel {
            pp: 2,
            ep: 1,
            cp: 1,
            world: 2,
        };
        let chunks = chunks(4, &parallel).unwrap();
        let table: Vec<(u32, u32, Vec<u32>, bool)> = chunks
            .iter()
            .map(|c| (c.pp_rank, c.phase, c.layers.clone(), c.profiled))
            .collect();
        assert_eq!(
            table,
            vec![
                (0, 0, vec![0], true),
                (0, 1, vec![3], true),
                (1, 0, vec![1], true),
                (1, 1, vec![2], true)
            ]
        );
        let when: Vec<&str> = chunks.iter().map(|c| c.profiled_in).collect();
        assert_eq!(
            when,
            [
                "Step1 i=1",
                "Step2 i=0 forward_chunk(1)",
                "Step2 i=0 forward_chunk(0)",
                "Step2 i=0 forward_chunk(1)"
            ]
        );
    }

    #[test]
    fn a_layer_in_the_last_ranks_phase_zero_prints_on_its_ranks() {
        // The real 2-GPU run: 4 layers, pp=2, ranks {0, 1}; detail layer 1 (phase 0 of the
        // last pp rank) printed nowhere before Step 2's i == 0 profiled that chunk too.
        let chunks = chunks(
            4,
            &Parallel {
                pp: 2,
                ep: 1,
                cp: 1,
                world: 2,
            },
        )
        .unwrap();
        assert_eq!(
            detail_printers(&chunks, &[0, 1], &[0, 1]),
            vec![(0, vec![0]), (1, vec![1])]
        );
        // With the default ranks {0}, layer 1 is on rank 1 only.
        assert_eq!(
            detail_printers(&chunks, &[0, 1], &[0]),
            vec![(0, vec![0]), (1, vec![])]
        );
        assert_eq!(host(&chunks, 1).map(|c| c.pp_rank), Some(1));
        assert_eq!(host(&chunks, 4), None);
    }

    #[test]
    fn at_pp_1_both_chunks_of_the_only_rank_are_profiled_in_step_2() {
        // pp=1: step_1 = 0, so phase 0 (the first half of the layers) is profiled at Step 2's
        // first forward_chunk(0), as the kept H200 log shows.
        let chunks = chunks(
            4,
            &Parallel {
                pp: 1,
                ep: 1,
                cp: 1,
                world: 1,
            },
        )
        .unwrap();
        let table: Vec<(u32, Vec<u32>, &str)> = chunks
            .iter()
            .map(|c| (c.phase, c.layers.clone(), c.profiled_in))
            .collect();
        assert_eq!(
            table,
            vec![
                (0, vec![0, 1], "Step2 i=0 forward_chunk(0)"),
                (1, vec![2, 3], "Step2 i=0 forward_chunk(1)")
            ]
        );
        assert_eq!(
            detail_printers(&chunks, &[0, 1], &[0]),
            vec![(0, vec![0]), (1, vec![0])]
        );
    }

    #[test]
    fn every_layer_prints_on_the_first_rank_of_its_host_at_pp_1_2_4() {
        for num_layers in [4, 24, 27, 36, 40, 48, 60] {
            for pp in [1, 2, 4].into_iter().filter(|pp| 2 * pp <= num_layers) {
                let parallel = Parallel {
                    pp,
                    ep: 8,
                    cp: 1,
                    world: pp * 8,
                };
                let chunks = chunks(num_layers, &parallel).unwrap();
                let firsts: Vec<u32> = chunks.iter().map(|c| c.global_ranks[0]).collect();
                let layers: Vec<u32> = (0..num_layers).collect();
                for (layer, printers) in detail_printers(&chunks, &layers, &firsts) {
                    let host = host(&chunks, layer).unwrap();
                    assert_eq!(
                        printers,
                        vec![host.global_ranks[0]],
                        "{num_layers} layers, pp={pp}: layer {layer}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_default_detail_layers_of_the_real_models_print_on_rank_0_at_pp_1_2_4() {
        // (example config, num_hidden_layers, default detail layers, the example script's ep)
        // of the PithTrain export's examples/pretrain_lm.
        let models = [
            ("qwen3-30b-a3b", 48, [0, 1], 8),
            ("qwen3.5-35b-a3b", 40, [0, 1], 8),
            ("deepseek-v2-lite", 27, [1, 2], 2),
            ("gpt-oss-20b", 24, [0, 1], 8),
            ("gpt-oss-120b", 36, [0, 1], 8),
        ];
        for (name, num_layers, detail, ep) in models {
            for pp in [1, 2, 4] {
                let parallel = Parallel {
                    pp,
                    ep,
                    cp: 1,
                    world: pp * ep,
                };
                let chunks = chunks(num_layers, &parallel).unwrap();
                assert_eq!(
                    detail_printers(&chunks, &detail, &[0]),
                    vec![(detail[0], vec![0]), (detail[1], vec![0])],
                    "{name} at pp={pp}"
                );
                // Phase 0 of pp rank 0: Step 1's second forward, or Step 2's first at pp=1.
                let expected = if pp == 1 {
                    "Step2 i=0 forward_chunk(0)"
                } else {
                    "Step1 i=1"
                };
                assert_eq!(host(&chunks, detail[1]).unwrap().profiled_in, expected);
            }
        }
    }

    #[test]
    fn global_ranks_follow_the_row_major_mesh() {
        let chunks = chunks(
            8,
            &Parallel {
                pp: 2,
                ep: 2,
                cp: 1,
                world: 8,
            },
        )
        .unwrap();
        assert_eq!(chunks[2].global_ranks, vec![4, 5, 6, 7]);
    }

    #[test]
    fn world_not_divisible_is_an_error() {
        assert!(
            Parallel {
                pp: 2,
                ep: 3,
                cp: 1,
                world: 8
            }
            .dp()
            .is_err()
        );
    }

    #[test]
    fn sizes_out_of_bounds_or_overflowing_are_errors_not_panics() {
        let parallel = |pp, ep, world| Parallel {
            pp,
            ep,
            cp: 1,
            world,
        };
        // The issue's inputs: --world 0 (panicked), 2^32-1 twice (ran out of memory),
        // 65536 * 65536 (wrapped to world = 0).
        for (p, why) in [
            (parallel(2, 1, 0), "world must be between 1 and 1048576"),
            (
                parallel(u32::MAX, u32::MAX, default_world(u32::MAX, u32::MAX, 1)),
                "pp must be between 1 and 1048576",
            ),
            (
                parallel(65536, 65536, 1 << 20),
                "pp * cp * ep = 4294967296 is more than 1048576 GPUs",
            ),
            (
                parallel(4, 3, 8),
                "world must be a positive multiple of pp * cp * ep",
            ),
        ] {
            let err = chunks(4, &p).unwrap_err().to_string();
            assert!(err.contains(why), "{p:?}: {err}");
        }
        let err = chunks(4, &parallel(4, 1, 4)).unwrap_err().to_string();
        assert!(
            err.contains(
                "pp=4 makes 8 pipeline stages (two per rank), more than the model's 4 layers"
            ),
            "{err}"
        );
        assert_eq!(
            chunks(2, &parallel(1, MAX_SIZE, MAX_SIZE)).unwrap().len(),
            2
        );
    }

    #[test]
    fn sizes_are_read_from_a_launch_script() {
        let script =
            "distributed.pipeline_parallel_size = 2\ndistributed.expert_parallel_size = 4\n";
        assert_eq!(
            Parallel::from_script(script, None),
            Parallel {
                pp: 2,
                ep: 4,
                cp: 1,
                world: 8
            }
        );
    }
}
