#!/usr/bin/env bash
# Runs HERE (not on the GPU machine): lay out the PithTrain trees the device calls carry.
#   e2e/.work/plain        the PithTrain export as is (PT_SRC, default /work/pt)
#   e2e/.work/instr        a copy instrumented by memprints for qwen3-moe, ranks 0,1
#   e2e/.work/instr-dsv2   (only with --dsv2) a copy instrumented for deepseek-v2
# e2e/.work/ is git-ignored: the trees never enter the repository, they travel via `carry`.
# Env: MEMPRINTS (the built CLI, default target/release/memprints, run with cwd = the tree),
#      MEMPRINTS_QWEN_ARGS (default "add qwen3-moe --ranks 0,1"),
#      MEMPRINTS_DSV2_ARGS (default "add deepseek-v2 --ranks 0,1").
# Checks afterwards: which files changed, that they still compile (py_compile), and the size
# of what the device calls will carry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SRC=${PT_SRC:-/work/pt}
MEMPRINTS=${MEMPRINTS:-$PWD/target/release/memprints}
QWEN_ARGS=${MEMPRINTS_QWEN_ARGS:-add qwen3-moe --ranks 0,1}
DSV2_ARGS=${MEMPRINTS_DSV2_ARGS:-add deepseek-v2 --ranks 0,1}
WORK=e2e/.work

[ -f "$SRC/pithtrain/__init__.py" ] || { echo "prepare_trees: $SRC is not a PithTrain export" >&2; exit 2; }
[ -x "$MEMPRINTS" ] || { echo "prepare_trees: no memprints binary at $MEMPRINTS (cargo build --release, or set MEMPRINTS)" >&2; exit 2; }
mkdir -p "$WORK"

copy() {  # copy the export without VCS folders or caches
  rm -rf "$WORK/$1"
  mkdir -p "$WORK/$1"
  tar -C "$SRC" --exclude=.git --exclude=__pycache__ --exclude='*.pyc' -cf - . | tar -C "$WORK/$1" -xf -
}

instrument() {  # instrument <tree> <args...>
  local tree=$1; shift
  copy "$tree"
  echo "== $MEMPRINTS $* (in $WORK/$tree)"
  (cd "$WORK/$tree" && "$MEMPRINTS" "$@")
  echo "== changed files in $tree:"
  diff -rq "$WORK/plain" "$WORK/$tree" | sed 's/^/   /' || true
  python3 - "$WORK/$tree/pithtrain" <<'PYEOF'
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

copy plain
# shellcheck disable=SC2086
instrument instr $QWEN_ARGS
if [ "${1:-}" = "--dsv2" ]; then
  # shellcheck disable=SC2086
  instrument instr-dsv2 $DSV2_ARGS
fi
echo "== carry sizes (each device call: <= 64 MiB with the repository itself)"
du -sh e2e/.payload/cu13 e2e/.payload/rest "$WORK"/plain "$WORK"/instr* 2>/dev/null || true
