#!/usr/bin/env bash
# Issue 24, item 10, in one run: folders as a big run writes them, beside grep and pickle.load.
#
#   folder    FILES per-rank logs (default 1024) of FOLDER_MIB MiB in all (default 275), built
#             from the kept real logs by bench/gen_real_log.py (rank 0's log holds PithTrain's
#             INFO lines, every rank prints in detail): `memprints report DIR --format json`
#             against `grep -r -c '\[rank=' DIR`. Target: ratio <= 1.0.
#   many      MANY per-rank logs (default 10000) of the same MiB in all, likewise, in JSON and
#             in text: peak RSS under 256 MiB.
#   snapshots SNAPSHOTS per-rank memory snapshots (default 8192; the kept real-shaped
#             tests/data/snapshot/ranks one, hard-linked) in one folder:
#             `memprints snapshot DIR --format json` against one Python process that
#             `pickle.load`s each of them (bench/pickle_load_all.py). Peak RSS under 256 MiB.
#
# Each pair runs RUNS times (default 5), alternating, after an untimed warm-up (bench/timeit.py:
# min/median/max wall and CPU, peak RSS, the ratio per pair). The machine's load is printed:
# other work skews the ratios.
#
# Usage: bench/scale.sh   (env: FILES, MANY, FOLDER_MIB, SNAPSHOTS, RUNS, WORK=dir to keep the
#                          inputs, BIN=a memprints binary to time instead of building one)
set -euo pipefail
cd "$(dirname "$0")/.."

files=${FILES:-1024}
many=${MANY:-10000}
folder_mib=${FOLDER_MIB:-275}
snapshots=${SNAPSHOTS:-8192}
runs=${RUNS:-5}

# shellcheck source=bench/common.sh
source bench/common.sh scale

echo "machine: $(nproc) cores; uptime: $(uptime)"
[ -d "$work/ranks" ] || python3 bench/gen_real_log.py --size-mib "$folder_mib" --folder "$work/ranks" --files "$files"
[ -d "$work/many" ] || python3 bench/gen_real_log.py --size-mib "$folder_mib" --folder "$work/many" --files "$many"
if [ ! -d "$work/snapshots" ]; then
  mkdir "$work/snapshots"
  one=tests/data/snapshot/ranks/memory_snapshot_rank0_step0.pickle
  for r in $(seq 0 $((snapshots - 1))); do
    ln "$one" "$work/snapshots/memory_snapshot_rank${r}_step0.pickle" 2>/dev/null ||
      cp "$one" "$work/snapshots/memory_snapshot_rank${r}_step0.pickle"
  done
fi
du -sh "$work"/* | sed 's/^/input: /'

python3 bench/timeit.py --runs "$runs" \
  --case "folder of $files per-rank logs ($folder_mib MiB)" 1.0 \
    "grep -r -c '\\[rank=' $work/ranks" "$bin report $work/ranks --format json" \
  --max-rss-mib 256 \
  --case "folder of $many per-rank logs ($folder_mib MiB), JSON" - \
    "grep -r -c '\\[rank=' $work/many" "$bin report $work/many --format json" \
  --case "folder of $many per-rank logs ($folder_mib MiB), text" - \
    "grep -r -c '\\[rank=' $work/many" "$bin report $work/many" \
  --case "folder of $snapshots memory snapshots" - \
    "python3 bench/pickle_load_all.py $work/snapshots" "$bin snapshot $work/snapshots --format json"
echo "uptime after: $(uptime)"
