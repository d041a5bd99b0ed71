# Group 5B-5E: probes inside the model file (pithtrain/models/<model>.py).
# Placeholders: DETAIL_LAYERS; LABEL (a string literal, an f-string when it has fields); FLAG (_do, _do_mem or _layer_mem_profile);
# NAME and EXPR for a split return.

# block: layer_preamble
from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem

_do = _layer_mem_profile and self.idx in DETAIL_LAYERS

# block: experts_import
from pithtrain.dualpipe.execution import _lmem

# block: edge_import
from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem

# block: probe
if FLAG:
    _lmem(LABEL)

# block: split_return
NAME = EXPR
