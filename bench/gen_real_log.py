#!/usr/bin/env python3
"""Writes a node log of an instrumented PithTrain run, built from the kept real logs.

Used by `bench/report.sh`. The input is the real GPU logs under `tests/data/e2e/defaults-pp1/`
(one rank, pp=1, 3 steps each):

- the memory prints of `qwen3-tiny-pp1-instr.log`, re-ranked for `--world` ranks
  (`[rank=0 pp=0]` becomes `[rank=R pp=S]` with S = R % --pp; the snapshot path names rank R),
  interleaved line by line the way ranks in lockstep print;
- then their own non-print lines, repeated with growing step numbers until the log holds at
  least `--size-mib` MiB: the PithTrain lines of every kept log (step lines with all their
  fields, the `launch(cfg=...)` config dump, checkpoint lines), their warnings (the CUTLASS
  `UserWarning` pairs, Inductor's multi-line warning), and -- because none of the kept one-GPU
  logs has them -- the torchrun/NCCL launcher lines and a Python traceback of a multi-node
  launch, written here in their real formats. The E2E harness lines (`E2E_...`) are left out.

Step lines keep PithTrain's format; step-time, loss, gradient norm, tokens per second and
peak-gpu-memory vary deterministically from step to step (one step, near the end, is the peak).

`--profile dense` writes a print on (nearly) every line instead: the per-step prints of the
same log (from `Before pipeline` to `After Step8`, layer probes and saved tensors included),
re-ranked, repeated for every training step with the step line after them, as a run with
memory profiling left on at every step prints.

`--folder DIR --files N` writes N per-rank logs instead (`DIR/rank0000.log`, ...; world = N),
--size-mib MiB in all: each holds its rank's prints and the same non-print lines, but PithTrain's
INFO lines (the config dump, step and checkpoint lines) in rank 0's log only, as PithTrain's
logger writes them on rank 0 alone: the folder is one run of N ranks.

Usage: gen_real_log.py --size-mib N [--world 64] [--pp 8] [--profile realistic|dense]
                       [--folder DIR --files N] [--data tests/data/e2e/defaults-pp1] > node.log
"""

import argparse
import os
import re
import sys

KEPT = ["qwen3-tiny-pp1-instr.log", "dsv2-tiny-pp1-instr.log", "gpt-oss-tiny-pp1-instr.log",
        "qwen3-tiny-pp1-plain.log", "qwen3-tiny-pp1-resume.log"]

# Launcher and NCCL lines of a multi-node torchrun launch (formats of torch 2.x / NCCL 2.2x).
LAUNCHER = [
    "W1201 20:18:01.123000 4711 torch/distributed/run.py:792] ",
    "W1201 20:18:01.123000 4711 torch/distributed/run.py:792] *****************************************",
    "W1201 20:18:01.123000 4711 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid your system being overloaded, please further tune the variable for optimal performance in your application as needed. ",
    "W1201 20:18:01.123000 4711 torch/distributed/run.py:792] *****************************************",
    "node0:4712:4712 [0] NCCL INFO Bootstrap : Using ib0:10.10.0.1<0>",
    "node0:4712:4712 [0] NCCL INFO cudaDriverVersion 12080",
    "node0:4712:4712 [0] NCCL INFO NCCL version 2.27.3+cuda12.9",
    "node0:4712:4790 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB ib0:10.10.0.1<0>",
    "node0:4712:4790 [0] NCCL INFO Using network IB",
    "node0:4712:4790 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d3c0a1b2c0 rank 0 nranks 64 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9a3f1c2e7b6d5a41 - Init START",
    "node0:4712:4790 [0] NCCL INFO Setting affinity for GPU 0 to ffffffff,00000000,ffffffff",
    "node0:4712:4790 [0] NCCL INFO comm 0x55d3c0a1b2c0 rank 0 nRanks 64 nNodes 8 localRanks 8 localRank 0 MNNVL 0",
    "node0:4712:4790 [0] NCCL INFO Channel 00/16 :    0   7   6   5   4   3   2   1   9  15  14  13  12  11  10   8  17  23",
    "node0:4712:4790 [0] NCCL INFO Trees [0] 1/32/-1->0->-1 [1] 1/-1/-1->0->8 [2] 1/-1/-1->0->-1 [3] 1/-1/-1->0->-1",
    "node0:4712:4790 [0] NCCL INFO P2P Chunksize set to 131072",
    "node0:4712:4790 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
    "node0:4712:4790 [0] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",
    "node0:4712:4790 [0] NCCL INFO ncclCommInitRankConfig comm 0x55d3c0a1b2c0 rank 0 nranks 64 cudaDev 0 nvmlDev 0 busId 18000 commId 0x9a3f1c2e7b6d5a41 - Init COMPLETE",
    "node0:4712:4790 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 64 total 1.84 (kernels 0.21, alloc 0.02, bootstrap 0.88, allgathers 0.05, topo 0.43, graphs 0.03, connections 0.19, rest 0.03)",
]

# A worker's traceback as torchrun relays it (a rank that hit a data-loader error and was
# restarted by the elastic agent).
TRACEBACK = [
    "[rank5]: Traceback (most recent call last):",
    '[rank5]:   File "<tree>/examples/pretrain_language_model/train.py", line 88, in <module>',
    "[rank5]:     launch(cfg)",
    '[rank5]:   File "<tree>/pithtrain/tasks/pretrain_language_model.py", line 412, in launch',
    "[rank5]:     batch = next(loader)",
    '[rank5]:   File "<site>/torch/utils/data/dataloader.py", line 733, in __next__',
    "[rank5]:     data = self._next_data()",
    '[rank5]:   File "<site>/torch/utils/data/dataloader.py", line 1491, in _next_data',
    "[rank5]:     idx, data = self._get_data()",
    "[rank5]: RuntimeError: DataLoader worker (pid 4803) is killed by signal: Bus error. It is possible that dataloader is missing shared memory.",
    "E1201 20:31:07.000000 4711 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: 1) local_rank: 5 (pid: 4717) of binary: /usr/bin/python3",
    "W1201 20:31:07.000000 4711 torch/distributed/elastic/agent/server/api.py:719] [default] Worker group FAILED. 2/3 attempts left; will restart worker group",
]

STEP = re.compile(r"\| step (\d+)/(\d+) \|")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def is_print(line):
    return line.startswith("[rank=")


def rerank(lines, ranks, pp):
    """Each print line once per rank of `ranks`, in lockstep."""
    out = []
    for line in lines:
        for r in ranks:
            s = line.replace("[rank=0 pp=0]", f"[rank={r} pp={r % pp}]", 1)
            s = s.replace("[rank=0]", f"[rank={r}]", 1).replace("_rank0_", f"_rank{r}_")
            out.append(s)
    return out


def noise_block(data):
    """The non-print lines of the kept logs, without the harness's, as one block; and the
    template of their step line."""
    block, step_line = [], None
    for name in KEPT:
        for line in read(os.path.join(data, name)):
            if is_print(line) or line.startswith("E2E_"):
                continue
            if STEP.search(line):
                step_line = step_line or line
                block.append(None)  # a step line goes here
            else:
                block.append(line)
    return block, step_line


def step_text(template, step, max_steps):
    """`template` (a real step line) for `step`, with its figures varied."""
    h = (step * 2654435761) & 0xFFFFFFFF
    peak = 0.18 + (h % 300) / 10000 + (0.05 if step == max_steps - 7 else 0)
    fields = (
        f"step {step:08d}/{max_steps:08d}",
        f"step-time {0.2 + (h % 97) / 1000:.3f} sec",
        f"cross-entropy-loss {8.5 - step * 1e-6 + (h % 100) / 1e4:.4f}",
        "learning-rate 3.000000e-04",
        f"gradient-norm {80 + (h % 1000) / 100:.4f}",
        f"tokens-per-second {28000 + h % 9000:,}",
        f"peak-gpu-memory {peak:.2f} GB",
    )
    head = template.split(" | step ")[0]
    return head + " | " + " | ".join(fields)


def realistic(emit, written, prints, block, template, target, ranks, pp, steps=True):
    """The realistic log through `emit` until `written()` reaches `target` bytes."""
    emit(rerank(prints, ranks, pp))
    per_block = block.count(None)
    # Enough blocks for the size; the max step is known up front, as in PithTrain.
    block_bytes = sum(len(b or template) + 1 for b in block)
    max_steps = (target // block_bytes + 1) * per_block
    step = 0
    rep = 0
    while written() < target:
        lines = []
        for line in block:
            if line is None:
                step += 1
                if steps:
                    lines.append(step_text(template, step, max_steps))
            else:
                lines.append(line)
        if rep % 50 == 0:
            lines.extend(LAUNCHER[4:])
        if rep % 500 == 250:
            lines.extend(TRACEBACK)
        rep += 1
        emit(lines)
    return step


class Out:
    def __init__(self, stream):
        self.stream, self.bytes = stream, 0

    def emit(self, lines):
        data = ("\n".join(lines) + "\n").encode()
        self.stream.write(data)
        self.bytes += len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mib", type=int, required=True)
    ap.add_argument("--world", type=int, default=64)
    ap.add_argument("--pp", type=int, default=8)
    ap.add_argument("--profile", choices=["realistic", "dense"], default="realistic")
    ap.add_argument("--folder")
    ap.add_argument("--files", type=int, default=1024)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--data", default=os.path.join(here, "..", "tests", "data", "e2e", "defaults-pp1"))
    args = ap.parse_args()
    target = args.size_mib << 20
    source = read(os.path.join(args.data, KEPT[0]))
    prints = [line for line in source if is_print(line)]
    block, template = noise_block(args.data)

    if args.folder:
        os.makedirs(args.folder, exist_ok=True)
        total = 0
        for r in range(args.files):
            with open(os.path.join(args.folder, f"rank{r:04d}.log"), "wb") as f:
                out = Out(f)
                out.emit(LAUNCHER[:4] if r == 0 else LAUNCHER[4:6])
                # PithTrain's logger writes INFO lines (the config dump, step and checkpoint
                # lines) on rank 0 only: the other ranks' logs have warnings and prints.
                own = block if r == 0 else [l for l in block if l is not None and " | INFO | " not in l]
                realistic(out.emit, lambda: out.bytes, prints, own, template,
                          target // args.files, [r], args.pp, steps=r == 0)
                total += out.bytes
        print(f"gen_real_log: {args.files} files, {total} bytes", file=sys.stderr)
        return

    out = Out(sys.stdout.buffer)
    out.emit(LAUNCHER)
    if args.profile == "realistic":
        step = realistic(out.emit, lambda: out.bytes, prints, block, template, target,
                         range(args.world), args.pp)
    else:
        start = next(i for i, l in enumerate(prints) if "Before pipeline" in l)
        end = next(i for i, l in enumerate(prints) if "After Step8" in l)
        setup, per_step = prints[:start], prints[start:end + 1]
        out.emit(rerank(setup, range(args.world), args.pp))
        step_block = rerank(per_step, range(args.world), args.pp)
        block_bytes = sum(len(b) + 1 for b in step_block) + len(template) + 1
        max_steps = target // block_bytes + 1
        step = 0
        while out.bytes < target:
            step += 1
            out.emit(step_block + [step_text(template, step, max_steps)])
    sys.stdout.buffer.flush()
    print(f"gen_real_log: {out.bytes} bytes, {step} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
