#!/usr/bin/env bash
# Runs two memprints binaries over every kept real log and snapshot (tests/data, fuzz seeds) in
# every format and says which outputs differ: the check behind "behaviour unchanged" when code
# moves. Output, stderr and the exit status are compared.
#
#   bench/same_output.sh OLD_BINARY NEW_BINARY [FORMATS]   (FORMATS default: "text markdown json html")
set -euo pipefail
old=$1 new=$2 formats=${3:-"text markdown json html"}
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
same=0 differ=0
run() { # label, then the command's arguments
  local label=$1
  shift
  for bin in old new; do
    local exe=$old
    [[ $bin == new ]] && exe=$new
    (cd "$scratch" && "$exe" "$@" >"$bin.out" 2>"$bin.err"; echo "exit $?" >>"$bin.err") || true
  done
  if cmp -s "$scratch/old.out" "$scratch/new.out" && cmp -s "$scratch/old.err" "$scratch/new.err"; then
    same=$((same + 1))
  else
    differ=$((differ + 1))
    echo "DIFFERS: $label"
  fi
}
logs=$(find "$PWD/tests/data" -type f \( -name '*.log' -o -name '*.log.gz' -o -name '*.log.zst' \) | sort)
pickles=$(find "$PWD/tests/data" "$PWD/fuzz/seeds" -type f \( -name '*.pickle' -o -name '*.pickle.gz' -o -name '*.pickle.zst' -o -name '*.pickle.xz' \) 2>/dev/null | sort)
for log in $logs; do
  for f in $formats; do
    run "report --format $f $log" report --format "$f" "$log"
  done
done
for dir in $(find "$PWD/tests/data" -type d -name defaults-pp1) "$PWD/tests/data/report"; do
  run "report --format json $dir" report --format json "$dir"
done
for p in $pickles; do
  for f in $formats; do
    [[ $f == markdown ]] && continue
    run "snapshot --format $f $p" snapshot --format "$f" "$p"
  done
done
run "snapshot diff" snapshot diff "$PWD/tests/data/snapshot/diff_a.pickle" "$PWD/tests/data/snapshot/diff_b.pickle"
run "report with snapshot" report --format json "$PWD/tests/data/e2e/qwen3-tiny-pp1-instr.log" \
  --snapshots "$PWD/tests/data/e2e/qwen3-tiny-pp1-instr-rank0-step0.pickle.gz"
echo "same: $same, differ: $differ"
[[ $differ == 0 ]]
