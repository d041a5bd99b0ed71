#!/usr/bin/env python3
"""The measured figures of the what-if runs (issue 22) as a markdown table (stdlib only).

    python3 e2e/whatif_summary.py LOG [LOG ...] [--estimates DIR] [--json]

Each LOG is one run's log (raw or kept by keep_results.sh; `.log.gz` too). Per run:
- the shape, from the log's own E2E_CONFIG line: seq, micro-batch, global batch, num_chunks,
  max_steps (and the E2E_RUN line's train.py options);
- PithTrain's step lines (`step N/M | ... | peak-gpu-memory X GB`, X = max_memory_allocated /
  2**30 since the step's reset_peak_memory_stats): step 1's peak (no optimizer state yet) and
  the steady-state peak, the highest of steps >= 2;
- the same in exact bytes where train.py printed E2E_MEM lines (max_allocated, max_reserved);
- the GPU's capacity from the E2E_GPU line;
- an OOM: PyTorch's message (`torch.OutOfMemoryError: CUDA out of memory. Tried to allocate X.
  GPU 0 has a total capacity of C of which F is free. ... this process has U memory in use. Of
  the allocated memory A is allocated by PyTorch, and R is reserved by PyTorch but
  unallocated.`) parsed into its figures, and the last memory print (`[rank=0...] ...`) before
  it: where in the step the run was when it failed.
With --estimates DIR, PithTrain's estimator output `DIR/estimate-s<seq>-mb<mb>.txt` of the same
shape (whatif_estimates.sh) adds its TOTAL and its estimated peak of model tensors.
"""

import argparse
import gzip
import json
import re
import statistics
import sys
from pathlib import Path

STEP = re.compile(r"\| step (\d+)/(\d+) \| step-time ([0-9.]+) sec \|.*"
                  r"peak-gpu-memory ([0-9.]+) GB")
MEM = re.compile(r"E2E_MEM step=(\d+) max_allocated_bytes=(\d+) max_reserved_bytes=(\d+)")
GPU = re.compile(r"E2E_GPU total_memory_bytes=(\d+) mem_get_info=(\d+),(\d+)")
SIZE = r"([0-9.]+ [KMGT]?i?B)"
OOM = re.compile(r"torch\.OutOfMemoryError: CUDA out of memory\. Tried to allocate " + SIZE
                 + r"\. GPU (\d+) has a total capacity of " + SIZE + r" of which " + SIZE
                 + r" is free\. (?:Process \d+ has " + SIZE + r" memory in use\. )?"
                 r"Including non-PyTorch memory, this process has " + SIZE
                 + r" memory in use\. Of the allocated memory " + SIZE
                 + r" is allocated by PyTorch, and " + SIZE
                 + r" is reserved by PyTorch but unallocated\.")
PRINT = re.compile(r"\[rank=0[^\]]*\] (.*)")
UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def read_lines(path: Path) -> list:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def size_bytes(text: str) -> int:
    value, unit = text.split()
    return int(float(value) * UNITS[unit])


def parse(path: Path) -> dict:
    lines = read_lines(path)
    r = dict(file=path.name, steps={}, mem={}, gpu=None, oom=None, config={}, args="",
             last_print=None, finished=False, rc=None)
    last_print = None
    for line in lines:
        if line.startswith("E2E_CONFIG "):
            r["config"] = json.loads(line[len("E2E_CONFIG "):])
        elif line.startswith("E2E_RUN "):
            r["args"] = line.split(" args=", 1)[1] if " args=" in line else ""
        elif line.startswith("E2E_DONE "):
            r["finished"] = True
        elif line.startswith("E2E_END "):
            m = re.search(r" rc=(\d+)", line)
            r["rc"] = int(m.group(1)) if m else None
        m = STEP.search(line)
        if m:
            r["steps"][int(m.group(1))] = (float(m.group(4)), float(m.group(3)))
            r["max_steps"] = int(m.group(2))
        m = MEM.search(line)
        if m:
            r["mem"][int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
        m = GPU.search(line)
        if m and r["gpu"] is None:
            r["gpu"] = dict(total_memory_bytes=int(m.group(1)), free=int(m.group(2)),
                            total=int(m.group(3)))
        m = OOM.search(line)
        if m and r["oom"] is None:
            names = ("tried", "capacity", "free", "other", "in_use", "allocated", "reserved_free")
            figures = dict(zip(names, (m.group(1), m.group(3), m.group(4), m.group(5),
                                       m.group(6), m.group(7), m.group(8))))
            r["oom"] = dict(device=int(m.group(2)), last_print=last_print,
                            message=line[line.index("torch.OutOfMemoryError"):],
                            **{k: v for k, v in figures.items() if v is not None},
                            **{k + "_bytes": size_bytes(v) for k, v in figures.items()
                               if v is not None})
        elif "torch.OutOfMemoryError" in line and r["oom"] is None:
            r["oom"] = dict(message=line[line.index("torch.OutOfMemoryError"):],
                            last_print=last_print, unparsed=True)
        m = PRINT.search(line)
        if m:
            last_print = m.group(1).strip()
    steps = r["steps"]
    r["step1_peak_gib"] = steps[1][0] if 1 in steps else None
    steady = [peak for s, (peak, _) in steps.items() if s >= 2]
    r["steady_peak_gib"] = max(steady) if steady else None
    r["steady_step"] = max((s for s in steps if s >= 2), key=lambda s: steps[s][0], default=None)
    exact = [(b, s) for s, (b, _) in r["mem"].items() if s >= 2]
    r["steady_peak_bytes"] = max(exact)[0] if exact else None
    r["steady_reserved_bytes"] = max((res for s, (_, res) in r["mem"].items() if s >= 2),
                                     default=None)
    r["step1_peak_bytes"] = r["mem"][1][0] if 1 in r["mem"] else None
    times = [t for s, (_, t) in steps.items() if s >= 2]
    r["median_step_time"] = statistics.median(times) if times else None
    return r


def estimate(dirpath: Path, seq, mb) -> dict:
    path = dirpath / ("estimate-s%s-mb%s.txt" % (seq, mb))
    if not path.is_file():
        return {}
    text = path.read_text()
    out = {"file": path.name}
    m = re.search(r"Estimated peak \(model tensors\)\s+([0-9.]+) GB", text)
    if m:
        out["model_tensors_gb"] = float(m.group(1))
    m = re.search(r"^\s*TOTAL\s+([0-9.]+) GB", text, re.M)
    if m:
        out["total_gb"] = float(m.group(1))
    m = re.search(r"STATUS: (\w+)", text)
    if m:
        out["status"] = m.group(1)
    m = re.search(r'Peak at: event #\d+ "([^"]+)"', text)
    if m:
        out["peak_at"] = m.group(1)
    return out


def fmt(v, spec="%.2f"):
    return "-" if v is None else spec % v


def table(runs: list) -> str:
    out = ["| log | seq | micro-batch | global batch | num_chunks | steps run | step-1 peak (GiB) "
           "| steady peak, steps >= 2 (GiB) | steady peak (bytes, E2E_MEM) | max reserved, "
           "steps >= 2 (bytes) | median step time (s) | OOM | PithTrain estimator: model "
           "tensors / TOTAL (GB) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        c = r["config"]
        est = r.get("estimate") or {}
        est_text = ("%s / %s %s" % (fmt(est.get("model_tensors_gb")), fmt(est.get("total_gb")),
                                    est.get("status", "")) if est else "-")
        oom = r["oom"]
        if oom and not oom.get("unparsed"):
            oom_text = ("yes: tried %s; capacity %s, free %s, in use %s, allocated %s, "
                        "reserved-unallocated %s" % (oom["tried"], oom["capacity"], oom["free"],
                                                     oom["in_use"], oom["allocated"],
                                                     oom["reserved_free"]))
        elif oom:
            oom_text = "yes (message not parsed)"
        else:
            oom_text = "no"
        out.append("| `%s` | %s | %s | %s | %s | %d/%s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["file"], c.get("seq", "-"), c.get("micro_batch", "-"), c.get("global_batch", "-"),
            c.get("num_chunks", "-"), len(r["steps"]), c.get("max_steps", "-"),
            fmt(r["step1_peak_gib"]), fmt(r["steady_peak_gib"]),
            fmt(r["steady_peak_bytes"], "%d"), fmt(r["steady_reserved_bytes"], "%d"),
            fmt(r["median_step_time"], "%.3f"), oom_text, est_text))
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("logs", nargs="+", type=Path)
    ap.add_argument("--estimates", type=Path, default=None)
    ap.add_argument("--json", action="store_true", help="print the parsed runs as JSON")
    a = ap.parse_args(argv)
    runs = []
    for path in a.logs:
        r = parse(path)
        if a.estimates:
            r["estimate"] = estimate(a.estimates, r["config"].get("seq"),
                                     r["config"].get("micro_batch"))
        runs.append(r)
    runs.sort(key=lambda r: (r["oom"] is not None, r["config"].get("micro_batch", 0),
                             r["config"].get("seq", 0)))
    if a.json:
        print(json.dumps(runs, indent=1, sort_keys=True, default=str))
        return 0
    print(table(runs))
    gpus = {json.dumps(r["gpu"], sort_keys=True) for r in runs if r["gpu"]}
    for g in sorted(gpus):
        g = json.loads(g)
        print("\nGPU (E2E_GPU): total_memory %d bytes (%.2f GiB); cudaMemGetInfo at start: free %d, "
              "total %d bytes" % (g["total_memory_bytes"], g["total_memory_bytes"] / 2**30,
                                  g["free"], g["total"]))
    for r in runs:
        if r["oom"]:
            print("\nOOM of `%s`; the last memory print before it: `%s`\n\n    %s"
                  % (r["file"], r["oom"]["last_print"], r["oom"]["message"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
