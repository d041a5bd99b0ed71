#!/usr/bin/env python3
"""Times pairs of commands, alternating, and prints min/median/max wall time, peak RSS and the
ratio of the second to the first (used by `bench/report.sh`).

Each command's stdout goes to a file (not /dev/null: GNU grep stops at the first match when its
output is /dev/null). Peak RSS and CPU time (user + system, all threads) come from
`/usr/bin/time`, which runs the command (a fork of this harness would report its own RSS).

Usage: timeit.py --runs N [--max-rss-mib M] --case NAME TARGET BASELINE_CMD OURS_CMD [--case ...]
  TARGET: the ratio ours/baseline the case must stay under, or - for none.
  --max-rss-mib: the peak RSS ours must stay under in the cases that follow it (0: none).
  *_CMD: a shell-quoted command line (split with shlex, run without a shell).
"""

import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def run(argv, out_path):
    if not os.path.exists("/usr/bin/time"):
        return run_wait4(argv, out_path)
    stats = out_path + ".time"
    with open(out_path, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S", "-o", stats, *argv], stdout=out)
        wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{argv[0]} exited with {proc.returncode}")
    with open(stats) as f:
        rss_kib, user, system = f.read().split()[-3:]
    return wall, int(rss_kib) * 1024, float(user) + float(system)


def run_wait4(argv, out_path):
    """Without /usr/bin/time: the child's rusage (its peak RSS may include this harness's, as
    the child starts as a fork of it)."""
    with open(out_path, "wb") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{argv[0]} failed")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def mmm(values, fmt):
    return "min {}  median {}  max {}".format(
        *(fmt(v) for v in (min(values), statistics.median(values), max(values)))
    )


def main():
    args = sys.argv[1:]
    runs = 5
    cases = []
    max_rss = 0
    while args:
        flag = args.pop(0)
        if flag == "--runs":
            runs = int(args.pop(0))
        elif flag == "--max-rss-mib":
            max_rss = int(args.pop(0))
        elif flag == "--case":
            name, target, base, ours = args[:4]
            del args[:4]
            cases.append((name, target, shlex.split(base), shlex.split(ours), max_rss))
        else:
            sys.exit(f"unknown flag {flag}")
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out")
        for name, target, base, ours, max_rss in cases:
            # One untimed run each: page cache, binary in memory.
            run(base, out)
            run(ours, out)
            times = {"base": [], "ours": []}
            cpu = {"base": [], "ours": []}
            rss = {"base": 0, "ours": 0}
            for _ in range(runs):
                for key, argv in (("base", base), ("ours", ours)):
                    wall, peak, used = run(argv, out)
                    times[key].append(wall)
                    cpu[key].append(used)
                    rss[key] = max(rss[key], peak)
            ratios = [o / b for o, b in zip(times["ours"], times["base"])]
            load = os.getloadavg()
            print(f"== {name} ({runs} runs each, alternating; load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
            for key, argv in (("base", base), ("ours", ours)):
                label = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv))
                print(f"  {label}")
                print(f"    wall {mmm(times[key], lambda v: f'{v:.3f} s')}   peak RSS {rss[key] / 2**20:.1f} MiB")
                print(f"    cpu  {mmm(cpu[key], lambda v: f'{v:.2f} s')}")
            verdict = ""
            if target != "-":
                ok = statistics.median(ratios) <= float(target)
                verdict = f"   target <= {target}: {'met' if ok else 'NOT met'} (median)"
                if not ok:
                    failed.append(name)
            print(f"  ratio ours/base per pair: {mmm(ratios, lambda v: f'{v:.2f}')}{verdict}")
            if max_rss:
                ok = rss["ours"] < max_rss * 2**20
                print(f"  peak RSS {rss['ours'] / 2**20:.1f} MiB, limit {max_rss} MiB: {'met' if ok else 'NOT met'}")
                if not ok:
                    failed.append(f"{name} (RSS)")
    if failed:
        print(f"targets not met: {', '.join(failed)}")


if __name__ == "__main__":
    main()
