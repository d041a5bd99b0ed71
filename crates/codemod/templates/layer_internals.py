# Groups 5B-5E: probes inside the model file (pithtrain/models/<model>.py).
# DETAIL_LAYERS: the tuple literal of the layers with detail. DISPATCH, GATHERED, SCATTERED, OUTS:
# the names the model gives the dispatched, gathered, scattered and expert-output tokens. EXPR: the
# value of a `return` that is split so its result can be printed. SHAPES: the shapes of the
# tensors an experts step produced (experts_shape fields, space-separated). OPERATION: what the
# step calls (`gate_proj`, `silu_mul`, `slice`), padded to 11 columns so the shapes line up.
# INNER, OUTER and INNER_OPERATION, OUTER_OPERATION: the two calls of the experts'
# `return proj(act(...))`, split in two.
# placeholders: DETAIL_LAYERS DISPATCH GATHERED SCATTERED OUTS EXPR OPERATION SHAPES NAME INNER INNER_OPERATION OUTER OUTER_OPERATION

# block: layer_preamble
from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem

_do = _layer_mem_profile and self.idx in DETAIL_LAYERS

# block: stage1_before_compute
if _do:
    _lmem(f"  layer{self.idx} stage1: before forward_stage1_compute")

# block: stage1_after_compute
if _do:
    _lmem(f"  layer{self.idx} stage1: after forward_stage1_compute (LN+Attn+LN+gate)")

# block: stage1_after_compute_before_router
if _do:
    _lmem(f"  layer{self.idx} stage1: after forward_stage1_compute (LN+Attn+LN)")

# block: stage1_after_router
if _do:
    _lmem(f"  layer{self.idx} stage1: after router")

# block: stage1_after_dispatch
if _do:
    _lmem(f"  layer{self.idx} stage1: after dispatch_prep  dispatch={tuple(DISPATCH.shape)}")

# block: stage3_before_gather
if _do:
    _lmem(f"  layer{self.idx} stage3: before expand gather  gathered={tuple(GATHERED.shape)}")

# block: stage3_after_gather
if _do:
    _lmem(f"  layer{self.idx} stage3: after expand gather   expanded={tuple(GATHERED.shape)}")

# block: stage3_after_scatter
if _do:
    _lmem(f"  layer{self.idx} stage3: after scatter      SCATTERED={tuple(SCATTERED.shape)}")

# block: stage3_after_experts
if _do:
    _lmem(f"  layer{self.idx} stage3: after experts      OUTS={tuple(OUTS.shape)}")

# block: stage3_return
outs = EXPR
if _do:
    _lmem(f"  layer{self.idx} stage3: after unshuffle    outs={tuple(outs.shape)}")
return outs

# fragment: experts_keyword
_do_mem=_do

# fragment: experts_parameter
_do_mem: bool = False

# block: experts_import
from pithtrain.dualpipe.execution import _lmem

# block: experts_input
if _do_mem:
    _lmem(f"    experts: input             SHAPES")

# block: experts_step
if _do_mem:
    _lmem(f"    experts: after OPERATION SHAPES")

# fragment: experts_shape
NAME={tuple(NAME.shape)}

# block: experts_return
gu = INNER
if _do_mem:
    _lmem(f"    experts: after INNER_OPERATION gu={tuple(gu.shape)}")
out = OUTER
if _do_mem:
    _lmem(f"    experts: after OUTER_OPERATION out={tuple(out.shape)}")
return out

# block: prolog_import
from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem

# block: prolog_return
embeds = EXPR
if _layer_mem_profile:
    _lmem("after prolog (embed_tokens)")
return embeds

# block: epilog_preamble
from pithtrain.dualpipe.execution import _layer_mem_profile, _lmem

if _layer_mem_profile:
    _lmem("before epilog (norm + lm_head)")

# block: epilog_after_norm
if _layer_mem_profile:
    _lmem("after norm, before lm_head")

# block: epilog_return
logits = EXPR
if _layer_mem_profile:
    _lmem("after lm_head")
return logits
