#!/usr/bin/env python3
"""What an instrumented PithTrain tree will print, read from its code (stdlib only).

check.py needs to know which layers and stages the per-layer prints cover, and memprints
chooses them itself (``memprints add <model>`` picks the detail layers from the model's MoE
rule). Rather than repeating that rule here, this reads the choice back from the tree's
``pithtrain/dualpipe/execution.py``, where the instrumentation states it in plain code:

    _layer_mem_ranks = {0}
    _do_lmem = _layer_mem_profile and layer.idx in (0, 1)
    _lmem(f"layer{layer.idx} after stage1 (...)")
    _prof = _SavedTensorsProfiler(layer, "stage1")

run_remote.sh runs ``tree_prints.py TREE`` on the GPU machine before each run and puts the
result into the log as one line, so every log says what its tree was set up to print:

    E2E_PRINTS {"instrumented": true, "detail_layers": [0, 1], "ranks": [0], ...}
"""

import json
import re
import sys
from pathlib import Path

EXECUTION = Path("pithtrain/dualpipe/execution.py")
PRINTS_RE = re.compile(r"E2E_PRINTS (\{[^\n]*\})")

_INT_LIST = r"([\d,\s]*)"
# layer_forward's first parameter is `layer` in PithTrain, any name elsewhere (`block`).
_DETAIL_RE = re.compile(r"_do_lmem\s*=.*?\w+\.idx\s+in\s+[(\[{]" + _INT_LIST + r"[)\]}]")
_RANKS_RE = re.compile(r"^_layer_mem_ranks\s*=\s*[{(\[]" + _INT_LIST + r"[})\]]", re.M)
_AFTER_RE = re.compile(r"""_lmem\(\s*f["']layer\{\w+\.idx\} after stage(\d+)""")
_SAVED_RE = re.compile(r"""_SavedTensorsProfiler\(\s*\w+(?:\.idx)?\s*,\s*["']stage(\d+)["']""")
# The tree's own record of how it was made (written by prepare_trees.sh into each overlay).
OVERLAY_NOTE = "E2E_OVERLAY.txt"


def _ints(text):
    return [int(x) for x in re.findall(r"\d+", text)]


def describe_source(source):
    """The print set-up stated in an execution.py's text (see the module doc).

    Keys: instrumented (bool), and when instrumented: detail_layers, ranks, stages_after
    (stage numbers with a ``layerN after stageK`` probe), stages_saved (stage numbers with a
    saved-tensor summary). A key whose line was not found is None: "not read", never a guess.
    """
    if "_layer_mem_profile" not in source:
        return {"instrumented": False}
    detail = _DETAIL_RE.search(source)
    ranks = _RANKS_RE.search(source)
    return {
        "instrumented": True,
        "detail_layers": _ints(detail.group(1)) if detail else None,
        "ranks": _ints(ranks.group(1)) if ranks else None,
        "stages_after": sorted({int(s) for s in _AFTER_RE.findall(source)}) or None,
        "stages_saved": sorted({int(s) for s in _SAVED_RE.findall(source)}) or None,
    }


def describe(tree):
    """describe_source of TREE's execution.py, plus the memprints line of its overlay note."""
    tree = Path(tree)
    info = describe_source((tree / EXECUTION).read_text())
    note = tree / OVERLAY_NOTE
    if note.is_file():
        for line in note.read_text().splitlines():
            if line.startswith(("memprints ", "add ")):
                info.setdefault("made_by", []).append(line.strip())
    return info


def from_log(text):
    """The E2E_PRINTS record of a log, or None when the log has none (older harness)."""
    m = PRINTS_RE.search(text)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: tree_prints.py <pithtrain-tree>", file=sys.stderr)
        return 2
    try:
        info = describe(args[0])
    except OSError as e:
        print("tree_prints: cannot read %s: %s" % (Path(args[0]) / EXECUTION, e.strerror),
              file=sys.stderr)
        return 2
    print("E2E_PRINTS " + json.dumps(info, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
