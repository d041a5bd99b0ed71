//! Group 1B, `pithtrain/dualpipe/execution.py`: the per-layer helpers group 5A's probes call.
//!
//! What it adds, after the module's last import (above `# fmt: off`, so Ruff formats it like any
//! other code): the `_layer_mem_profile` flag (group 4 switches it on for one chunk per step), the
//! printing ranks `_layer_mem_ranks = RANKS`, the `_SavedTensorsProfiler` context manager and
//! `_lmem(label)`.
//!
//! ```text
//! before                                   after
//! import torch                             import torch
//!                                          # -- Per-layer activation profiling --
//! # fmt: off                               _layer_mem_profile = False
//!                                          _layer_mem_ranks = {0}
//!                                          class _SavedTensorsProfiler: ...
//!                                          def _lmem(label: str) -> None: ...
//!                                          # fmt: off
//! ```
//!
//! The profiler is handed the layer object: at pack time it compares the saved tensor's storage
//! with the storages of `layer.parameters()` as they are at that moment (FSDP's gathered weights,
//! or a DTensor's local shard), so weights and views of them count as weights; each tensor and
//! each summary prints its exact bytes beside the MiB.
//!
//! Observation only: `_lmem` reads a memory counter and prints; the profiler's
//! `saved_tensors_hooks` pack function reads the tensor's shape, dtype and storage address and
//! returns it unchanged, so autograd saves the same tensors with it as without.

use ruff_python_ast::Stmt;

use super::group::{Group, Marker, Words};
use crate::error::Result;
use crate::params::Params;
use crate::pithtrain::Target;
use crate::template::LAYER_HELPERS;
use memprints_python::anchor;
use memprints_python::edit::FileEdits;

/// Group 1B.
pub const GROUP: Group = Group {
    id: "1B",
    target: Target::Execution,
    summary: "_SavedTensorsProfiler and _lmem after the imports",
    template: LAYER_HELPERS,
    markers: &[Marker::once("module_helpers")],
    insert,
};

fn insert(edits: &mut FileEdits, params: &Params) -> Result<Words> {
    let src = edits.src();
    let last_import = src
        .module
        .body
        .iter()
        .take_while(|stmt| !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)))
        .filter(|stmt| matches!(stmt, Stmt::Import(_) | Stmt::ImportFrom(_)))
        .last()
        .ok_or_else(|| anchor::missing(src, "<module>", "the module's imports", 0))?;
    let block = LAYER_HELPERS.fill("module_helpers", &[("RANKS", &params.ranks_literal())]);
    edits.insert_after_spaced(last_import, &block, 1, 2)?;
    Ok(Words::new())
}

#[cfg(test)]
mod tests {
    use crate::instrument::testing;
    use crate::template::LAYER_HELPERS;

    const BEFORE: &str = r#""""Per-stage execution."""

import torch

# fmt: off

def layer_forward(block, hidden_states):
    return block(hidden_states)
"#;

    #[test]
    fn group_1b_round_trips_a_snippet() {
        testing::check_group(&super::GROUP, BEFORE, "group_1b");
    }

    #[test]
    fn group_1b_blocks_are_recognised() {
        testing::check_blocks(&super::GROUP);
    }

    /// Runs the profiler of the template under a stand-in `torch` (python3, no GPU): it replays
    /// the first saved-tensor print of a kept real log, each weight a view of a parameter that
    /// FSDP gathered *after* the profiler was made (one behind a DTensor whose storage cannot be
    /// read), each activation a tensor of its own, and prints what the profiler prints.
    const REPLAY: &str = r#"
import sys, types

helpers, log = open(sys.argv[1]).read(), open(sys.argv[2]).read().splitlines()
SIZES = {"torch.bfloat16": 2, "torch.float32": 4, "torch.int64": 8, "torch.int32": 4}
hooks = []


class Storage:
    def __init__(self, ptr):
        self.ptr = ptr

    def data_ptr(self):
        return self.ptr


class Tensor:
    def __init__(self, shape, dtype, ptr):
        self.shape, self.dtype, self.ptr = shape, dtype, ptr

    def nelement(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def element_size(self):
        return SIZES[self.dtype]

    def untyped_storage(self):
        if self.ptr is None:
            raise RuntimeError("a wrapper subclass has no storage")
        return Storage(self.ptr)


class Hooks:
    def __init__(self, pack, unpack):
        self.pack = pack

    def __enter__(self):
        hooks.append(self.pack)

    def __exit__(self, *args):
        hooks.pop()


torch = types.ModuleType("torch")
torch.Tensor = Tensor
torch.autograd = types.SimpleNamespace(graph=types.SimpleNamespace(saved_tensors_hooks=Hooks))
torch.distributed = types.SimpleNamespace(is_initialized=lambda: False, get_rank=lambda: 0)
sys.modules["torch"] = torch
namespace = {}
exec("import torch\n" + helpers, namespace)

start = next(i for i, line in enumerate(log) if line.endswith("] layer0 stage1 saved tensors:"))
block = [log[start]]
for line in log[start + 1:]:
    block.append(line)
    if "total=" in line:
        break
for line in block:
    print(line, file=sys.stderr)


class Layer:
    idx = 0

    def __init__(self):
        self.params = [Tensor((4,), "torch.bfloat16", 0)]  # a sharded parameter, freed

    def parameters(self):
        return iter(self.params)


layer = Layer()
prof = namespace["_SavedTensorsProfiler"](layer, "stage1")
saved = []
for n, line in enumerate(block[1:-1]):
    tag, rest = line.split("saved (", 1)[1].split("): ", 1)
    shape_text, dtype = rest.split(") ", 1)[0] + ")", rest.split(") ", 1)[1].split(" ")[0]
    shape = tuple(int(d) for d in shape_text.strip("(),").split(",") if d.strip())
    t = Tensor(shape, dtype, 0 if tag == "activ" and n == 1 else 1000 + n)
    saved.append(t)
    if tag == "weight":
        if n % 2:
            layer.params.append(Tensor(shape, dtype, t.ptr))  # gathered in place
        else:
            wrapper = Tensor(shape, dtype, None)  # a DTensor: its shard holds the storage
            wrapper._local_tensor = Tensor(shape, dtype, t.ptr)
            layer.params.append(wrapper)
with prof:
    for t in saved:
        assert hooks[-1](t) is t
prof.print_summary()
"#;

    #[test]
    fn the_profiler_takes_the_layer_recognises_weights_at_pack_time_and_prints_exact_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let helpers = dir.path().join("helpers.py");
        let script = dir.path().join("replay.py");
        let filled = LAYER_HELPERS.fill("module_helpers", &[("RANKS", "{0}")]);
        assert!(filled.contains("def __init__(self, layer, stage_name: str):"));
        std::fs::write(&helpers, filled).unwrap();
        std::fs::write(&script, REPLAY).unwrap();
        let log = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/e2e/defaults-pp1/qwen3-tiny-pp1-instr.log"
        );
        let out = std::process::Command::new("python3")
            .args([&script, &helpers, std::path::Path::new(log)])
            .output()
            .expect("python3 runs");
        let (printed, kept) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{kept}");
        // Byte for byte the real H200 print, 29 tensors with 11 weights among them, down to
        // `  activ=4.5 MB (4694016 bytes), weight=0.4 MB (398592 bytes), total=29 tensors`.
        assert_eq!(printed, kept);
        assert_eq!(printed.lines().count(), 31);
        assert!(printed.contains("weight=0.4 MB (398592 bytes), total=29 tensors"));
        assert!(
            printed.contains("    saved (weight): (128, 256) torch.bfloat16 (0.1 MB, 65536 bytes)")
        );
    }
}
