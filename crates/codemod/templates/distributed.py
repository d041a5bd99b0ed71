# Group 2: distributed set-up probes for pithtrain/modules/distributed.py.
# RANKS: the set literal of the global ranks that print. CTX: the distributed context object
# (`distributed` in PithTrain, `ctx` in the skill's text). SET_DEVICE: the statement that sets the
# CUDA device, moved here from below init_process_group (empty when it already comes first);
# moved_set_device is the marker left where it was, so `remove` can put it back. The
# init_process_group print also records the GPU's total memory (`_total`, read with the free
# memory before init_process_group): the capacity `memprints report` sets each rank's peak against.
# placeholders: RANKS CTX SET_DEVICE

# block: before_init_process_group
# Probe: isolate CUDA context cost from NCCL communicator init
SET_DEVICE
torch.cuda.synchronize()
_free0, _total = torch.cuda.mem_get_info()
_non_pt0 = _total - _free0
G = 1024**3

# block: after_init_process_group
torch.cuda.synchronize()
_free1, _ = torch.cuda.mem_get_info()
_non_pt1 = _total - _free1
if CTX.rank in RANKS:
    print(
        f"[rank={CTX.rank}] init_process_group | "
        f"cuda_ctx={_non_pt0 / G:.2f} "
        f"after_nccl_world={_non_pt1 / G:.2f} "
        f"nccl_world_cost={(_non_pt1 - _non_pt0) / G:.2f} "
        f"gpu_total={_total / G:.2f} ({_total} bytes)",
        flush=True,
    )

# block: moved_set_device
# memprints: set_device moved above init_process_group

# block: before_init_device_mesh
torch.cuda.synchronize()
_free_before, _total = torch.cuda.mem_get_info()
_non_pt_before = _total - _free_before

# block: after_init_device_mesh
torch.cuda.synchronize()
_free_after, _ = torch.cuda.mem_get_info()
_non_pt_after = _total - _free_after
G = 1024**3
if CTX.rank in RANKS:
    print(
        f"[rank={CTX.rank}] init_device_mesh | "
        f"non-pt={_non_pt_after / G:.2f} "
        f"mesh_cost={(_non_pt_after - _non_pt_before) / G:.2f}",
        flush=True,
    )
