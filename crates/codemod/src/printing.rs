//! Where the prints will print: the layout a command checks (the sizes given, else the model's
//! example launch script), which printing ranks print each detail layer under it (`add`'s one
//! line, [`DetailPrints`]), and the placement table `plan` shows. The placement itself is
//! [`crate::pithtrain::placement`]'s; this module turns it into facts a person or a program
//! reads.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::Result;
use crate::pithtrain::moe_rule::MoeLayers;
use crate::pithtrain::placement::{self, Chunk, Parallel};
use crate::pithtrain::{ModelRef, Repo};

/// Where the parallel sizes of a [`Layout`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutSource {
    /// `--pp/--ep/--cp/--world`.
    Arguments,
    /// `--script PATH`.
    Script,
    /// The model's example launch script, `examples/pretrain_lm/<variant>/script.py` beside the
    /// example config of the model's `model_type`.
    ExampleScript,
    /// Nothing given and no example script: `plan` shows pp=1 (`add` assumes nothing).
    Assumed,
}

/// The parallel sizes a placement is checked for, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// Pipeline-parallel size.
    pub pp: u32,
    /// Expert-parallel size.
    pub ep: u32,
    /// Context-parallel size.
    pub cp: u32,
    /// World size.
    pub world: u32,
    /// Where the sizes came from.
    pub source: LayoutSource,
    /// The script read (relative to the checkout when inside it); `null` for arguments.
    pub script: Option<String>,
}

impl Layout {
    /// `parallel`, from `source` (reading `script`, if any).
    pub fn new(parallel: Parallel, source: LayoutSource, script: Option<String>) -> Self {
        Layout {
            pp: parallel.pp,
            ep: parallel.ep,
            cp: parallel.cp,
            world: parallel.world,
            source,
            script,
        }
    }

    /// The sizes.
    pub fn parallel(&self) -> Parallel {
        Parallel {
            pp: self.pp,
            ep: self.ep,
            cp: self.cp,
            world: self.world,
        }
    }
}

/// `pp=1 ep=8 cp=1 world=8 from examples/pretrain_lm/qwen3-30b-a3b/script.py`.
impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pp={} ep={} cp={} world={} ",
            self.pp, self.ep, self.cp, self.world
        )?;
        match (self.source, &self.script) {
            (LayoutSource::Arguments, _) => write!(f, "from --pp/--ep/--cp"),
            (LayoutSource::Script, Some(script)) => write!(f, "from --script {script}"),
            (LayoutSource::ExampleScript, Some(script)) => write!(f, "from {script}"),
            (LayoutSource::Assumed, _) => write!(
                f,
                "assumed: no --pp/--script and no example script for the model"
            ),
            (_, None) => write!(f, "from a script"),
        }
    }
}

/// The layout a command checks: `given` (the sizes of `--pp/--ep/--cp/--world`, or of
/// `--script` when `script` is set) when there is one, else the model's example launch
/// script's (with `world` when given), else why no layout is known.
pub fn layout(
    repo: &Repo,
    model: &ModelRef,
    given: Option<Parallel>,
    script: Option<&Path>,
    world: Option<u32>,
) -> std::result::Result<Layout, String> {
    if let Some(parallel) = given {
        return Ok(match script {
            Some(path) => Layout::new(
                parallel,
                LayoutSource::Script,
                Some(shown(repo, path.to_path_buf())),
            ),
            None => Layout::new(parallel, LayoutSource::Arguments, None),
        });
    }
    let no_layout = || {
        format!(
            "no --pp/--script given and no examples/pretrain_lm/*/script.py for {}; pass --pp/--ep/--cp or --script",
            model.name
        )
    };
    let script = example_script(model).ok_or_else(no_layout)?;
    let text = std::fs::read_to_string(&script)
        .map_err(|e| format!("cannot read {}: {e}", shown(repo, script.clone())))?;
    let parallel = Parallel::from_script(&text, world);
    let shown = shown(repo, script);
    parallel.dp().map_err(|e| format!("{shown}: {e}"))?;
    Ok(Layout::new(
        parallel,
        LayoutSource::ExampleScript,
        Some(shown),
    ))
}

/// The model's example launch script: `script.py` in its example variant's folder, when
/// there is one.
pub fn example_script(model: &ModelRef) -> Option<PathBuf> {
    Some(model.example.as_ref()?.join("script.py")).filter(|p| p.is_file())
}

/// `path` relative to the checkout when it lies inside it.
fn shown(repo: &Repo, path: PathBuf) -> String {
    let absolute = if path.is_absolute() {
        path
    } else {
        std::env::current_dir().map_or(path.clone(), |cwd| cwd.join(&path))
    };
    let (root, absolute) = (
        std::fs::canonicalize(&repo.root).unwrap_or_else(|_| repo.root.clone()),
        std::fs::canonicalize(&absolute).unwrap_or(absolute),
    );
    absolute
        .strip_prefix(&root)
        .unwrap_or(&absolute)
        .display()
        .to_string()
}

/// One detail layer: where it runs and which printing ranks print its per-layer detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerPrints {
    /// The layer.
    pub layer: u32,
    /// The printing ranks that print its per-layer detail; empty: none.
    pub printing_ranks: Vec<u32>,
    /// The pipeline rank that runs it; `null` for a layer past the model's last.
    pub pp_rank: Option<u32>,
    /// The model chunk (0 or 1) it is in.
    pub phase: Option<u32>,
    /// The forward the pipeline profiles it in (`Step1 i=1`, `Step2 i=0 forward_chunk(0)`, …).
    pub profiled_in: Option<&'static str>,
    /// The first and the last global rank that run it.
    pub host_ranks: Option<[u32; 2]>,
    /// When no printing rank prints it: the global rank to add to `--ranks` (the first that
    /// runs it).
    pub rank_to_add: Option<u32>,
}

impl LayerPrints {
    fn of(chunks: &[Chunk], layer: u32, ranks: &[u32]) -> Self {
        let host = placement::host(chunks, layer);
        let printing_ranks: Vec<u32> = host
            .filter(|c| c.profiled)
            .map(|c| {
                c.global_ranks
                    .iter()
                    .copied()
                    .filter(|g| ranks.contains(g))
                    .collect()
            })
            .unwrap_or_default();
        let first_last =
            host.and_then(|c| Some([*c.global_ranks.first()?, *c.global_ranks.last()?]));
        LayerPrints {
            layer,
            rank_to_add: first_last
                .map(|[first, _]| first)
                .filter(|_| printing_ranks.is_empty()),
            printing_ranks,
            pp_rank: host.map(|c| c.pp_rank),
            phase: host.map(|c| c.phase),
            profiled_in: host.map(|c| c.profiled_in),
            host_ranks: first_last,
        }
    }
}

/// Which ranks will print each detail layer under the layout a command knows: `add`'s one line
/// (its `Display`), and its JSON.
#[derive(Debug, Clone, Serialize)]
pub struct DetailPrints {
    /// The layout checked; `null` when none is known.
    pub layout: Option<Layout>,
    /// Why no layout is known; `null` when one is.
    pub layout_unknown: Option<String>,
    /// The printing ranks.
    pub ranks: Vec<u32>,
    /// Each detail layer; empty when no layout is known.
    pub layers: Vec<LayerPrints>,
    /// The global ranks `--ranks` needs so that every detail layer prints (the printing ranks
    /// plus each silent layer's rank to add); `null` when it has them all or no layout is known.
    pub suggested_ranks: Option<Vec<u32>>,
}

impl DetailPrints {
    /// Where `detail_layers` print on `ranks` under `layout`, for a model of `num_layers`
    /// layers (`None`: unknown, no config). A layout given on the command line that does not
    /// fit the model is an error; an example script's is told as "layout unknown".
    pub fn new(
        layout: std::result::Result<Layout, String>,
        num_layers: Option<u32>,
        detail_layers: &[u32],
        ranks: &[u32],
    ) -> Result<Self> {
        let unknown = |why: String| DetailPrints {
            layout: None,
            layout_unknown: Some(why),
            ranks: ranks.to_vec(),
            layers: Vec::new(),
            suggested_ranks: None,
        };
        let layout = match layout {
            Ok(layout) => layout,
            Err(why) => return Ok(unknown(why)),
        };
        let Some(num_layers) = num_layers else {
            return Ok(unknown(
                "the model's layer count is unknown (no config found; pass --config)".into(),
            ));
        };
        let chunks = match placement::chunks(num_layers, &layout.parallel()) {
            Ok(chunks) => chunks,
            Err(e) if layout.source == LayoutSource::ExampleScript => {
                let script = layout.script.as_deref().unwrap_or("the example script");
                return Ok(unknown(format!("{script}: {e}")));
            }
            Err(e) => return Err(e),
        };
        Ok(Self::of_chunks(layout, &chunks, detail_layers, ranks))
    }

    fn of_chunks(layout: Layout, chunks: &[Chunk], detail_layers: &[u32], ranks: &[u32]) -> Self {
        let layers: Vec<LayerPrints> = detail_layers
            .iter()
            .map(|&layer| LayerPrints::of(chunks, layer, ranks))
            .collect();
        let mut suggested: Vec<u32> = ranks
            .iter()
            .copied()
            .chain(layers.iter().filter_map(|l| l.rank_to_add))
            .collect();
        suggested.sort_unstable();
        suggested.dedup();
        DetailPrints {
            layout: Some(layout),
            layout_unknown: None,
            ranks: ranks.to_vec(),
            suggested_ranks: Some(suggested).filter(|s| s.len() > ranks.len()),
            layers,
        }
    }

    /// True when the layout is known and some detail layer prints on no printing rank (`add`
    /// then says it as a warning).
    pub fn has_silent_layer(&self) -> bool {
        self.layers.iter().any(|l| l.printing_ranks.is_empty())
    }
}

fn list(values: &[u32]) -> String {
    values
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The one line: `detail layers print: layer 0 on rank 0; layer 1 on rank 0 (layout pp=1 …)`.
impl fmt::Display for DetailPrints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "detail layers print: ")?;
        let Some(layout) = &self.layout else {
            let why = self.layout_unknown.as_deref().unwrap_or("no layout");
            return write!(f, "layout unknown: {why}");
        };
        let ranks = list(&self.ranks);
        for (i, l) in self.layers.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            let layer = l.layer;
            match (&l.printing_ranks[..], l.rank_to_add) {
                ([one], _) => write!(f, "layer {layer} on rank {one}")?,
                ([_, ..], _) => write!(f, "layer {layer} on ranks {}", list(&l.printing_ranks))?,
                ([], Some(add)) => {
                    write!(f, "layer {layer} on none of ranks {ranks}: add rank {add}")?;
                    if let Some(suggested) = &self.suggested_ranks {
                        write!(f, " (--ranks {})", list(suggested))?;
                    }
                }
                ([], None) => write!(f, "layer {layer} nowhere: the model has no layer {layer}")?,
            }
        }
        write!(f, " (layout {layout})")
    }
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
    /// The sizes again, with where they came from.
    pub layout: Layout,
    /// Every chunk of every pipeline rank.
    pub chunks: Vec<Chunk>,
    /// Each detail layer with the ranks (among those asked about) where it prints, where it
    /// runs, and the rank to add when none prints it.
    pub detail_layers: Vec<LayerPrints>,
    /// The global ranks `--ranks` needs so that every detail layer prints; `null` when it has
    /// them.
    pub suggested_ranks: Option<Vec<u32>>,
    /// `add`'s line for the same facts.
    pub detail_prints: String,
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
    /// The forward in which the chunk prints per-layer detail.
    pub detail: String,
}

impl Placement {
    /// Places `moe`'s layers with `layout` and finds where `detail_layers` print on `ranks`.
    pub fn new(
        model: &str,
        moe: &MoeLayers,
        layout: Layout,
        detail_layers: &[u32],
        ranks: &[u32],
    ) -> Result<Self> {
        let parallel = layout.parallel();
        let chunks = placement::chunks(moe.num_layers, &parallel)?;
        let prints = DetailPrints::of_chunks(layout.clone(), &chunks, detail_layers, ranks);
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
            layout,
            chunks,
            detail_prints: prints.to_string(),
            suggested_ranks: prints.suggested_ranks,
            detail_layers: prints.layers,
        })
    }

    /// The first line: model, layers, rule and sizes.
    pub fn heading(&self) -> String {
        format!(
            "{}: {} layers ({}), MoE rule `{}`; {}",
            self.model,
            self.num_layers,
            self.config.display(),
            self.rule.as_deref().unwrap_or("every layer is MoE"),
            self.layout,
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
                    format!("profiled in {}", c.profiled_in)
                } else {
                    "not profiled".into()
                },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args_layout(pp: u32, ep: u32, world: u32) -> Layout {
        Layout::new(
            Parallel {
                pp,
                ep,
                cp: 1,
                world,
            },
            LayoutSource::Arguments,
            None,
        )
    }

    #[test]
    fn a_layer_of_the_last_ranks_phase_zero_prints_there_and_the_line_names_the_rank_to_add() {
        let prints = DetailPrints::new(Ok(args_layout(2, 1, 2)), Some(4), &[0, 1], &[0]).unwrap();
        assert!(prints.has_silent_layer());
        assert_eq!(prints.layers[1].rank_to_add, Some(1));
        assert_eq!(
            prints.layers[1].profiled_in,
            Some("Step2 i=0 forward_chunk(0)")
        );
        assert_eq!(
            prints.to_string(),
            "detail layers print: layer 0 on rank 0; layer 1 on none of ranks 0: add rank 1 \
             (--ranks 0,1) (layout pp=2 ep=1 cp=1 world=2 from --pp/--ep/--cp)"
        );
        let both = DetailPrints::new(Ok(args_layout(2, 1, 2)), Some(4), &[0, 1], &[0, 1]).unwrap();
        assert!(!both.has_silent_layer());
        assert_eq!(both.suggested_ranks, None);
        assert_eq!(
            both.to_string(),
            "detail layers print: layer 0 on rank 0; layer 1 on rank 1 \
             (layout pp=2 ep=1 cp=1 world=2 from --pp/--ep/--cp)"
        );
    }

    #[test]
    fn the_rank_to_add_is_the_first_of_the_hosting_replicas() {
        // pp=2, ep=4: pipeline rank 1 is global ranks 4-7.
        let prints = DetailPrints::new(Ok(args_layout(2, 4, 8)), Some(4), &[1], &[0, 2]).unwrap();
        assert_eq!(prints.layers[0].host_ranks, Some([4, 7]));
        assert_eq!(prints.suggested_ranks, Some(vec![0, 2, 4]));
        assert!(
            prints.to_string().starts_with(
                "detail layers print: layer 1 on none of ranks 0,2: add rank 4 (--ranks 0,2,4)"
            ),
            "{prints}"
        );
        let many = DetailPrints::new(Ok(args_layout(2, 4, 8)), Some(4), &[0], &[0, 2, 5]).unwrap();
        assert!(many.to_string().contains("layer 0 on ranks 0,2"), "{many}");
    }

    #[test]
    fn an_unknown_layout_says_why_in_the_same_line() {
        let why = "no --pp/--script given and no examples/pretrain_lm/*/script.py for m; pass --pp/--ep/--cp or --script";
        let prints = DetailPrints::new(Err(why.into()), Some(4), &[0, 1], &[0]).unwrap();
        assert!(!prints.has_silent_layer());
        assert_eq!(
            prints.to_string(),
            format!("detail layers print: layout unknown: {why}")
        );
        let no_config = DetailPrints::new(Ok(args_layout(1, 1, 1)), None, &[0, 1], &[0]).unwrap();
        assert!(
            no_config
                .to_string()
                .contains("layout unknown: the model's layer count is unknown"),
            "{no_config}"
        );
    }

    #[test]
    fn an_example_script_that_does_not_fit_is_unknown_but_arguments_that_do_not_are_errors() {
        let mut layout = args_layout(4, 1, 4);
        assert!(DetailPrints::new(Ok(layout.clone()), Some(4), &[0], &[0]).is_err());
        layout.source = LayoutSource::ExampleScript;
        layout.script = Some("examples/pretrain_lm/x/script.py".into());
        let prints = DetailPrints::new(Ok(layout), Some(4), &[0], &[0]).unwrap();
        assert!(
            prints.to_string().starts_with(
                "detail layers print: layout unknown: examples/pretrain_lm/x/script.py: "
            ),
            "{prints}"
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
        let placement = Placement::new("m", &moe, args_layout(2, 2, 8), &[2], &[0]).unwrap();
        let rows = placement.rows();
        assert_eq!(rows.len(), 4);
        assert_eq!(
            (rows[0].layers.as_str(), rows[0].global_ranks.as_str()),
            ("0-1", "0-3")
        );
        assert_eq!(rows[0].detail, "profiled in Step1 i=1");
        assert_eq!(rows[2].detail, "profiled in Step2 i=0 forward_chunk(0)");
        assert_eq!(placement.detail_layers[0].rank_to_add, Some(4));
        assert_eq!(placement.suggested_ranks, Some(vec![0, 4]));
        assert_eq!(
            placement.detail_prints,
            "detail layers print: layer 2 on none of ranks 0: add rank 4 (--ranks 0,4) \
             (layout pp=2 ep=2 cp=1 world=8 from --pp/--ep/--cp)"
        );
    }
}
