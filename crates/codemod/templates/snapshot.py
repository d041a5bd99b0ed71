# Group 7: memory snapshot of the first training step in train_step (pithtrain/tasks/pretrain_lm.py).
# RANKS: the set literal of the global ranks that print. STEP: the step counter (`training.step`
# in PithTrain). SNAPSHOT_DIR: where the pickles go. PROFILER_START: the configurable profiler's
# start step (`cfg.training.memory_profile_start`; `None` where the code has none). STATEMENT: the
# `model.step(...)` call, kept verbatim.
#
# The first step this process trains is profiled: step 0, or the first step after a resume.
# History that the configurable profiler (memory_profile_start) records is left running.
# placeholders: RANKS STEP PROFILER_START SNAPSHOT_DIR STATEMENT

# block: first_step_state
# memprints: the first step this process trains (0, or the first after a resume) is profiled.
_mem_first_step: dict[str, int] = {}

# block: before_step
_mem_profile = _mem_first_step.setdefault("step", STEP) == STEP
_mem_snapshot = _mem_profile and torch.distributed.get_rank() in RANKS
_mem_history = _mem_snapshot and PROFILER_START != STEP
if _mem_profile:
    model.memory_profiling = True
if _mem_history:
    torch.cuda.memory._record_memory_history(max_entries=1048576)

# block: wrap_step
try:
    STATEMENT
except torch.OutOfMemoryError:
    if _mem_snapshot:
        snapshot = torch.cuda.memory._snapshot()
        from pickle import dump

        snapshot_path = f"SNAPSHOT_DIR/memory_snapshot_rank{torch.distributed.get_rank()}.pickle"
        with open(snapshot_path, "wb") as f:
            dump(snapshot, f)
        print(f"[rank={torch.distributed.get_rank()}] Memory snapshot saved to {snapshot_path}")
        if _mem_history:
            torch.cuda.memory._record_memory_history(enabled=None)
    raise

# block: after_step
if _mem_snapshot:
    snapshot = torch.cuda.memory._snapshot()
    from pickle import dump

    snapshot_path = (
        f"SNAPSHOT_DIR/memory_snapshot_rank{torch.distributed.get_rank()}_step{STEP}.pickle"
    )
    with open(snapshot_path, "wb") as f:
        dump(snapshot, f)
    print(f"[rank={torch.distributed.get_rank()}] Memory snapshot saved to {snapshot_path}")
    if _mem_history:
        torch.cuda.memory._record_memory_history(enabled=None)

if _mem_profile:
    if hasattr(model, "memory_profiling"):
        model.memory_profiling = False
