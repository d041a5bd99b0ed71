# Group 5A: per-stage prints in layer_forward() (pithtrain/dualpipe/execution.py).
# This code lands below `# fmt: off`, so it is written in its final shape.
# Placeholders: DETAIL_LAYERS (a tuple literal of layer indices); LAYER (layer_forward's layer
# parameter); STAGE (stage1, stage3, stage5); STATEMENT (the stage call, kept verbatim); LABEL.

# block: preamble
_do_lmem = _layer_mem_profile and LAYER.idx in DETAIL_LAYERS
_do_saved = _layer_mem_profile and LAYER.idx in DETAIL_LAYERS

_wt_ptrs: set = set()
if _do_saved:
    _wt_ptrs = {p.data_ptr() for p in LAYER.parameters()}

# block: saved_tensors
if _do_saved:
    _prof = _SavedTensorsProfiler(LAYER.idx, "STAGE", _wt_ptrs)
    with _prof:
        STATEMENT
    _prof.print_summary()
else:
    STATEMENT

# block: probe
if _do_lmem:
    _lmem(f"layer{LAYER.idx} LABEL")
