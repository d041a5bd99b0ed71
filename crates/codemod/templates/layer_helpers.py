# Group 1B: per-layer helpers for pithtrain/dualpipe/execution.py, after the module's imports.
# RANKS: the set literal of the global ranks that print.
# placeholders: RANKS

# block: module_helpers
# -- Per-layer activation profiling --
_layer_mem_profile = False
_layer_mem_ranks = RANKS


class _SavedTensorsProfiler:
    """Context manager that logs tensors saved by autograd, distinguishing weights from activations."""

    def __init__(self, layer, stage_name: str):
        self._layer = layer
        self._layer_idx = layer.idx
        self._stage_name = stage_name
        self._log: list[str] = []
        self._act_bytes = 0
        self._wt_bytes = 0

    @staticmethod
    def _storage_ptr(t) -> int:
        """Return the address of t's storage, 0 for a tensor without one."""
        try:
            return t.untyped_storage().data_ptr()
        except (AttributeError, NotImplementedError, RuntimeError, TypeError):
            return 0

    def _weight_storages(self) -> set:
        """Return the storages of the layer's parameters as they are now (sharded or gathered)."""
        ptrs = set()
        for p in self._layer.parameters():
            ptrs.add(self._storage_ptr(p))
            local = getattr(p, "_local_tensor", None)  # a DTensor's shard
            if local is not None:
                ptrs.add(self._storage_ptr(local))
        ptrs.discard(0)
        return ptrs

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        nbytes = t.nelement() * t.element_size()
        is_wt = self._storage_ptr(t) in self._weight_storages()
        tag = "weight" if is_wt else "activ"
        self._log.append(
            f"    saved ({tag}): {tuple(t.shape)} {t.dtype} "
            f"({nbytes / 1024**2:.1f} MB, {nbytes} bytes)"
        )
        if is_wt:
            self._wt_bytes += nbytes
        else:
            self._act_bytes += nbytes
        return t

    def __enter__(self):
        self._ctx = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)
        self._ctx.__enter__()
        return self

    def __exit__(self, *args):
        self._ctx.__exit__(*args)

    def print_summary(self):
        rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
        if rank not in _layer_mem_ranks:
            return
        hdr = f"layer{self._layer_idx} {self._stage_name} saved tensors"
        print(f"[rank={rank}] {hdr}:", flush=True)
        for line in self._log:
            print(f"[rank={rank}] {line}", flush=True)
        act, wt = self._act_bytes, self._wt_bytes
        print(
            f"[rank={rank}]   activ={act / 1024**2:.1f} MB ({act} bytes), "
            f"weight={wt / 1024**2:.1f} MB ({wt} bytes), "
            f"total={len(self._log)} tensors",
            flush=True,
        )


def _lmem(label: str) -> None:
    """Print memory at a layer-internal checkpoint."""
    if not _layer_mem_profile:
        return
    rank = torch.distributed.get_rank() if torch.distributed.is_initialized() else 0
    if rank not in _layer_mem_ranks:
        return
    torch.cuda.synchronize()
    alloc = torch.cuda.memory_allocated() / 1024**3
    print(f"[rank={rank}]   {label}: alloc={alloc:.2f}", flush=True)
