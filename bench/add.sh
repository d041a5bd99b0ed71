#!/usr/bin/env bash
# Times `memprints add qwen3-moe --ranks 3,14` on a real PithTrain export against
# `ruff format --check` on the same six files, in the same run: medians of N runs each, and the
# ratio. Every memprints run starts from a fresh copy of the export (the copy is not timed).
#
#   bench/add.sh PITHTRAIN_EXPORT [RUNS]
#
# memprints runs with --no-ruff: the in-process parse/format/reversibility checks are what it
# always does; the external ruff step is the skill's optional last step (timed separately below).
#
# Then `add` on a 1 MB target file (issue 12: add must be linear in file size): training.py of
# the export grown to 1 MB by a run of comment lines in its middle, one at its end and one of
# comments and blank lines, each timed (median of N) with the result checked (remove gives back
# the bytes). Target: under 1 s each.
set -euo pipefail
cd "$(dirname "$0")/.."
export_dir=${1:?usage: bench/add.sh PITHTRAIN_EXPORT [RUNS]}
runs=${2:-15}
cargo build --release --quiet
command -v ruff >/dev/null || { echo "bench/add.sh: ruff must be on PATH (pip install ruff==0.15.0)" >&2; exit 2; }
python3 - "$export_dir" "$runs" "$PWD/target/release/memprints" <<'PY'
import shutil, statistics, subprocess, sys, tempfile, time
src, runs, memprints = sys.argv[1], int(sys.argv[2]), sys.argv[3]
six = ["pithtrain/dualpipe/execution.py", "pithtrain/dualpipe/dualpipev.py", "pithtrain/models/qwen3_moe.py",
       "pithtrain/modules/distributed.py", "pithtrain/modules/training.py", "pithtrain/tasks/pretrain_lm.py"]

def timed(cmd, cwd):
    t0 = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0

add, add_ruff, ruff = [], [], []
with tempfile.TemporaryDirectory() as tmp:
    for i in range(runs):
        for sink, extra in ((add, ["--no-ruff"]), (add_ruff, [])):
            tree = f"{tmp}/tree{i}{len(extra)}"
            shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git", "__pycache__"))
            sink.append(timed([memprints, "add", "qwen3-moe", "--ranks", "3,14", *extra], tree))
        ruff.append(timed(["ruff", "format", "--check", "--no-cache", *six], src))

def show(name, xs):
    xs = sorted(xs)
    print(f"{name:<44} median {statistics.median(xs)*1e3:7.1f} ms   min {xs[0]*1e3:6.1f}   max {xs[-1]*1e3:6.1f}")
    return statistics.median(xs)

print(f"{runs} runs each on {src}")
a = show("memprints add qwen3-moe --ranks 3,14 --no-ruff", add)
r = show("ruff format --check (six files)", ruff)
b = show("memprints add ... (with the ruff step)", add_ruff)
print(f"ratio add / ruff format --check: {a / r:.2f} (target <= 0.5); add under 50 ms: {'yes' if a < 0.05 else 'no'}")

training = "pithtrain/modules/training.py"
def grown(shape):
    text = open(f"{src}/{training}").read()
    line = "# a plain comment line, long enough to look like a real one: {}\n"
    n = (1_000_000 - len(text)) // (len(line) + 4)
    if shape == "trailing":
        return text + "".join(line.format(i) for i in range(n))
    if shape == "middle":
        run = "".join(line.format(i) for i in range(n))
        return text.replace("\ndef setup_model(", f"\n{run}def setup_model(", 1)
    run = "".join(line.format(i) + "\n" for i in range(n * 9 // 10))
    return text + run
with tempfile.TemporaryDirectory() as tmp:
    for shape in ("trailing", "middle", "comments and blank lines"):
        times = []
        for i in range(max(3, runs // 3)):
            tree = f"{tmp}/{shape.replace(' ', '_')}{i}"
            shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git", "__pycache__"))
            text = grown(shape)
            open(f"{tree}/{training}", "w").write(text)
            times.append(timed([memprints, "add", "qwen3-moe", "--ranks", "3,14", "--no-ruff"], tree))
            subprocess.run([memprints, "remove", "-q"], cwd=tree, check=True)
            assert open(f"{tree}/{training}").read() == text, "remove gives back the bytes"
        m = show(f"add, 1 MB training.py ({shape})", times)
        print(f"  {len(text) / 1e6:.2f} MB; under 1 s: {'yes' if m < 1 else 'no'}")
PY
