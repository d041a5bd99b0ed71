#!/usr/bin/env bash
# Long fuzz runs, on a machine with many cores (the device machine: 16), of fuzz targets built
# HERE by `fuzz/build_bins.sh` (no Rust toolchain needed there).
#   usage: fuzz/run_long.sh SECONDS JOBS TARGET...
# Each target runs as JOBS libFuzzer jobs (-jobs=JOBS -workers=JOBS), all targets at once, for
# SECONDS of wall time; each job starts from fuzz/seeds/TARGET and a shared corpus folder, which
# starts as fuzz/corpus/TARGET.tgz (an earlier run's corpus-TARGET.tgz) when that is there.
# Into $OUT: fuzz-TARGET.txt (total executions summed over the jobs' "Done N runs" lines, the
# command, any crash files), corpus-TARGET.tgz (the grown corpus) and crash-TARGET-* inputs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")" || exit 2
seconds=$1 jobs=$2
shift 2
OUT=${OUT:-$PWD/.out}
mkdir -p "$OUT"
work=$(mktemp -d)
for target in "$@"; do
  mkdir -p "$work/$target/corpus" "$work/$target/artifacts"
  [ -f "corpus/$target.tgz" ] && tar -xzf "corpus/$target.tgz" -C "$work/$target"
  (
    cd "$work/$target" &&
      timeout $((seconds + 60)) "$OLDPWD/bin/$target" -jobs="$jobs" -workers="$jobs" \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
        -artifact_prefix="$work/$target/artifacts/" \
        corpus "$OLDPWD/seeds/$target" >"$work/$target/driver.log" 2>&1
  ) &
done
wait
for target in "$@"; do
  report="$OUT/fuzz-$target.txt"
  runs=$(cat "$work/$target"/fuzz-*.log 2>/dev/null | sed -n 's/^Done \([0-9]*\) runs in.*/\1/p' |
    awk '{s += $1} END {print s + 0}')
  {
    echo "target: $target"
    echo "command: $target -jobs=$jobs -workers=$jobs -max_total_time=$seconds corpus seeds/$target"
    echo "cores: $(nproc), jobs: $jobs, seconds per job: $seconds, job-seconds: $((jobs * seconds))"
    echo "executions: $runs"
    echo "corpus files: $(find "$work/$target/corpus" -type f | wc -l)"
    echo "crash/timeout/oom inputs: $(find "$work/$target/artifacts" -type f | wc -l)"
    grep -h "^Done" "$work/$target"/fuzz-*.log
    grep -h -m3 "ERROR: libFuzzer\|panicked" "$work/$target"/fuzz-*.log
  } >"$report"
  tar -czf "$OUT/corpus-$target.tgz" -C "$work/$target" corpus
  for f in "$work/$target"/artifacts/*; do
    [ -f "$f" ] && cp "$f" "$OUT/crash-$target-$(basename "$f")"
  done
  cat "$report"
done
