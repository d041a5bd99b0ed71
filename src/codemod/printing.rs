//! Where the prints will print: for given parallel sizes and printing ranks, which detail layers
//! print on none of them (`add`'s warning), and the placement table `plan` shows. The
//! placement itself is [`crate::pithtrain::placement`]'s; this module turns it into facts a
//! person or a program reads.

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::moe_rule::MoeLayers;
use crate::pithtrain::placement::{self, Chunk, Parallel};

/// A detail layer that prints on none of the printing ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SilentLayer {
    /// The layer.
    pub layer: u32,
    /// The parallel sizes checked.
    pub parallel: Parallel,
    /// The printing ranks, as the Python set literal.
    pub ranks: String,
    /// Layers that do print per-layer detail on the printing ranks.
    pub printing_layers: Vec<u32>,
    /// The first global rank of each profiled chunk that holds the layer.
    pub ranks_for_layer: Vec<u32>,
}

/// `add`'s warning, without the `memprints: warning: ` prefix.
impl fmt::Display for SilentLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |values: &[u32]| {
            if values.is_empty() {
                "none".to_string()
            } else {
                values
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        let (layer, p) = (self.layer, &self.parallel);
        write!(
            f,
            "detail layer {layer} will print nowhere with pp={} ep={} cp={} world={} and ranks {}: \
             its chunk is not profiled on those ranks. Layers that print on them: {}; ranks where layer {layer} prints: {}",
            p.pp,
            p.ep,
            p.cp,
            p.world,
            self.ranks,
            list(&self.printing_layers),
            list(&self.ranks_for_layer),
        )
    }
}

/// The detail layers of `params` that print on none of its ranks with `parallel`.
pub fn silent_layers(
    num_layers: u32,
    parallel: &Parallel,
    params: &Params,
) -> Result<Vec<SilentLayer>> {
    let chunks = placement::chunks(num_layers, parallel)?;
    let printed_here = |c: &&Chunk| {
        c.profiled
            && params
                .ranks
                .iter()
                .any(|r| c.global_ranks.binary_search(r).is_ok())
    };
    let mut printing_layers: Vec<u32> = chunks
        .iter()
        .filter(printed_here)
        .flat_map(|c| c.layers.iter().copied())
        .collect();
    printing_layers.sort_unstable();
    printing_layers.dedup();
    Ok(
        placement::detail_printers(&chunks, &params.detail_layers, &params.ranks)
            .into_iter()
            .filter(|(_, printers)| printers.is_empty())
            .map(|(layer, _)| SilentLayer {
                layer,
                parallel: *parallel,
                ranks: params.ranks_literal(),
                printing_layers: printing_layers.clone(),
                ranks_for_layer: chunks
                    .iter()
                    .filter(|c| c.profiled && c.layers.contains(&layer))
                    .filter_map(|c| c.global_ranks.first().copied())
                    .collect(),
            })
            .collect(),
    )
}

/// What `plan` shows: the model's layers, the parallel sizes, every chunk, and where each
/// detail layer prints. Serialised, it is `plan --json`.
#[derive(Debug, Clone, Serialize)]
pub struct Placement {
    /// The model, as the user typed it.
    pub model: String,
    /// `num_hidden_layers`.
    pub num_layers: u32,
    /// The MoE layers.
    pub moe_layers: Vec<u32>,
    /// The MoE-vs-dense rule as written, `null` when every layer is MoE.
    pub rule: Option<String>,
    /// The config read.
    pub config: PathBuf,
    /// Pipeline-parallel size.
    pub pp: u32,
    /// Expert-parallel size.
    pub ep: u32,
    /// Context-parallel size.
    pub cp: u32,
    /// World size.
    pub world: u32,
    /// Every chunk of every pipeline rank.
    pub chunks: Vec<Chunk>,
    /// Each detail layer with the ranks (among those asked about) where it prints.
    pub detail_layers: Vec<DetailLayer>,
}

/// One detail layer and where it prints.
#[derive(Debug, Clone, Serialize)]
pub struct DetailLayer {
    /// The layer.
    pub layer: u32,
    /// The printing ranks that print its per-layer detail; empty: none.
    pub printing_ranks: Vec<u32>,
}

/// One row of `plan`'s table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementRow {
    /// The pipeline rank.
    pub pp_rank: String,
    /// 0 or 1.
    pub phase: String,
    /// The pipeline stage.
    pub stage: String,
    /// `a-b`, `a`, or `-` for none.
    pub layers: String,
    /// `a-b`, `a`, or `-` for none.
    pub global_ranks: String,
    /// Whether the chunk prints per-layer detail.
    pub detail: &'static str,
}

impl Placement {
    /// Places `moe`'s layers with `parallel` and finds where `detail_layers` print on `ranks`.
    pub fn new(
        model: &str,
        moe: &MoeLayers,
        parallel: Parallel,
        detail_layers: &[u32],
        ranks: &[u32],
    ) -> Result<Self> {
        let chunks = placement::chunks(moe.num_layers, &parallel)?;
        let detail_layers = placement::detail_printers(&chunks, detail_layers, ranks)
            .into_iter()
            .map(|(layer, printing_ranks)| DetailLayer {
                layer,
                printing_ranks,
            })
            .collect();
        Ok(Placement {
            model: model.to_string(),
            num_layers: moe.num_layers,
            moe_layers: moe.moe.clone(),
            rule: moe.rule.clone(),
            config: moe.config.clone(),
            pp: parallel.pp,
            ep: parallel.ep,
            cp: parallel.cp,
            world: parallel.world,
            chunks,
            detail_layers,
        })
    }

    /// The first line: model, layers, rule and sizes.
    pub fn heading(&self) -> String {
        format!(
            "{}: {} layers ({}), MoE rule `{}`; pp={} ep={} cp={} world={}",
            self.model,
            self.num_layers,
            self.config.display(),
            self.rule.as_deref().unwrap_or("every layer is MoE"),
            self.pp,
            self.ep,
            self.cp,
            self.world
        )
    }

    /// The table's header.
    pub const HEADER: [&'static str; 6] = [
        "pp rank",
        "phase",
        "stage",
        "layers",
        "global ranks",
        "per-layer detail",
    ];

    /// One row per chunk.
    pub fn rows(&self) -> Vec<PlacementRow> {
        let span = |values: &[u32]| match (values.first(), values.last()) {
            (Some(a), Some(b)) if a != b => format!("{a}-{b}"),
            (Some(a), _) => a.to_string(),
            _ => "-".into(),
        };
        self.chunks
            .iter()
            .map(|c| PlacementRow {
                pp_rank: c.pp_rank.to_string(),
                phase: c.phase.to_string(),
                stage: c.stage.to_string(),
                layers: span(&c.layers),
                global_ranks: span(&c.global_ranks),
                detail: if c.profiled {
                    "profiled"
                } else {
                    "not profiled (no Step 1 i=1 on the last pp rank)"
                },
            })
            .collect()
    }

    /// One line per detail layer: where it prints, among `ranks`.
    pub fn detail_lines(&self, ranks: &[u32]) -> Vec<String> {
        self.detail_layers
            .iter()
            .map(|d| {
                if d.printing_ranks.is_empty() {
                    let ranks: Vec<String> = ranks.iter().map(u32::to_string).collect();
                    format!(
                        "detail layer {}: prints on none of ranks {}",
                        d.layer,
                        ranks.join(",")
                    )
                } else {
                    format!(
                        "detail layer {}: prints on ranks {:?}",
                        d.layer, d.printing_ranks
                    )
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(ranks: Vec<u32>, detail_layers: Vec<u32>) -> Params {
        Params {
            ranks,
            detail_layers,
            snapshot_dir: "/tmp".into(),
        }
    }

    #[test]
    fn a_layer_of_the_last_ranks_phase_zero_is_silent_and_the_warning_says_where_it_prints() {
        let parallel = Parallel {
            pp: 2,
            ep: 1,
            cp: 1,
            world: 2,
        };
        let silent = silent_layers(4, &parallel, &params(vec![0, 1], vec![0, 1])).unwrap();
        assert_eq!(silent.len(), 1);
        assert_eq!(
            silent[0].to_string(),
            "detail layer 1 will print nowhere with pp=2 ep=1 cp=1 world=2 and ranks {0, 1}: its chunk \
             is not profiled on those ranks. Layers that print on them: 0,2,3; ranks where layer 1 prints: none"
        );
        assert!(
            silent_layers(4, &parallel, &params(vec![0], vec![0, 3]))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_placement_table_spans_layers_and_ranks() {
        let moe = MoeLayers {
            rule: None,
            config: "config.json".into(),
            num_layers: 8,
            moe: (0..8).collect(),
        };
        let parallel = Parallel {
            pp: 2,
            ep: 2,
            cp: 1,
            world: 8,
        };
        let placement = Placement::new("m", &moe, parallel, &[2], &[0]).unwrap();
        let rows = placement.rows();
        assert_eq!(rows.len(), 4);
        assert_eq!(
            (rows[0].layers.as_str(), rows[0].global_ranks.as_str()),
            ("0-1", "0-3")
        );
        assert_eq!(
            rows[2].detail,
            "not profiled (no Step 1 i=1 on the last pp rank)"
        );
        assert_eq!(
            placement.detail_lines(&[0]),
            ["detail layer 2: prints on none of ranks 0"]
        );
    }
}
