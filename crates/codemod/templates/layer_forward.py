# Group 5A: per-stage prints in layer_forward() (pithtrain/dualpipe/execution.py).
# This code lands below `# fmt: off`, so it is written in its final shape.
# DETAIL_LAYERS: the tuple literal of the layers with detail. LAYER: layer_forward's layer
# parameter. STAGE: stage1, stage3 or stage5. STATEMENT: the stage call, kept verbatim.
# placeholders: DETAIL_LAYERS LAYER STAGE STATEMENT

# block: preamble
_do_lmem = _layer_mem_profile and LAYER.idx in DETAIL_LAYERS
_do_saved = _layer_mem_profile and LAYER.idx in DETAIL_LAYERS

# block: saved_tensors
if _do_saved:
    _prof = _SavedTensorsProfiler(LAYER, "STAGE")
    with _prof:
        STATEMENT
    _prof.print_summary()
else:
    STATEMENT

# block: after_stage1
if _do_lmem:
    _lmem(f"layer{LAYER.idx} after stage1 (forward_stage1: attn + gate + dispatch_prep)")

# block: after_stage2
if _do_lmem:
    _lmem(f"layer{LAYER.idx} after stage2 (dispatch a2a)")

# block: after_stage3
if _do_lmem:
    _lmem(f"layer{LAYER.idx} after stage3 (forward_stage3)")

# block: after_stage4
if _do_lmem:
    _lmem(f"layer{LAYER.idx} after stage4 (combine a2a)")

# block: after_stage5
if _do_lmem:
    _lmem(f"layer{LAYER.idx} after stage5 (forward_stage5)")
