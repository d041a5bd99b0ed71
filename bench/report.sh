#!/usr/bin/env bash
# `memprints report --format json` against `grep -c '\[rank='` on logs built from the kept real
# PithTrain logs (tests/data/e2e/defaults-pp1, by bench/gen_real_log.py), in one run:
#
#   realistic  a node log of 64 ranks (pp=8): the real memory prints re-ranked, then the logs'
#              own non-print lines (step lines with all fields, config dumps, warnings) and
#              torchrun/NCCL lines and tracebacks, repeated with growing step numbers.
#              SIZE_MIB MiB (default 1100, > 1 GiB). Target: ratio <= 1.0.
#   dense      a print on (nearly) every line: the per-step prints of the real log for 64 ranks
#              on every training step (memory profiling left on). DENSE_MIB MiB (default
#              SIZE_MIB). Target: ratio <= 1.5.
#   small      the realistic log at a quarter of the size: peak RSS must not grow with the size.
#   folder     FILES per-rank logs (default 1024) of FOLDER_MIB MiB in all (default SIZE_MIB),
#              read on all cores, and the same folder at a quarter of the size (peak RSS).
#
# Each pair is timed RUNS times (default 5), alternating, after an untimed warm-up run; the
# output has min/median/max wall times, peak RSS and the per-pair ratios, and the machine's load
# (other work on the machine skews the ratios: measure when it is quiet).
#
# Usage: bench/report.sh   (env: SIZE_MIB, DENSE_MIB, FOLDER_MIB, FILES, RUNS, CASES="realistic
#                           dense small folder", WORK=dir to keep the generated logs there,
#                           BIN=a memprints binary to time instead of building one)
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${SIZE_MIB:-1100}
dense_mib=${DENSE_MIB:-$size_mib}
folder_mib=${FOLDER_MIB:-$size_mib}
files=${FILES:-1024}
runs=${RUNS:-5}
cases=${CASES:-realistic dense small folder}

# shellcheck source=bench/common.sh
source bench/common.sh bench
gen() { python3 bench/gen_real_log.py "$@"; }

echo "machine: $(nproc) cores; uptime: $(uptime)"
args=()
report() { echo "$bin report $1 --format json"; }
grepc() { echo "grep -c '\\[rank=' $1"; }
for c in $cases; do
  case $c in
    realistic)
      gen --size-mib "$size_mib" > "$work/realistic.log"
      args+=(--case "realistic ($size_mib MiB)" 1.0 "$(grepc "$work/realistic.log")" "$(report "$work/realistic.log")") ;;
    dense)
      gen --size-mib "$dense_mib" --profile dense > "$work/dense.log"
      args+=(--case "dense ($dense_mib MiB)" 1.5 "$(grepc "$work/dense.log")" "$(report "$work/dense.log")") ;;
    small)
      gen --size-mib $((size_mib / 4)) > "$work/small.log"
      args+=(--case "realistic, small ($((size_mib / 4)) MiB)" - "$(grepc "$work/small.log")" "$(report "$work/small.log")") ;;
    folder)
      rm -rf "$work/ranks" "$work/ranks-small"
      gen --size-mib "$folder_mib" --folder "$work/ranks" --files "$files"
      gen --size-mib $((folder_mib / 4)) --folder "$work/ranks-small" --files "$files"
      # grep over the files one by one: `grep -c -r` prints a count per file, like `grep -c`.
      args+=(--case "folder of $files per-rank logs ($folder_mib MiB)" - "grep -r -c '\\[rank=' $work/ranks" "$(report "$work/ranks")")
      args+=(--case "folder of $files per-rank logs ($((folder_mib / 4)) MiB)" - "grep -r -c '\\[rank=' $work/ranks-small" "$(report "$work/ranks-small")") ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done
du -sh "$work"/* | sed 's/^/input: /'
python3 bench/timeit.py --runs "$runs" "${args[@]}"
echo "uptime after: $(uptime)"
