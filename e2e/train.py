#!/usr/bin/env python3
"""End-to-end launcher for PithTrain runs on the GPU machine (our own script, not PithTrain's).

Builds a PretrainLMCfg for one of the presets below and calls PithTrain's ``launch``. PithTrain
itself is not edited: before ``launch``, ``DualPipeV.step`` is wrapped (monkeypatched on the
class) so the per-micro-batch loss sums it returns on pipeline rank 0 are printed as
``float.hex``:

    E2E_LOSS_SUMS step0 0x1.0a3c...p+12 0x1.09f2...p+12 ...   (one value per micro-batch)

Those are bit-identical between an uninstrumented and an instrumented tree (GPU.md). PithTrain
logs the per-step time itself on rank 0 (``step 00000001/... | step-time 1.234 sec | ...``).

At start every rank prints its GPU's capacity (what a what-if check compares against):

    E2E_GPU total_memory_bytes=<get_device_properties.total_memory> mem_get_info=<free>,<total>
            rank=<R> device=<local rank> name=<device name>

and after each step rank 0 prints the exact bytes behind PithTrain's 2-decimal step line (the
allocator's peaks since PithTrain's per-step ``reset_peak_memory_stats``; training.step is the
step line's number):

    E2E_MEM step=<N> max_allocated_bytes=<B> max_reserved_bytes=<B> reserved_bytes=<B>

Run under torchrun (see run_remote.sh), with the PithTrain tree to test first on PYTHONPATH:
    train.py --variant qwen3-tiny --data-dir /tmp/e2e_data/qwen3-tiny [--max-steps N]
             [--save-interval K --save-location DIR] [--seq S --micro-batch M --global-batch G]
Without torchrun, ``--make-dataset DIR`` writes the run's synthetic dataset (stdlib only), and
``--dataset-name`` prints the folder name run_remote.sh keeps that dataset under: the variant
alone for a preset's own shape (a dataset of max(32, max_steps) steps), else
``<variant>-s<seq>-n<samples>`` (exactly max_steps x global batch samples of that length:
PithTrain caches its shuffled indices beside the shards, so each shape gets a folder of its own).
"""

import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# name: (config, sequence_length, micro_batch_size, global_batch_size, pp, default max_steps)
# pp is what two GPUs run; on one GPU main() drops it to the world size (E2E_WARN line).
PRESETS = {
    "qwen3-tiny": ("configs/qwen3-moe-tiny.json", 512, 2, 16, 2, 3),
    "qwen3-big": ("configs/qwen3-moe-big.json", 4096, 1, 16, 2, 14),
    "dsv2-tiny": ("configs/deepseek-v2-tiny.json", 512, 2, 16, 2, 3),
    "gpt-oss-tiny": ("configs/gpt-oss-tiny.json", 512, 2, 16, 2, 3),
}
DATASET_STEPS = 32  # the synthetic dataset covers this many steps of any preset


def preset(name: str) -> dict:
    cfg, seq, mb, gb, pp, steps = PRESETS[name]
    path = HERE / cfg
    model = json.loads(path.read_text())
    return dict(config=path, seq=seq, mb=mb, gb=gb, pp=pp, steps=steps, model=model)


def shaped(p: dict, args) -> bool:
    """Apply --seq/--micro-batch/--global-batch to the preset p; True if any differs from it."""
    changed = False
    for key, value in (("seq", args.seq), ("mb", args.micro_batch), ("gb", args.global_batch)):
        if value is not None and value != p[key]:
            p[key] = value
            changed = True
    return changed


def dataset_plan(variant: str, p: dict, max_steps: int, changed: bool) -> tuple:
    """(folder name, samples) of the synthetic dataset of a run (see the module docstring)."""
    if not changed:
        return variant, max(DATASET_STEPS, max_steps) * p["gb"]
    samples = max_steps * p["gb"]
    return "%s-s%d-n%d" % (variant, p["seq"], samples), samples


def num_chunks(gb: int, mb: int, dp: int, ep: int) -> int:
    """Micro-batches per step on pipeline rank 0 (DualPipeV needs >= 2 * pp)."""
    assert gb % (mb * dp * ep) == 0, (gb, mb, dp, ep)
    return gb // (mb * dp * ep)


def parse_steps(text: str) -> set:
    return {int(s) for s in text.split(",") if s.strip()}


def build_cfg(args, p: dict):
    from pithtrain.modules.training import (
        make_adamw_optimizer,
        make_constant_scheduler,
        make_muon_optimizer,
    )
    from pithtrain.tasks.pretrain_lm import PretrainLMCfg

    cfg = PretrainLMCfg()
    d = cfg.distributed
    d.pipeline_parallel_size = p["pp"]
    d.expert_parallel_size = 1
    d.context_parallel_size = 1

    t = cfg.training
    t.model = p["config"]
    t.optimizer = make_muon_optimizer if args.optimizer == "muon" else make_adamw_optimizer
    t.scheduler = make_constant_scheduler
    t.lr = 3.0e-4
    t.seed = args.seed
    t.max_steps = args.max_steps
    t.micro_batch_size = p["mb"]
    t.global_batch_size = p["gb"]
    t.sequence_length = p["seq"]
    t.dataset = Path(args.data_dir)
    t.moe_load_balance_coef = 0.0
    t.fp8 = False
    t.save_interval = args.save_interval
    t.save_location = Path(args.save_location) if args.save_location else None
    return cfg


def install_loss_probe(print_steps: set) -> None:
    """Wrap DualPipeV.step to print the step's per-micro-batch loss sums (pp rank 0 only)."""
    from pithtrain.contexts import training
    from pithtrain.dualpipe.dualpipev import DualPipeV

    original = DualPipeV.step
    state = {"first": True}
    rank0 = int(os.environ.get("RANK", "0")) == 0  # pp rank 0; with dp > 1 print one replica

    def step(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        loss = result[0]
        first, state["first"] = state["first"], False
        if loss is not None and rank0 and (first or training.step in print_steps):
            values = loss.detach().reshape(-1).tolist()  # exact: fp32/bf16 -> Python float
            hexes = " ".join(float.hex(float(v)) for v in values)
            print("E2E_LOSS_SUMS step%d %s" % (training.step, hexes), flush=True)
            print("E2E_LOSS_DTYPE step%d %s n=%d" % (training.step, loss.dtype, len(values)),
                  flush=True)
        return result

    step.__wrapped__ = original
    DualPipeV.step = step


def print_gpu(rank: int) -> None:
    """The GPU's capacity, from torch and from the driver (cudaMemGetInfo), on this rank's device."""
    import torch

    device = int(os.environ.get("LOCAL_RANK", "0"))
    props = torch.cuda.get_device_properties(device)
    free, total = torch.cuda.mem_get_info(device)
    print("E2E_GPU total_memory_bytes=%d mem_get_info=%d,%d rank=%d device=%d name=%s"
          % (props.total_memory, free, total, rank, device, props.name), flush=True)


def install_mem_probe() -> None:
    """Wrap pretrain_lm.train_step to print the exact peaks of each step on rank 0 (E2E_MEM)."""
    import torch
    from pithtrain.contexts import training
    from pithtrain.tasks import pretrain_lm

    original = pretrain_lm.train_step
    rank0 = int(os.environ.get("RANK", "0")) == 0

    def train_step(*args, **kwargs):
        result = original(*args, **kwargs)
        if rank0:  # training.step was incremented: it is now the step line's number
            print("E2E_MEM step=%d max_allocated_bytes=%d max_reserved_bytes=%d reserved_bytes=%d"
                  % (training.step, torch.cuda.max_memory_allocated(),
                     torch.cuda.max_memory_reserved(), torch.cuda.memory_reserved()), flush=True)
        return result

    train_step.__wrapped__ = original
    pretrain_lm.train_step = train_step


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="PithTrain e2e launcher")
    ap.add_argument("--variant", choices=sorted(PRESETS), required=True)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--make-dataset", metavar="DIR", default=None,
                    help="write the preset's synthetic dataset to DIR and exit (no torch)")
    ap.add_argument("--max-steps", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--save-interval", type=int, default=None)
    ap.add_argument("--save-location", default=None)
    ap.add_argument("--optimizer", choices=("muon", "adamw"), default="muon")
    ap.add_argument("--pp", type=int, default=None,
                    help="pipeline-parallel size (default: the preset's, capped at WORLD_SIZE)")
    ap.add_argument("--loss-steps", default="0",
                    help="steps whose loss sums are printed (the process's first step always is)")
    ap.add_argument("--seq", type=int, default=None, help="sequence length (default: preset's)")
    ap.add_argument("--micro-batch", type=int, default=None,
                    help="micro-batch size (default: the preset's)")
    ap.add_argument("--global-batch", type=int, default=None,
                    help="global batch size (default: the preset's)")
    ap.add_argument("--dataset-name", action="store_true",
                    help="print the dataset folder name of this run and exit (no torch)")
    args = ap.parse_args(argv)
    p = preset(args.variant)
    if args.max_steps is None:
        args.max_steps = p["steps"]
    changed = shaped(p, args)
    if p["seq"] % 2:
        ap.error("--seq must be even")
    dataset_name, samples = dataset_plan(args.variant, p, args.max_steps, changed)

    if args.dataset_name:
        print(dataset_name)
        return 0

    if args.make_dataset:
        sys.path.insert(0, str(HERE))
        from make_dataset import make_dataset

        make_dataset(Path(args.make_dataset), p["model"]["vocab_size"], p["seq"], samples,
                     args.seed)
        print("E2E_DATASET %s samples=%d seq=%d vocab=%d"
              % (args.make_dataset, samples, p["seq"], p["model"]["vocab_size"]))
        return 0

    if not args.data_dir:
        ap.error("--data-dir is required for training")

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.pp is not None:
        p["pp"] = args.pp
    elif world < p["pp"]:  # e.g. a one-GPU machine: pp=1 still runs DualPipeV's two chunks
        print("E2E_WARN WORLD_SIZE=%d < pp=%d: using pp=%d" % (world, p["pp"], world), flush=True)
        p["pp"] = world
    if world % p["pp"]:
        raise SystemExit("WORLD_SIZE=%d is not a multiple of pp=%d" % (world, p["pp"]))
    dp = world // p["pp"]
    chunks = num_chunks(p["gb"], p["mb"], dp, 1)
    if chunks < 2 * p["pp"]:
        raise SystemExit("num_chunks=%d < 2*pp=%d" % (chunks, 2 * p["pp"]))

    import pithtrain
    import torch
    from pithtrain.tasks.pretrain_lm import launch

    rank = int(os.environ.get("RANK", "0"))
    print_gpu(rank)
    install_loss_probe(parse_steps(args.loss_steps))
    install_mem_probe()
    cfg = build_cfg(args, p)
    if rank == 0:
        info = dict(variant=args.variant, model_type=p["model"]["model_type"],
                    num_layers=p["model"]["num_hidden_layers"],
                    first_k_dense_replace=p["model"].get("first_k_dense_replace", 0),
                    pp=p["pp"], dp=dp, world=world, micro_batch=p["mb"], global_batch=p["gb"],
                    num_chunks=chunks, seq=p["seq"], max_steps=args.max_steps, seed=args.seed,
                    save_interval=args.save_interval, save_location=args.save_location,
                    optimizer=args.optimizer, pithtrain=os.path.dirname(pithtrain.__file__),
                    torch=torch.__version__)
        print("E2E_CONFIG " + json.dumps(info, sort_keys=True), flush=True)
    launch(cfg)
    from pithtrain.contexts import training

    print("E2E_DONE rank=%d step=%d" % (rank, training.step), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
