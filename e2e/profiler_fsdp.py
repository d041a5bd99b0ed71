#!/usr/bin/env python3
"""The saved-tensor profiler of crates/codemod/templates/layer_helpers.py on real torch, under FSDP2 (GPU machine).

One process, one GPU: a small layer (RMSNorm, a Linear, an expert weight used through a
transposed view) is `fully_shard`ed, so its weights are gathered only when the forward runs.
The profiler is run around the forward as layer_forward runs it, and prints its summary; then
the same forward runs without it, and the loss and every gradient must be bit-identical
(observation only). Exit 0 when they are.

    python3 e2e/profiler_fsdp.py crates/codemod/templates/layer_helpers.py [OLD_LAYER_HELPERS.py]

An older template (whose profiler takes `(layer.idx, stage, pointers)`, the pointers collected
before the forward) given second is run first, for comparison. On 2026-12-01 (one H200, torch
2.11.0+cu130) the old one called all 8 saved tensors activations (weight=0.0 MB); the new one
found the three weights, views included: weight=0.6 MB (590336 bytes), bit-identical: True.
"""

import os
import sys

import torch
import torch.distributed as dist


def load(path):
    """The `_SavedTensorsProfiler` class of a layer_helpers template, printing on rank 0."""
    text = open(path).read().split("# block: module_helpers\n", 1)[1].replace("RANKS", "{0}")
    namespace = {"torch": torch}
    exec(text, namespace)
    return namespace["_SavedTensorsProfiler"]


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.idx = 0
        self.norm = torch.nn.RMSNorm(256)
        self.k_proj = torch.nn.Linear(256, 128, bias=False)
        self.experts = torch.nn.Parameter(torch.randn(8, 256, 128) * 0.02)

    def forward(self, x):
        h = self.k_proj(self.norm(x)).unsqueeze(0).expand(8, -1, -1)
        return torch.bmm(h, self.experts.transpose(1, 2)).float().square().mean()


def run(mesh, profiler=None, old=False):
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    layer = Layer().cuda().to(torch.bfloat16)
    fully_shard(layer, mesh=mesh)
    x = torch.randn(512, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    if profiler is None:
        loss = layer(x)
    else:
        if old:
            prof = profiler(layer.idx, "stage1", {p.data_ptr() for p in layer.parameters()})
        else:
            prof = profiler(layer, "stage1")
        with prof:
            loss = layer(x)
        prof.print_summary()
    loss.backward()
    return [loss.detach()] + [p.grad.full_tensor() for p in layer.parameters()] + [x.grad]


def main(argv):
    if not 1 <= len(argv) <= 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533", RANK="0", WORLD_SIZE="1")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cuda", (1,))
    if len(argv) == 2:
        print("== old profiler: pointers collected before FSDP gathers", flush=True)
        run(mesh, load(argv[1]), old=True)
    print("== profiler: the layer object, storages at pack time", flush=True)
    profiled = run(mesh, load(argv[0]))
    plain = run(mesh)
    same = all(torch.equal(a, b) for a, b in zip(profiled, plain))
    print("bit-identical:", same, flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
