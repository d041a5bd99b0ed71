#!/usr/bin/env bash
# Throughput of `memprints report --format json` against `grep -c '\[rank='` on the same log.
#
# Generates a log of 64 ranks (pp=8, 32 micro-batches, every rank printing) of at least
# SIZE_MIB MiB (default 1100, i.e. > 1 GiB), warms the page cache, then times both tools on it
# and prints MB/s for each and the ratio (target: memprints >= 0.5 x grep).
#
#   PROFILE=dense     (default) the pipeline and layer prints on every training step
#                     (memory_profiling left on): nearly every line is a memory print.
#   PROFILE=realistic the prints on step 0 only, as the full instrumentation does, then a long
#                     run of step lines and NCCL/launcher noise.
#
# Usage: bench/report.sh [LOG_PATH]   (env: SIZE_MIB, PROFILE, KEEP=1 to keep the log)
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${SIZE_MIB:-1100}
profile=${PROFILE:-dense}
log=${1:-$(mktemp --tmpdir memprints-bench-XXXXXX.log)}

cargo build --release --quiet --bin memprints --example gen_report_log
bin=target/release/memprints
gen=target/release/examples/gen_report_log

case "$profile" in
  dense) gen_args=(--profiled-steps 1000000 --train-steps 1000000 --noise 1) ;;
  realistic) gen_args=(--profiled-steps 1 --train-steps 100000000 --noise 400) ;;
  *) echo "PROFILE must be dense or realistic" >&2; exit 2 ;;
esac

echo "generating $profile log of >= $size_mib MiB (64 ranks, pp=8) at $log"
"$gen" --world 64 --pp 8 --chunks 32 --size-mib "$size_mib" "${gen_args[@]}" > "$log"
bytes=$(stat -c %s "$log")
cat "$log" > /dev/null  # page cache

now() { date +%s.%N; }
t0=$(now); tags=$(grep -c '\[rank=' "$log"); t1=$(now)
"$bin" report "$log" --format json > /dev/null
t2=$(now)

python3 - "$bytes" "$t0" "$t1" "$t2" "$tags" <<'PY'
import sys
size, t0, t1, t2, lines = int(sys.argv[1]), *map(float, sys.argv[2:5]), int(sys.argv[5])
mb = size / 1e6
grep_s, ours_s = t1 - t0, t2 - t1
print(f"log: {mb:.0f} MB, {lines} lines with [rank=")
print(f"grep -c '\\[rank=': {grep_s:.2f} s, {mb / grep_s:.0f} MB/s")
print(f"memprints report --format json: {ours_s:.2f} s, {mb / ours_s:.0f} MB/s")
print(f"ratio memprints/grep throughput: {grep_s / ours_s:.2f} (target >= 0.50)")
PY
if [ "${KEEP:-0}" != 1 ] && [ -z "${1:-}" ]; then rm -f "$log"; fi
