#!/usr/bin/env bash
# Benchmarks `memprints snapshot` for issue 15, in one run:
#  1. the 1,048,576-entry pickle: `snapshot --format json` against Python's bare `pickle.load`
#     of the same file, REPEAT interleaved runs; min/median/max of each and of their ratio;
#  2. a BIG-entry pickle (10,000,000: ~1 GB, streamed by the generator): wall and peak RSS
#     against the file's size;
#  3. RANKS per-rank snapshots (100,000 entries each) in one folder: all cores against one;
#  4. the HTML timeline: page sizes, and in headless Chromium the BIG page's time to first
#     paint (the overview drawn) and to interactive (events unpacked), as the page measures
#     them from navigation start;
#  5. MANY small real-shaped snapshots (tests/data/snapshot/ranks, one per rank) in one folder,
#     and the 201 KB hostile tests/data/snapshot/hostile/blowup.pickle.gz alone and four at
#     once: wall and peak RSS against the memory budget (--max-memory, 1 GiB by default).
#   bench/snapshot.sh        (needs python3 and /usr/bin/time; chromium for part 4)
#   REPEAT=5 BIG=10000000 RANKS=64 MANY=8192 bench/snapshot.sh
# The machine may be shared: each part prints the load average, and CPU seconds (user + system)
# beside wall seconds, since they depend less on what else runs.
set -euo pipefail
cd "$(dirname "$0")/.."
repeat="${REPEAT:-5}"
big="${BIG:-10000000}"
ranks="${RANKS:-64}"
many="${MANY:-8192}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
bin="$(pwd)/target/release/memprints"
load() { echo "  (load average: $(cut -d' ' -f1-3 /proc/loadavg))"; }

# run CMD...: prints "wall_s cpu_s max_rss_kib" of one run.
run() {
  local start end
  start=$(date +%s%N)
  /usr/bin/time -f "%U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" || {
    cat "$work/err" >&2
    return 1
  }
  end=$(date +%s%N)
  read -r user sys rss <"$work/time"
  awk -v w="$((end - start))" -v u="$user" -v s="$sys" -v m="$rss" \
    'BEGIN { printf "%.3f %.2f %d\n", w / 1e9, u + s, m }'
}
# stats: min/median/max of the numbers on stdin.
stats() {
  sort -g | awk '{ a[NR] = $1 } END {
    m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
    printf "min %.3f  median %.3f  max %.3f", a[1], m, a[NR] }'
}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

echo "== 1. 1,048,576 entries: snapshot --format json vs pickle.load ($repeat runs)"
one="$work/memory_snapshot_rank0_step0.pickle"
python3 tests/gen_snapshots.py --bench 1048576 "$one"
echo "  file: $(mib "$(stat -c %s "$one")")"
cat "$one" >/dev/null # the page cache, for both
load
: >"$work/part1"
for _ in $(seq "$repeat"); do
  read -r mw mc mr < <(run "$bin" snapshot --format json "$one")
  read -r pw pc pr < <(run python3 -c 'import pickle, sys; pickle.load(open(sys.argv[1], "rb"))' "$one")
  echo "$mw $mc $mr $pw $pc $pr" >>"$work/part1"
done
col() { awk -v c="$1" '{ print $c }' "$work/part1" | stats; }
echo "  memprints wall s:    $(col 1)   (CPU s: $(col 2); max RSS $(awk '{ print $3 }' "$work/part1" | sort -g | tail -1) KiB)"
echo "  pickle.load wall s:  $(col 4)   (CPU s: $(col 5); max RSS $(awk '{ print $6 }' "$work/part1" | sort -g | tail -1) KiB)"
echo "  ratio, wall:         $(awk '{ print $1 / $4 }' "$work/part1" | stats)"
echo "  ratio, CPU:          $(awk '{ print $2 / $5 }' "$work/part1" | stats)"

echo "== 2. $big entries: peak RSS against the file"
bigfile="$work/big_rank0.pickle"
python3 tests/gen_snapshots.py --stream "$big" "$bigfile"
size=$(stat -c %s "$bigfile")
cat "$bigfile" >/dev/null
load
read -r bw bc br < <(run "$bin" snapshot --format json "$bigfile")
echo "  file $(mib "$size"); wall $bw s, CPU $bc s, max RSS $(mib $((br * 1024))) = $(awk -v r="$br" -v s="$size" 'BEGIN { printf "%.2f", r * 1024 / s }')x the file"

echo "== 3. $ranks per-rank snapshots of 100,000 entries in one folder"
rankdir="$work/ranks"
mkdir "$rankdir"
python3 tests/gen_snapshots.py --stream 100000 "$work/rank.pickle"
for r in $(seq 0 $((ranks - 1))); do
  ln "$work/rank.pickle" "$rankdir/memory_snapshot_rank${r}_step0.pickle"
done
load
read -r sw sc _ < <(RAYON_NUM_THREADS=1 run "$bin" snapshot --format json "$rankdir")
read -r aw ac ar < <(run "$bin" snapshot --format json "$rankdir")
echo "  one core: wall $sw s (CPU $sc s); all $(nproc) cores: wall $aw s (CPU $ac s, max RSS $(mib $((ar * 1024))))"
echo "  speed-up: $(awk -v a="$sw" -v b="$aw" 'BEGIN { printf "%.2f", a / b }')x"

echo "== 4. the HTML timeline"
"$bin" snapshot --format html --out "$work/one.html" "$one"
read -r hw _ hr < <(run "$bin" snapshot --format html --out "$work/big.html" "$bigfile")
echo "  page for 1,048,576 entries: $(mib "$(stat -c %s "$work/one.html")") (PyTorch's: 82.7 MB)"
echo "  page for $big entries: $(mib "$(stat -c %s "$work/big.html")"), written in $hw s (max RSS $(mib $((hr * 1024))))"
if command -v chromium >/dev/null 2>&1; then
  load
  for page in one big; do
    profile="$(mktemp -d)"
    result=$(chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$profile" --run-all-compositor-stages-before-draw \
      --virtual-time-budget=120000 --dump-dom "file://$work/$page.html#selftest" 2>/dev/null |
      grep -o '<pre id="mp-selftest">[^<]*' | sed 's/<pre id="mp-selftest">//; s/&quot;/"/g')
    rm -rf "$profile"
    echo "  $page: $(echo "$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)
print("{:,} events: first paint {:.0f} ms, unpacked {:.0f} ms; the hover at the peak shows event {} (the peak: {})".format(
    r["events"], r["first_paint_ms"], r["ready_ms"], r["hovered"], r["peak_event"]))')"
  done
else
  echo "  (chromium not installed: no time to first paint)"
fi

echo "== 5. memory: $many small snapshots in one folder, and the hostile blowup pickle"
manydir="$work/many"
mkdir "$manydir"
for r in $(seq 0 $((many - 1))); do
  ln tests/data/snapshot/ranks/memory_snapshot_rank0_step0.pickle "$manydir/memory_snapshot_rank${r}_step0.pickle" 2>/dev/null ||
    cp tests/data/snapshot/ranks/memory_snapshot_rank0_step0.pickle "$manydir/memory_snapshot_rank${r}_step0.pickle"
done
load
for format in text json; do
  read -r nw nc nr < <(run "$bin" snapshot --format "$format" "$manydir")
  echo "  $many snapshots, $format: wall $nw s (CPU $nc s), max RSS $(mib $((nr * 1024)))"
done
blowup=tests/data/snapshot/hostile/blowup.pickle.gz
fourdir="$work/four"
mkdir "$fourdir"
for r in 0 1 2 3; do cp "$blowup" "$fourdir/memory_snapshot_rank${r}_step0.pickle.gz"; done
# run_refused CMD...: "wall_s cpu_s max_rss_kib" of a run that must fail with one line.
run_refused() {
  local start end
  start=$(date +%s%N)
  if /usr/bin/time -f "%U %S %M" -o "$work/time" "$@" >/dev/null 2>"$work/err"; then
    echo "  expected a refusal from: $*" >&2
    return 1
  fi
  end=$(date +%s%N)
  read -r user sys rss < <(tail -1 "$work/time")
  awk -v w="$((end - start))" -v u="$user" -v s="$sys" -v m="$rss" \
    'BEGIN { printf "%.3f %.2f %d\n", w / 1e9, u + s, m }'
}
for budget in 128M 1G; do
  read -r ow oc or < <(run_refused "$bin" snapshot --max-memory "$budget" "$blowup")
  read -r fw fc fr < <(run_refused "$bin" snapshot --max-memory "$budget" "$fourdir")
  echo "  blowup.pickle.gz, --max-memory $budget: alone wall $ow s, max RSS $(mib $((or * 1024))); four at once wall $fw s, max RSS $(mib $((fr * 1024)))"
done
echo "  $(head -1 "$work/err")"
