# Group 6: checkpoint-load print in load_checkpoint (pithtrain/tasks/pretrain_lm.py).
# RANKS: the set literal of the global ranks that print. OPTIMIZERS: the iterable of optimizers
# (`optimizers` in PithTrain, which keeps a tuple; `(optimizer,)` where the code has a single one).
# dtensor_import is added only where the module does not import DTensor already.
# placeholders: RANKS OPTIMIZERS

# block: after_load
rank = torch.distributed.get_rank()
if rank in RANKS:
    torch.cuda.synchronize()
    optim_mem = sum(
        (s._local_tensor if isinstance(s, DTensor) else s).nelement()
        * (s._local_tensor if isinstance(s, DTensor) else s).element_size()
        for optimizer in OPTIMIZERS
        for state in optimizer.state.values()
        for s in state.values()
        if isinstance(s, torch.Tensor)
    )
    optim_entries = sum(len(optimizer.state) for optimizer in OPTIMIZERS)
    G = 1024**3
    alloc = torch.cuda.memory_allocated()
    reserved = torch.cuda.memory_reserved()
    free, total = torch.cuda.mem_get_info()
    cached = reserved - alloc
    non_pytorch = total - free - reserved
    print(
        f"[rank={rank}] load_ckpt | optimizer state: {optim_mem / G:.2f} GiB "
        f"({optim_entries} param entries) | "
        f"alloc={alloc / G:.2f} cached={cached / G:.2f} non-pt={non_pytorch / G:.2f}",
        flush=True,
    )

# block: dtensor_import
from torch.distributed.tensor import DTensor
