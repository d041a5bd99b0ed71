# Group 1A: pipeline helpers for pithtrain/dualpipe/dualpipev.py.
# module_helpers goes right before `class DualPipeV`; init_flag after `self.comm_stream = ...` in
# DualPipeV.__init__ (group 4 prints while it is on; group 7 switches it per step).
# placeholders: none

# block: module_helpers
def _mem_gb() -> float:
    """Return current CUDA memory allocated in GiB."""
    return torch.cuda.memory_allocated() / 1024**3


def _mem_detail() -> str:
    """Return allocated, cached-pool, and non-pytorch memory in GiB."""
    free, total = torch.cuda.mem_get_info()
    allocated = torch.cuda.memory_allocated()
    reserved = torch.cuda.memory_reserved()
    G = 1024**3
    cached = reserved - allocated
    non_pytorch = total - free - reserved
    return f"alloc={allocated / G:.2f} cached={cached / G:.2f} non-pt={non_pytorch / G:.2f}"


# block: init_flag
self.memory_profiling = True  # Set to True to enable per-step memory logging
