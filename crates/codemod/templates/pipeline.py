# Group 4: pipeline prints in DualPipeV.step() (pithtrain/dualpipe/dualpipev.py).
# RANKS: the set literal of the global ranks that print. Blocks named step<N>_* go into (or right
# after) the `for i in range(step_N)` loop; the profiling flag is set once per step() call.
# Per-layer profiling is on for one forward of each chunk: phase 0 at Step 1's i == 1, or, where
# Step 1 has no second iteration (step_1 < 2: the last pp rank), at Step 2's i == 0; phase 1 at
# Step 2's i == 0.
# placeholders: RANKS

# block: before_pipeline
_profiling = self.memory_profiling and self.rank in RANKS
if _profiling:
    torch.cuda.synchronize()
    _m0 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] Before pipeline: {_m0:.2f} GiB | {_mem_detail()}",
        flush=True,
    )

# block: step1_layer_profile_on
if _profiling and i == 1:
    import pithtrain.dualpipe.execution as _mod

    _mod._layer_mem_profile = True

# block: step1_layer_profile_off
if _profiling and i == 1:
    _mod._layer_mem_profile = False

# block: step1_iteration
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step1 F0 i={i}: {_mem_gb():.2f} GiB (+{_mem_gb() - _m0:.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step1_after
if _profiling:
    torch.cuda.synchronize()
    _m1 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] After Step1 ({step_1} F0): {_m1:.2f} GiB (+{_m1 - _m0:.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step2_phase0_profile_on
if _profiling and i == 0 and step_1 < 2:
    import pithtrain.dualpipe.execution as _mod

    _mod._layer_mem_profile = True

# block: step2_phase0_profile_off
if _profiling and i == 0 and step_1 < 2:
    _mod._layer_mem_profile = False

# block: step2_chunk0
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step2 i={i} forward_chunk(0): {_mem_gb():.2f} GiB (+{_mem_gb() - _m0:.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step2_layer_profile_on
if _profiling and i == 0:
    import pithtrain.dualpipe.execution as _mod

    _mod._layer_mem_profile = True

# block: step2_layer_profile_off
if _profiling and i == 0:
    _mod._layer_mem_profile = False

# block: step2_chunk1
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step2 i={i} forward_chunk(1): {_mem_gb():.2f} GiB (+{_mem_gb() - _m0:.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step2_after
if _profiling:
    torch.cuda.synchronize()
    _m2 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] After Step2 ({step_2} F0F1): {_m2:.2f} GiB (+{_m2 - _m0:.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step3_before_b1
if _profiling:
    torch.cuda.synchronize()
    _ms3 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step3 i={i} before B1: {_ms3:.2f} GiB | {_mem_detail()}",
        flush=True,
    )

# block: step3_after_b1
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step3 i={i} after B1: {_mem_gb():.2f} GiB (delta={_mem_gb() - _ms3:+.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step3_after_w1
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step3 i={i} after W1: {_mem_gb():.2f} GiB (delta={_mem_gb() - _ms3:+.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step3_after_f1
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step3 i={i} after F1: {_mem_gb():.2f} GiB (delta={_mem_gb() - _ms3:+.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step3_after
if _profiling:
    torch.cuda.synchronize()
    _m3 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] After Step3 ({step_3} B1W1F1): {_m3:.2f} GiB (+{_m3 - _m0:.2f}) | {_mem_detail()}",
        flush=True,
    )

# block: step4_iteration
if _profiling:
    torch.cuda.synchronize()
    print(
        f"[rank={self.rank} pp={pp_rank}] Step4 i={i}: {_mem_gb():.2f} GiB | {_mem_detail()}",
        flush=True,
    )

# block: step4_after
if _profiling:
    torch.cuda.synchronize()
    _m4 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] After Step4 ({step_4} F0B1F1B0): {_m4:.2f} GiB | {_mem_detail()}",
        flush=True,
    )

# block: step8_after
if _profiling:
    torch.cuda.synchronize()
    _m8 = _mem_gb()
    print(
        f"[rank={self.rank} pp={pp_rank}] After Step8 (end of pipeline): {_m8:.2f} GiB | {_mem_detail()}",
        flush=True,
    )
