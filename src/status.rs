//! `status`: what instrumentation a tree holds, per file and group, and the model, ranks, detail
//! layers and snapshot folder in effect — read from the tree alone, by counting each group's
//! markers (the helper definitions, the print labels, the refactors' traces).

use serde::Serialize;

use crate::error::Result;
use crate::params::{Params, parse_python_int_collection};
use crate::pithtrain::{self, Repo};

/// Whether a group's code is all there, partly there, or absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Complete,
    Partial,
    Absent,
}

/// One group in one file.
#[derive(Debug, Clone, Serialize)]
pub struct GroupStatus {
    pub group: &'static str,
    pub state: State,
    /// Markers found / expected.
    pub found: usize,
    pub expected: usize,
}

/// One file.
#[derive(Debug, Clone, Serialize)]
pub struct FileStatus {
    pub path: String,
    pub groups: Vec<GroupStatus>,
}

/// The whole tree.
#[derive(Debug, Clone, Serialize)]
pub struct Status {
    /// `complete`, `partial` (or inconsistent) or `absent`.
    pub state: State,
    /// Instrumented model(s), as users type them.
    pub models: Vec<String>,
    pub ranks: Option<Vec<u32>>,
    pub detail_layers: Option<Vec<u32>>,
    pub snapshot_dir: Option<String>,
    pub files: Vec<FileStatus>,
}

impl Status {
    /// The parameters in effect, when every one of them could be read.
    pub fn params(&self) -> Option<Params> {
        Some(Params {
            ranks: self.ranks.clone()?,
            detail_layers: self.detail_layers.clone()?,
            snapshot_dir: self.snapshot_dir.clone()?,
        })
    }

    /// The single instrumented model, if there is exactly one.
    pub fn model(&self) -> Option<&str> {
        match self.models.as_slice() {
            [one] => Some(one),
            _ => None,
        }
    }
}

/// Markers per group: (group, file kind, line text or substring, expected count).
const MARKERS: &[(&str, &str, &str, usize)] = &[
    ("1A", "dualpipev", "def _mem_gb() -> float:", 1),
    ("1A", "dualpipev", "def _mem_detail() -> str:", 1),
    (
        "1A",
        "dualpipev",
        "self.memory_profiling = True  # Set to True",
        1,
    ),
    ("4", "dualpipev", "f\"[rank={self.rank} pp={pp_rank}] ", 14),
    ("1B", "execution", "class _SavedTensorsProfiler:", 1),
    ("1B", "execution", "def _lmem(label: str) -> None:", 1),
    ("5A", "execution", "_prof = _SavedTensorsProfiler(", 3),
    ("5A", "execution", "_lmem(f\"layer{", 5),
    (
        "5B-5E",
        "model",
        "from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem",
        4,
    ),
    (
        "5B-5E",
        "model",
        "from pithtrain.dualpipe.execution import _lmem\n",
        1,
    ),
    ("5B-5E", "model", "_do_mem: bool = False", 1),
    ("5B-5E", "model", "_do_mem=_do", 1),
    ("2", "distributed", "] init_process_group | \"", 1),
    ("2", "distributed", "] init_device_mesh | \"", 1),
    ("1C", "training", "def _setup_mem(label: str) -> None:", 1),
    ("3", "training", "_setup_mem(\"", 5),
    ("6", "pretrain_lm", "] load_ckpt | optimizer state: ", 1),
    (
        "7",
        "pretrain_lm",
        "_mem_first_step: dict[str, int] = {}",
        1,
    ),
    (
        "7",
        "pretrain_lm",
        "Memory snapshot saved to {snapshot_path}",
        2,
    ),
];

/// Reads the instrumentation state of `repo`.
pub fn scan(repo: &Repo) -> Result<Status> {
    let read = |rel: &str| std::fs::read_to_string(repo.root.join(rel)).unwrap_or_default();
    let mut models = Vec::new();
    let mut model_text = String::new();
    let mut model_rel = format!("{}/<model>.py", pithtrain::MODELS_DIR);
    for model in repo.models() {
        let rel = repo.model_file(&model)?;
        let text = read(&rel);
        if text.contains("from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem")
            || text.contains("_do_mem: bool = False")
        {
            models.push(model);
            model_rel = rel;
            model_text = text;
        }
    }
    let files: Vec<(String, &str, String)> = vec![
        (
            pithtrain::EXECUTION.into(),
            "execution",
            read(pithtrain::EXECUTION),
        ),
        (
            pithtrain::DUALPIPEV.into(),
            "dualpipev",
            read(pithtrain::DUALPIPEV),
        ),
        (model_rel, "model", model_text),
        (
            pithtrain::DISTRIBUTED.into(),
            "distributed",
            read(pithtrain::DISTRIBUTED),
        ),
        (
            pithtrain::TRAINING.into(),
            "training",
            read(pithtrain::TRAINING),
        ),
        (
            pithtrain::PRETRAIN_LM.into(),
            "pretrain_lm",
            read(pithtrain::PRETRAIN_LM),
        ),
    ];
    let mut statuses = Vec::new();
    for (rel, kind, text) in &files {
        let mut groups: Vec<GroupStatus> = Vec::new();
        for (group, file_kind, marker, expected) in MARKERS {
            if file_kind != kind {
                continue;
            }
            let found = text.matches(marker).count().min(*expected * 2);
            match groups.iter_mut().find(|g| g.group == *group) {
                Some(g) => {
                    g.found += found;
                    g.expected += expected;
                }
                None => groups.push(GroupStatus {
                    group,
                    state: State::Absent,
                    found,
                    expected: *expected,
                }),
            }
        }
        for g in &mut groups {
            g.state = match g.found {
                0 => State::Absent,
                n if n == g.expected => State::Complete,
                _ => State::Partial,
            };
        }
        statuses.push(FileStatus {
            path: rel.clone(),
            groups,
        });
    }
    let all: Vec<State> = statuses
        .iter()
        .flat_map(|f| f.groups.iter().map(|g| g.state))
        .collect();
    let mut state = if all.iter().all(|s| *s == State::Complete) {
        State::Complete
    } else if all.iter().all(|s| *s == State::Absent) {
        State::Absent
    } else {
        State::Partial
    };
    if models.len() > 1 {
        state = State::Partial;
    }
    let capture = |text: &str, pattern: &str| {
        regex::Regex::new(pattern)
            .expect("valid regex")
            .captures(text)
            .map(|c| c[1].to_string())
    };
    if state == State::Absent {
        return Ok(Status {
            state,
            models,
            ranks: None,
            detail_layers: None,
            snapshot_dir: None,
            files: statuses,
        });
    }
    let execution = &files[0].2;
    let ranks = capture(execution, r"(?m)^_layer_mem_ranks = (\{[0-9, ]*\})$")
        .or_else(|| capture(&files[1].2, r"self\.rank in (\{[0-9, ]*\})"))
        .and_then(|l| parse_python_int_collection(&l));
    let detail_layers = capture(
        execution,
        r"_do_lmem = _layer_mem_profile and \w+\.idx in (\([0-9, ]*\))",
    )
    .or_else(|| {
        capture(
            &files[2].2,
            r"_do = _layer_mem_profile and self\.idx in (\([0-9, ]*\))",
        )
    })
    .and_then(|l| parse_python_int_collection(&l));
    let snapshot_dir = capture(&files[5].2, r#"f"([^"]*)/memory_snapshot_rank\{"#);
    Ok(Status {
        state,
        models,
        ranks,
        detail_layers,
        snapshot_dir,
        files: statuses,
    })
}
