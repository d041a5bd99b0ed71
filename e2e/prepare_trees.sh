#!/usr/bin/env bash
# Runs HERE (not on the GPU machine): lay out the PithTrain trees the device calls carry.
#   e2e/.work/plain                the PithTrain export as is (PT_SRC, default /work/pt)
#   e2e/.work/overlays/<model>/    only the files `memprints add` changed in a copy of plain,
#                                  plus E2E_OVERLAY.txt (binary, arguments, status, sha256s);
#                                  device_call.sh lays each over a copy of plain on the machine
#   e2e/.work/instr/<model>/       the whole instrumented copy (checked here, never carried)
# Models (E2E_MODELS, default "qwen3 gpt-oss dsv2"), each instrumented with default arguments:
#   qwen3    MEMPRINTS_QWEN3_ARGS   (default "add qwen3-moe")
#   gpt-oss  MEMPRINTS_GPT_OSS_ARGS (default "add gpt-oss")
#   dsv2     MEMPRINTS_DSV2_ARGS    (default "add deepseek-v2")
# MEMPRINTS is the built CLI (default target/release/memprints), run with cwd = the tree.
# E2E_OVERLAYS_DIR (default e2e/.work/overlays) is where the overlays go: the what-if runs
# (device_call.sh whatif) keep theirs in e2e/.work/overlays-whatif, apart from the matrix's.
# e2e/.work/ is git-ignored: the trees never enter the repository, they travel via `carry`.
# Checks: `memprints status` calls the tree complete, every file py_compiles, no file of the
# export went missing (an overlay can only add and replace files); then prints the carry size
# of each device call of e2e/README.md (limit 64 MiB, the repository's own files included).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SRC=${PT_SRC:-/work/pt}
MEMPRINTS=${MEMPRINTS:-$PWD/target/release/memprints}
MODELS=${E2E_MODELS:-qwen3 gpt-oss dsv2}
WORK=$PWD/e2e/.work
OVERLAYS=${E2E_OVERLAYS_DIR:-$WORK/overlays}
case $OVERLAYS in /*) ;; *) OVERLAYS=$PWD/$OVERLAYS ;; esac

[ -f "$SRC/pithtrain/__init__.py" ] || { echo "prepare_trees: $SRC is not a PithTrain export" >&2; exit 2; }
[ -x "$MEMPRINTS" ] || { echo "prepare_trees: no memprints binary at $MEMPRINTS (cargo build --release, or set MEMPRINTS)" >&2; exit 2; }
MEMPRINTS=$(cd "$(dirname "$MEMPRINTS")" && pwd)/$(basename "$MEMPRINTS")

args_of() {  # the memprints arguments for one model
  case "$1" in
    qwen3) echo "${MEMPRINTS_QWEN3_ARGS:-add qwen3-moe}" ;;
    gpt-oss) echo "${MEMPRINTS_GPT_OSS_ARGS:-add gpt-oss}" ;;
    dsv2) echo "${MEMPRINTS_DSV2_ARGS:-add deepseek-v2}" ;;
    *) echo "prepare_trees: unknown model $1 (qwen3, gpt-oss, dsv2)" >&2; exit 2 ;;
  esac
}

copy() {  # copy <dest>: the export without VCS folders or caches
  rm -rf "$1"
  mkdir -p "$1"
  tar -C "$SRC" --exclude=.git --exclude=__pycache__ --exclude='*.pyc' -cf - . | tar -C "$1" -xf -
}

py_compile_all() {
  python3 - "$1/pithtrain" <<'PYEOF'
import py_compile, sys, pathlib, tempfile
bad = []
with tempfile.TemporaryDirectory() as d:
    for p in sorted(pathlib.Path(sys.argv[1]).rglob("*.py")):
        try:
            py_compile.compile(str(p), cfile=d + "/x.pyc", doraise=True)
        except py_compile.PyCompileError as e:
            bad.append(str(e))
print("   py_compile: %s" % ("all files compile" if not bad else "FAILED"))
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PYEOF
}

instrument() {  # instrument <model>: full copy, then the overlay of the files that changed
  local model=$1 full=$WORK/instr/$1 overlay=$OVERLAYS/$1 args
  args=$(args_of "$model")
  copy "$full"
  echo "== $model: memprints $args (in $full)"
  # shellcheck disable=SC2086  # the arguments split on purpose
  (cd "$full" && "$MEMPRINTS" $args)
  (cd "$full" && "$MEMPRINTS" status >/dev/null) \
    || { echo "prepare_trees: memprints status does not call $full complete" >&2; exit 1; }
  py_compile_all "$full"
  rm -rf "$overlay"
  mkdir -p "$overlay"
  local changed
  changed=$(cd "$full" && find . -type f ! -path '*/__pycache__/*' ! -path '*/.ruff_cache/*' -print |
    sort | while read -r f; do
    cmp -s "$f" "$SRC/$f" 2>/dev/null || echo "${f#./}"
  done)
  [ -n "$changed" ] || { echo "prepare_trees: memprints changed nothing in $full" >&2; exit 1; }
  local gone
  gone=$(cd "$WORK/plain" && find . -type f -print | while read -r f; do [ -e "$full/$f" ] || echo "$f"; done)
  [ -z "$gone" ] || { echo "prepare_trees: memprints removed files in $full: $gone" >&2; exit 1; }
  echo "$changed" | while read -r f; do
    mkdir -p "$overlay/$(dirname "$f")"
    cp -p "$full/$f" "$overlay/$f"
  done
  {
    echo "memprints $("$MEMPRINTS" --version | sed 's/^memprints //')"
    echo "$args"
    echo "binary $MEMPRINTS"
    echo "repo $(git describe --always --dirty 2>/dev/null || echo unknown)"
    echo "--- memprints status"
    (cd "$full" && "$MEMPRINTS" status)
    echo "--- sha256 of the overlay files"
    (cd "$overlay" && echo "$changed" | xargs sha256sum)
  } > "$overlay/E2E_OVERLAY.txt"
  echo "   overlay $overlay: $(echo "$changed" | wc -l) files, $(du -sb "$overlay" | cut -f1) bytes"
  while read -r f; do echo "     $f"; done <<< "$changed"
  python3 e2e/tree_prints.py "$full" | sed 's/^/   /'
}

size_mib() {  # total bytes of the paths given, in MiB (links followed)
  du -cbL "$@" 2>/dev/null | tail -1 | awk '{printf "%.1f MiB (%d bytes)", $1/1048576, $1}'
}

mkdir -p "$WORK"
copy "$WORK/plain"
for m in $MODELS; do
  instrument "$m"
done

repo_bytes=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- | tail -1 | cut -f1)
echo "== carry sizes (limit 64 MiB per call, the repository's own $((repo_bytes / 1024)) KiB included)"
call_size() {  # call_size <label> <carry paths...>
  local label=$1; shift
  local missing=() p
  for p in "$@"; do [ -e "$p" ] || missing+=("$p"); done
  local carry; carry=$(du -cbL "$@" 2>/dev/null | tail -1 | cut -f1)
  local total=$((carry + repo_bytes))
  printf '   %-36s %6.1f MiB (%d bytes)%s\n' "$label" "$(echo "$total" | awk '{print $1/1048576}')" \
    "$total" "${missing[*]:+  MISSING: ${missing[*]} (bash e2e/fetch_wheels.sh)}"
  [ "$total" -le $((64 * 1048576)) ] || echo "   ^ over 64 MiB: this call would be refused" >&2
}
call_size "call 1 (phase1): cu13" e2e/.payload/cu13
call_size "calls 2, 3 (matrix): rest+trees" e2e/.payload/rest "$WORK/plain" "$OVERLAYS"
echo "   (plain $(size_mib "$WORK/plain"), overlays $(size_mib "$OVERLAYS"), rest $(size_mib e2e/.payload/rest))"
