#!/usr/bin/env bash
# Throughput of `memprints report --format json` against `grep -c '\[rank='` on the same log.
#
# Generates a log of 64 ranks (pp=8, 32 micro-batches, every rank printing) of at least
# SIZE_MIB MiB (default 1100, i.e. > 1 GiB), warms the page cache, then times each tool RUNS
# times (default 3, alternating) and prints the median time, MB/s for each and the ratio
# (target: memprints >= 0.5 x grep).
#
#   PROFILE=realistic (default) the prints on step 0 only, as the full instrumentation does,
#                     then a long run of step lines and NCCL/launcher noise.
#   PROFILE=dense     the pipeline and layer prints on every training step (memory_profiling
#                     left on): nearly every line is a memory print, so parsing dominates.
#
# Usage: bench/report.sh [LOG_PATH]   (env: SIZE_MIB, PROFILE, RUNS, KEEP=1 to keep the log,
#                                      REUSE=1 to time an existing LOG_PATH as it is)
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${SIZE_MIB:-1100}
profile=${PROFILE:-realistic}
runs=${RUNS:-3}
log=${1:-$(mktemp --tmpdir memprints-bench-XXXXXX.log)}

cargo build --release --quiet --bin memprints --example gen_report_log
bin=target/release/memprints
gen=target/release/examples/gen_report_log

case "$profile" in
  dense) gen_args=(--profiled-steps 1000000 --train-steps 1000000 --noise 1) ;;
  realistic) gen_args=(--profiled-steps 1 --train-steps 100000000 --noise 400) ;;
  *) echo "PROFILE must be dense or realistic" >&2; exit 2 ;;
esac

if [ "${REUSE:-0}" = 1 ] && [ -s "$log" ]; then
  echo "reusing $log as it is (REUSE=1; PROFILE and SIZE_MIB not applied)"
else
  echo "generating $profile log of >= $size_mib MiB (64 ranks, pp=8) at $log"
  "$gen" --world 64 --pp 8 --chunks 32 --size-mib "$size_mib" "${gen_args[@]}" > "$log"
fi
bytes=$(stat -c %s "$log")
cat "$log" > /dev/null  # page cache

now() { date +%s.%N; }
grep_times=() ours_times=()
for _ in $(seq "$runs"); do
  t0=$(now); tags=$(grep -c '\[rank=' "$log"); t1=$(now)
  "$bin" report "$log" --format json > /dev/null
  t2=$(now)
  grep_times+=("$t0 $t1") ours_times+=("$t1 $t2")
done

python3 - "$bytes" "$tags" "${grep_times[*]}" "${ours_times[*]}" <<'PY'
import statistics, sys
size, lines = int(sys.argv[1]), int(sys.argv[2])
def spans(arg):
    v = list(map(float, arg.split()))
    return sorted(b - a for a, b in zip(v[::2], v[1::2]))
grep, ours = spans(sys.argv[3]), spans(sys.argv[4])
mb = size / 1e6
grep_s, ours_s = statistics.median(grep), statistics.median(ours)
runs = lambda t: " ".join(f"{x:.3f}" for x in t)
print(f"log: {mb:.0f} MB, {lines} lines with [rank=; median of {len(grep)} runs each")
print(f"grep -c '\\[rank=': {grep_s:.3f} s, {mb / grep_s:.0f} MB/s  (runs: {runs(grep)})")
print(f"memprints report --format json: {ours_s:.3f} s, {mb / ours_s:.0f} MB/s  (runs: {runs(ours)})")
print(f"ratio memprints/grep throughput: {grep_s / ours_s:.2f} (target >= 0.50)")
PY
if [ "${KEEP:-0}" != 1 ] && [ -z "${1:-}" ]; then rm -f "$log"; fi
