#!/usr/bin/env bash
# Runs HERE, once after the device calls: turn what they returned into test data the way
# tests/data/e2e/README.md describes, and say what was written.
#   bash e2e/keep_results.sh [--dest DIR] RESULTS_DIR [RESULTS_DIR ...]
# Reads each RESULTS_DIR's *.log, logs.tgz and snapshots.tgz (a log name seen twice: the copy
# with the later E2E_START, i.e. the run a later call repeated, with its own snapshots). Writes into DIR (default tests/data/e2e/<UTC date of the first run>/; a folder of
# its own, so the kept data of 2026-12-01 and the tests pinned to it stay as they are):
#   <variant>-pp<P>-<kind>.log                 kind: plain | instr | resume, e.g. gpt-oss-tiny-pp1-instr.log
#                                              (what-if runs: <shape>-instr, e.g. qwen3-big-pp1-s1024-mb1-instr.log)
#   <variant>-pp<P>-<kind>-rank0-step<S>.pickle.gz   that run's rank-0 memory snapshot
#   README.md                                  what ran, on what, and what was replaced
# --gzip-over BYTES: a rewritten log longer than that is kept as <stem>.log.gz (gzip -9 -n).
# Logs: the machine paths named by the log's own E2E_PATHS line are replaced with sed, in this
# order: tree -> <tree>, repo/e2e/configs -> <e2e>/configs, repo -> <repo>, site -> <site>,
# data -> <data>, ckpt -> <ckpt>, snapdir/memory_snapshot -> <snapdir>/memory_snapshot (and
# E2E_PATHS's own snapdir=), inductor -> <inductor>, torch -> <torch>; the line count must
# stay the same. Snapshots: the
# frame filenames under tree, repo, site, torch, inductor are rewritten by rewrite_snapshot.py
# (stdlib pickle load/dump), then gzip -9 -n. Nothing that exists in DIR is overwritten.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dest=
gzip_over=
while :; do
  case "${1:-}" in
    --dest) dest=${2:?--dest needs a folder}; shift 2 ;;
    --gzip-over) gzip_over=${2:?--gzip-over needs a byte count}; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--dest DIR] [--gzip-over BYTES] RESULTS_DIR [RESULTS_DIR ...]" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/logs" "$work/snap" "$work/out"
for d in "$@"; do
  [ -d "$d" ] || { echo "keep_results: $d is not a folder" >&2; exit 2; }
  rm -rf "$work/x"; mkdir -p "$work/x/logs" "$work/x/snap"
  if [ -f "$d/logs.tgz" ]; then tar -C "$work/x/logs" -xzf "$d/logs.tgz"; fi
  if [ -f "$d/snapshots.tgz" ]; then tar -C "$work/x/snap" -xzf "$d/snapshots.tgz"; fi
  for f in "$d"/*.log "$work"/x/logs/*.log; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .log); kept=$work/logs/$name.log
    # A run repeated by a later call: keep the copy that started later (E2E_START sorts as
    # text), with that copy's own snapshots.
    if [ ! -e "$kept" ] || [[ "$(grep -m1 '^E2E_START ' "$f")" > "$(grep -m1 '^E2E_START ' "$kept")" ]]; then
      cp "$f" "$kept"
      rm -rf "$work/snap/$name"
      if [ -d "$work/x/snap/$name" ]; then mv "$work/x/snap/$name" "$work/snap/"; fi
    fi
  done
  cat "$d"/meta.txt >> "$work/meta.txt" 2>/dev/null || true
done
logs=("$work"/logs/*.log)
[ -f "${logs[0]}" ] || { echo "keep_results: no logs in $*" >&2; exit 2; }

field() {  # field <log> <KEY> <name>: name=value from the log's first KEY line
  grep -m1 "^$2 " "$1" | tr ' ' '\n' | sed -n "s/^$3=//p" | head -1
}
esc() { printf '%s' "$1" | sed 's/[][\.*^$|&/]/\\&/g'; }  # a path as a sed pattern

day=$(grep -m1 '^E2E_START ' "${logs[0]}" | cut -d' ' -f2 | cut -dT -f1)
dest=${dest:-tests/data/e2e/${day:-undated}}
mkdir -p "$dest"

rows=()
status=0
for log in "${logs[@]}"; do
  tag=$(basename "$log" .log)
  if ! grep -q '^E2E_PATHS ' "$log"; then
    echo "keep_results: $tag.log has no E2E_PATHS line (an older harness): rewrite it by hand" >&2
    status=1; continue
  fi
  variant=$(field "$log" E2E_RUN variant)
  pp=$(grep -m1 '^E2E_CONFIG ' "$log" | sed -n 's/.*"pp": \([0-9]*\).*/\1/p')
  if [[ $tag =~ (plain|instr|resume)(-[0-9]+)?$ ]]; then kind=${BASH_REMATCH[0]}
  else echo "keep_results: $tag.log: cannot tell plain/instr/resume from the name" >&2; status=1; continue; fi
  # A what-if run (device_call.sh whatif): whatif-<shape>-instr -> <variant>-pp<P>-<shape>-instr
  if [[ $tag =~ ^whatif-(s[0-9]+-mb[0-9]+)- ]]; then kind=${BASH_REMATCH[1]}-$kind; fi
  stem=$variant-pp${pp:-1}-$kind
  tree=$(field "$log" E2E_PATHS tree); repo=$(field "$log" E2E_PATHS repo)
  site=$(field "$log" E2E_PATHS site); data=$(field "$log" E2E_PATHS data)
  ckpt=$(field "$log" E2E_PATHS ckpt); snapdir=$(field "$log" E2E_PATHS snapdir)
  inductor=$(field "$log" E2E_PATHS inductor); torch=$(field "$log" E2E_PATHS torch)
  script=()
  add() { [ -n "$1" ] && [ "$1" != none ] && script+=(-e "s|$(esc "$1")|$2|g"); return 0; }
  add "$tree" '<tree>'; add "$repo/e2e/configs" '<e2e>/configs'; add "$repo" '<repo>'
  add "$site" '<site>'; add "$data" '<data>'; add "$ckpt" '<ckpt>'
  add "$snapdir/memory_snapshot" '<snapdir>/memory_snapshot'
  [ -z "$snapdir" ] || add "snapdir=$snapdir " 'snapdir=<snapdir> '
  add "$inductor" '<inductor>'; add "$torch" '<torch>'
  out=$dest/$stem.log
  if [ -e "$out" ]; then echo "keep_results: $out exists: not overwritten" >&2; status=1; continue; fi
  sed "${script[@]}" "$log" > "$work/out/$stem.log"
  if [ "$(wc -l < "$log")" != "$(wc -l < "$work/out/$stem.log")" ]; then
    echo "keep_results: $tag.log: the line count changed under sed" >&2; exit 1
  fi
  if [ -n "$gzip_over" ] && [ "$(stat -c %s "$work/out/$stem.log")" -gt "$gzip_over" ]; then
    out=$out.gz  # a long log: gzip -9 -n (memprints report reads .gz logs as they are)
    if [ -e "$out" ]; then echo "keep_results: $out exists: not overwritten" >&2; status=1; continue; fi
    gzip -9 -n -c "$work/out/$stem.log" > "$out"
    rm -f "$work/out/$stem.log"
  else
    mv "$work/out/$stem.log" "$out"
  fi
  args=$(grep -m1 '^E2E_RUN ' "$log" | sed -e 's/.* args=//' "${script[@]}")
  made=$(grep -m1 '^E2E_PRINTS ' "$log" | sed -n 's/.*"made_by": \[\([^]]*\)\].*/\1/p' | tr -d '"')
  rows+=("| \`$(basename "$out")\` | ${made:-uninstrumented} | \`train.py --variant $variant $args\` |")
  echo "wrote $out ($(wc -l < "$log") lines, $(stat -c %s "$out") bytes; from $tag.log)"
  for p in "$work/snap/$tag"/*.pickle; do
    [ -f "$p" ] || continue
    # memory_snapshot_rank0_step0.pickle -> rank0-step0 (the OOM snapshot has no step)
    rs=$(basename "$p" .pickle | sed 's/^memory_snapshot_//; s/_/-/g')
    gz=$dest/$stem-$rs.pickle.gz
    if [ -e "$gz" ]; then echo "keep_results: $gz exists: not overwritten" >&2; status=1; continue; fi
    pairs=()
    for kv in "$tree=<tree>" "$repo=<repo>" "$site=<site>" "$torch=<torch>" "$inductor=<inductor>"; do
      case "$kv" in =*|none=*) ;; *) pairs+=("$kv") ;; esac
    done
    python3 e2e/rewrite_snapshot.py "$p" "$work/out/x.pickle" "${pairs[@]}"
    gzip -9 -n -c "$work/out/x.pickle" > "$gz"
    rm -f "$work/out/x.pickle"
    rows+=("| \`$(basename "$gz")\` | the $rs memory snapshot of \`$stem.log\`, gzip -9 -n | |")
    echo "wrote $gz ($(stat -c %s "$gz") bytes; from snapshots.tgz $tag/$(basename "$p"))"
  done
done

if [ ${#rows[@]} = 0 ]; then
  rmdir "$dest" 2>/dev/null || true
  echo "keep_results: nothing kept from $*" >&2; exit 1
fi
readme=$dest/README.md
if [ -e "$readme" ]; then
  echo "keep_results: $readme exists: not overwritten (the table for it follows)"; readme=/dev/stdout
fi
gpu=$(grep -m1 -a 'NVIDIA' "$work/meta.txt" 2>/dev/null || echo "not recorded")
versions=$(grep -m1 -a '^torch ' "$work/meta.txt" 2>/dev/null || echo "not recorded")
{
  echo "# Real PithTrain output (GPU end-to-end run, ${day:-undated})"
  echo
  echo "Written by \`e2e/keep_results.sh\` from the files the device calls returned (see"
  echo "\`e2e/README.md\`). GPU: $gpu; $versions. PithTrain: the export of commit 889a408."
  echo
  echo "| file | instrumented by | run |"
  echo "|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Logs: the device's stdout byte for byte except the machine paths of each log's"
  echo "\`E2E_PATHS\` line, replaced with sed in this order: tree → \`<tree>\`, repo/e2e/configs →"
  echo "\`<e2e>/configs\`, repo → \`<repo>\`, site → \`<site>\`, data → \`<data>\`, ckpt → \`<ckpt>\`,"
  echo "snapdir/memory_snapshot → \`<snapdir>/memory_snapshot\` (and \`snapdir=\` itself), inductor →"
  echo "\`<inductor>\`, the"
  echo "site-packages holding torch → \`<torch>\`. The line count is unchanged. Snapshots: loaded"
  echo "with Python's pickle, the frame filenames under tree, repo, site, torch and inductor"
  echo "rewritten the same way, dumped with the highest protocol, \`gzip -9 -n\`."
} > "$readme"
[ "$readme" = /dev/stdout ] || echo "wrote $readme"
exit $status
