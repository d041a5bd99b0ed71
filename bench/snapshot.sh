#!/usr/bin/env bash
# Benchmarks `memprints snapshot --format json` against Python's bare `pickle.load` on the same
# synthetic 1,048,576-entry snapshot: wall time and peak resident memory of each.
#   bench/snapshot.sh [ENTRIES]   (needs python3 and /usr/bin/time; builds --release)
set -euo pipefail
cd "$(dirname "$0")/.."
entries="${1:-1048576}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
file="$work/memory_snapshot_rank0_step0.pickle"

cargo build --release --quiet
bin="$(pwd)/target/release/memprints"
echo "generating $entries trace entries ..."
python3 tests/gen_snapshots.py --bench "$entries" "$file"
echo "file: $(du -h "$file" | cut -f1)"
cat "$file" >/dev/null # warm the page cache for both runs

measure() { # name, command...
  local name="$1"
  shift
  /usr/bin/time -v "$@" >/dev/null 2>"$work/$name.time"
  local wall rss
  wall="$(grep 'Elapsed (wall clock)' "$work/$name.time" | awk '{print $NF}')"
  rss="$(grep 'Maximum resident set size' "$work/$name.time" | awk '{print $NF}')"
  printf '%-10s wall %8s   max RSS %8d KiB\n' "$name" "$wall" "$rss"
}

for _ in 1 2; do
  measure memprints "$bin" snapshot --format json "$file"
  measure python python3 -c 'import pickle, sys; pickle.load(open(sys.argv[1], "rb"))' "$file"
done
