#!/usr/bin/env python3
"""A stand-in for torchrun + PithTrain, for dry runs of the device calls HERE (no GPU, no torch).

    E2E_DRY_RUN=1 E2E_TMP=/tmp/e2e-dry E2E_SNAPDIR=/tmp/e2e-dry \\
        E2E_TORCHRUN="python3 e2e/fake_torchrun.py" OUT=/tmp/e2e-dry/out \\
        bash e2e/device_call.sh matrix

run_remote.sh calls it exactly like torchrun (``--nproc-per-node=gpu ... e2e/train.py
--variant V --data-dir D [options]``). It prints what a one-GPU run prints, in the formats
check.py and keep_results.sh read: E2E_CONFIG, the step lines, E2E_LOSS_SUMS (the same per
variant, plain or instrumented, as on a real machine), and for an instrumented tree
(E2E_TREE) the memory prints of groups 2-5 and 7 in memprints' newer saved-tensor format, the
group-6 line after a checkpoint load, and a memory-snapshot pickle in E2E_SNAPDIR whose frames
name the machine paths. With --save-location it leaves checkpoint folders like PithTrain's.
FAKE_FAIL_TAG=<tag> makes that run fail (exit 1) with a Python error in its log.
--seq/--micro-batch/--global-batch change the shape as in train.py; the step lines' peak grows
with the tokens of a micro-batch (step 1 below the later steps, which hold optimizer state), and
a run whose micro-batch holds at least FAKE_OOM_TOKENS tokens (default 131072) fails in step 0's
first forward with PyTorch's whole OOM message (an instrumented tree also dumps a snapshot
without a step in its name, like the skill's group 7).
"""

import hashlib
import json
import os
import pickle
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import train  # noqa: E402  (the presets)
import tree_prints  # noqa: E402


def option(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def losses(variant, n):
    seed = int(hashlib.sha256(variant.encode()).hexdigest()[:8], 16)
    return [float.hex(4096.0 + (seed % 997) / 8 + k) for k in range(n)]


def layer_prints(layer):
    out = []
    for k in (1, 2, 3, 4, 5):
        if k in (1, 3, 5):
            out.append("[rank=0] layer%d stage%d saved tensors:" % (layer, k))
            out.append("[rank=0]     saved (activ): (2, 512, 256) torch.bfloat16 (0.5 MB, 524288 bytes)")
            weight = 131072 if k in (1, 3) else 0
            if weight:
                out.append("[rank=0]     saved (weight): (256, 256) torch.bfloat16 (0.1 MB, 131072 bytes)")
            out.append("[rank=0]   activ=0.5 MB (524288 bytes), weight=%.1f MB (%d bytes), "
                       "total=%d tensors" % (weight / 2**20, weight, 2 if weight else 1))
        out.append("[rank=0]   layer%d after stage%d (stage %d): alloc=0.08" % (layer, k, k))
    return out


def snapshot(tree, step):
    """A small snapshot dict with frames under every machine path keep_results.sh rewrites."""
    site = os.environ.get("E2E_SITE", "/tmp/site")
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/tmp/e2e_inductor")
    frames = [{"filename": "%s/pithtrain/models/x.py" % tree, "line": 1, "name": "forward"},
              {"filename": "%s/e2e/train.py" % os.getcwd(), "line": 2, "name": "main"},
              {"filename": "%s/flash_attn/cute/interface.py" % site, "line": 3, "name": "f"},
              {"filename": "%s/k3/abc.py" % inductor, "line": 4, "name": "call"},
              {"filename": "/usr/bin/python3.12", "line": 5, "name": "??"}]
    trace = [{"action": "alloc", "addr": 4096 * i, "size": 1 << 20, "stream": 0,
              "time_us": i, "frames": frames} for i in range(3)]
    return {"segments": [{"device": 0, "address": 0, "total_size": 4 << 20, "blocks": [],
                          "frames": frames}],
            "device_traces": [trace], "step": step}


def main(argv):
    args = argv[argv.index("e2e/train.py") + 1:]
    tag = os.environ.get("E2E_TAG", "")
    variant = option(args, "--variant")
    p = train.preset(variant)
    tree = os.environ.get("E2E_TREE", "")
    info = tree_prints.describe(tree) if tree else {"instrumented": False}
    instr = info.get("instrumented")
    max_steps = int(option(args, "--max-steps", p["steps"]))
    seq = int(option(args, "--seq", p["seq"]))
    mb = int(option(args, "--micro-batch", p["mb"]))
    gb = int(option(args, "--global-batch", p["gb"]))
    tokens = seq * mb
    oom = tokens >= int(os.environ.get("FAKE_OOM_TOKENS", "131072"))
    save = option(args, "--save-location")
    interval = int(option(args, "--save-interval", "0") or 0)
    snapdir = os.environ.get("E2E_SNAPDIR", "/tmp")
    lines = ["E2E_WARN WORLD_SIZE=1 < pp=%d: using pp=1" % p["pp"],
             "E2E_GPU total_memory_bytes=150754820096 mem_get_info=150164406272,150754820096 "
             "rank=0 device=0 name=NVIDIA H200"]
    cfg = dict(variant=variant, model_type=p["model"]["model_type"], pp=1, world=1, dp=1,
               num_layers=p["model"]["num_hidden_layers"], num_chunks=gb // mb, seq=seq,
               micro_batch=mb, global_batch=gb,
               first_k_dense_replace=p["model"].get("first_k_dense_replace", 0),
               max_steps=max_steps, pithtrain=tree + "/pithtrain")
    lines.append("E2E_CONFIG " + json.dumps(cfg, sort_keys=True))
    if instr:
        lines += ["[rank=0] init_process_group | cuda_ctx=0.51 after_nccl_world=1.15 nccl_world_cost=0.63",
                  "[rank=0] init_device_mesh | non-pt=1.15 mesh_cost=0.00",
                  "[rank=0] setup_model | before model creation: alloc=0.00 cached=0.00 non-pt=1.15",
                  "[rank=0] setup_model | after apply_fsdp: alloc=0.02 cached=0.02 non-pt=1.15"]
    lines.append("INFO | launch(cfg=PretrainLMCfg(dataset=PosixPath('%s'), save_location=%s))"
                 % (option(args, "--data-dir"), save))
    start = 0
    ckpts = sorted(Path(save, "torch-dcp").glob("step-*")) if save else []
    if ckpts:
        start = int(ckpts[-1].name.split("-")[1])
        if instr:
            lines.append("[rank=0] load_ckpt | optimizer state: 0.00 GiB (51 param entries) | "
                         "alloc=0.02 cached=0.02 non-pt=1.15")
    else:
        lines.append("INFO | No checkpoint found; training from scratch.")
    if tag and tag == os.environ.get("FAKE_FAIL_TAG"):
        lines += ["[rank0]: Traceback (most recent call last):",
                  "[rank0]: RuntimeError: fake failure of %s" % tag]
        print("\n".join(lines), flush=True)
        return 1
    if oom:
        lines += ["[rank0]: Traceback (most recent call last):",
                  "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. "
                  "GPU 0 has a total capacity of 139.81 GiB of which 3.06 GiB is free. Including "
                  "non-PyTorch memory, this process has 136.73 GiB memory in use. Of the allocated "
                  "memory 131.50 GiB is allocated by PyTorch, and 4.20 GiB is reserved by PyTorch "
                  "but unallocated. If reserved but unallocated memory is large try setting "
                  "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
                  "documentation for Memory Management  "
                  "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"]
        if instr:
            path = Path(snapdir, "memory_snapshot_rank0.pickle")
            path.write_bytes(pickle.dumps(snapshot(tree, start), protocol=4))
            lines.append("[rank=0] Memory snapshot saved to %s" % path)
        print("\n".join(lines), flush=True)
        return 1
    if instr:
        lines.append("[rank=0 pp=0] Before pipeline: 0.02 GiB | alloc=0.02 cached=0.02 non-pt=1.15")
        lines.append("%s/flash_attn/cute/x.py:1: UserWarning: in %s/pithtrain/models/y.py"
                     % (os.environ.get("E2E_SITE", "/tmp/site"), tree))
        for layer in info.get("detail_layers") or ():
            lines += layer_prints(layer)
        lines.append("[rank=0 pp=0] After Step8 (end of pipeline): 0.12 GiB | alloc=0.12 cached=0.02 non-pt=1.15")
        path = Path(snapdir, "memory_snapshot_rank0_step%d.pickle" % start)
        path.write_bytes(pickle.dumps(snapshot(tree, start), protocol=4))
        lines.append("[rank=0] Memory snapshot saved to %s" % path)
    loss_steps = {int(x) for x in option(args, "--loss-steps", "0").split(",")} | {start}
    for s in range(start + 1, max_steps + 1):
        if s - 1 in loss_steps:  # train.py prints the sums of training.step s - 1
            sums = losses(variant + str(s - 1), cfg["num_chunks"])
            lines.append("E2E_LOSS_SUMS step%d %s" % (s - 1, " ".join(sums)))
            lines.append("E2E_LOSS_DTYPE step%d torch.float32 n=%d" % (s - 1, len(sums)))
        peak = 0.18 + tokens / 2**14 + (0.25 if s > 1 else 0.0)  # GiB: activations, optimizer
        lines.append("2026-12-02 00:00:%02d | INFO | step %08d/%08d | step-time %.3f sec | "
                     "peak-gpu-memory %.2f GB" % (s, s, max_steps, 9.0 if s == start + 1 else 0.2,
                                                  peak))
        lines.append("E2E_MEM step=%d max_allocated_bytes=%d max_reserved_bytes=%d "
                     "reserved_bytes=%d" % (s, peak * 2**30, peak * 2**30 + 2**26,
                                            peak * 2**30 + 2**25))
        if save and ((interval and s % interval == 0) or s == max_steps):
            Path(save, "torch-dcp", "step-%08d" % s).mkdir(parents=True, exist_ok=True)
    lines.append("E2E_DONE rank=0 step=%d" % max_steps)
    print("\n".join(lines), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
