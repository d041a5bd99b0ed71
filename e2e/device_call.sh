#!/usr/bin/env bash
# The command of ONE `run` device call (runs ON the GPU machine, from the repository root).
# What each mode needs carried is in e2e/README.md.
#   phase1       stage the cu13 libs (carry e2e/.payload/cu13 ONLY: it is ~61 MiB)
#   functional   phase 2 install, then with qwen3-tiny: plain 3 steps; instrumented 3 steps saving
#                checkpoints; instrumented resume of 1 step from the step-2 checkpoint. Then, if
#                enough of the call's time is left (E2E_WITH_OVERHEAD=auto|1|0), the overhead runs.
#   overhead     phase 2 install (a no-op when done), then qwen3-big: plain and instrumented,
#                14 steps each (E2E_OVERHEAD_ORDER, default "plain instr").
#   dsv2         phase 2 install, then dsv2-tiny: plain and instrumented (INSTR_DSV2_TREE), 3 steps.
# Trees (env, relative to the repo root): PLAIN_TREE=e2e/.work/plain  INSTR_TREE=e2e/.work/instr
#   INSTR_DSV2_TREE=e2e/.work/instr-dsv2. Files come back in $OUT (at most 8): *.log, meta.txt,
#   snapshots.tgz. The whole command keeps inside E2E_BUDGET seconds (default 560 of the 600).
# E2E_TRAIN_ARGS is appended to every train.py call (e.g. "--optimizer adamw").
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=${1:-}
OUT=${OUT:-$PWD/e2e/.work/out}
mkdir -p "$OUT"
BUDGET=${E2E_BUDGET:-560}
PLAIN_TREE=${PLAIN_TREE:-e2e/.work/plain}
INSTR_TREE=${INSTR_TREE:-e2e/.work/instr}
INSTR_DSV2_TREE=${INSTR_DSV2_TREE:-e2e/.work/instr-dsv2}
RUNS=/tmp/e2e_runs
CKPT=/tmp/e2e_ckpt
SNAP=/tmp/e2e_snap
meta="$OUT/meta.txt"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

note() { echo "[device_call +${SECONDS}s] $*" | tee -a "$meta"; }
left() { echo $((BUDGET - SECONDS)); }

# run <tag> <tree> <variant> <cap seconds> [train.py options]: one run, log straight into $OUT.
run() {
  local tag=$1 tree=$2 variant=$3 cap=$4; shift 4
  local t=$(( $(left) - 20 )); [ "$t" -gt "$cap" ] && t=$cap
  if [ "$t" -lt 60 ]; then note "SKIP $tag: only $(left)s left in the call"; return 125; fi
  note "RUN $tag ($variant, $tree, timeout ${t}s) $*"
  # shellcheck disable=SC2086  # E2E_TRAIN_ARGS (e.g. "--optimizer adamw") splits on purpose
  E2E_TAG=$tag E2E_TIMEOUT=$t bash e2e/run_remote.sh "$tree" "$variant" "$OUT" "$@" ${E2E_TRAIN_ARGS:-}
  local rc=$?
  note "END $tag rc=$rc"
  collect_snapshots "$tag"
  return $rc
}

collect_snapshots() {  # move this run's /tmp/memory_snapshot_rank*.pickle aside, by run tag
  local f found=0
  for f in /tmp/memory_snapshot_rank*.pickle; do
    [ -e "$f" ] || continue
    mkdir -p "$SNAP/$1"; mv "$f" "$SNAP/$1/"; found=1
  done
  [ $found = 1 ] && note "snapshots of $1: $(cd "$SNAP/$1" && ls -l | tail -n +2 | awk '{print $9"="$5}' | tr '\n' ' ')"
  return 0
}

pack_snapshots() {  # one gzip'd tar of the functional runs' snapshots (<=16 MiB comes back)
  [ -d "$SNAP" ] || return 0
  tar -C "$SNAP" -czf "$OUT/snapshots.tgz" "$@" 2>/dev/null || true
  note "snapshots.tgz $(du -b "$OUT/snapshots.tgz" 2>/dev/null | cut -f1) bytes"
  local size; size=$(du -b "$OUT/snapshots.tgz" 2>/dev/null | cut -f1)
  if [ "${size:-0}" -gt 16000000 ]; then
    note "snapshots.tgz over 16 MB: keeping rank 0 of the instrumented run only"
    tar -C "$SNAP" -czf "$OUT/snapshots.tgz" $(cd "$SNAP" && ls -d instr/*rank0* 2>/dev/null) || true
    [ "$(du -b "$OUT/snapshots.tgz" | cut -f1)" -gt 16000000 ] && rm -f "$OUT/snapshots.tgz" && note "dropped snapshots.tgz (too large)"
  fi
}

setup_phase2() {
  note "setup phase2"
  bash e2e/setup_remote.sh phase2 2>&1 | tee -a "$meta"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { note "SETUP FAILED (rc=$rc, see above)"; exit 4; }
  {
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
  } >> "$meta" 2>&1
  for t in "$@"; do
    [ -f "$t/pithtrain/__init__.py" ] || { note "MISSING tree $t (carry it)"; exit 2; }
    note "tree $t: $(grep -rlE '_mem_gb|_lmem|_setup_mem' "$t/pithtrain" | wc -l) files with memory prints"
  done
}

functional() {
  setup_phase2 "$PLAIN_TREE" "$INSTR_TREE"
  rm -rf "$CKPT" "$SNAP" /tmp/memory_snapshot_rank*.pickle
  run plain "$PLAIN_TREE" qwen3-tiny 200 --max-steps 3 --loss-steps 0,2
  run instr "$INSTR_TREE" qwen3-tiny 200 --max-steps 3 --loss-steps 0,2 \
      --save-interval 2 --save-location "$CKPT/qwen3-tiny"
  if [ -d "$CKPT/qwen3-tiny/torch-dcp/step-00000002" ]; then
    # Resume from the step-2 checkpoint: drop the later one that max_steps=3 also saved.
    rm -rf "$CKPT/qwen3-tiny/torch-dcp/step-00000003"
    run resume "$INSTR_TREE" qwen3-tiny 200 --max-steps 3 --save-location "$CKPT/qwen3-tiny"
  else
    note "SKIP resume: no step-2 checkpoint under $CKPT/qwen3-tiny"
  fi
  pack_snapshots .
  case "${E2E_WITH_OVERHEAD:-auto}" in
    1) overhead_runs ;;
    auto) if [ "$(left)" -gt 300 ]; then overhead_runs; else note "overhead runs left for a separate call ($(left)s left)"; fi ;;
  esac
}

overhead_runs() {
  local kind n=0
  for kind in ${E2E_OVERHEAD_ORDER:-plain instr}; do
    n=$((n + 1))
    local tree=$PLAIN_TREE; [ "$kind" = instr ] && tree=$INSTR_TREE
    local tag=big-$kind; [ -e "$OUT/$tag.log" ] && tag=big-$kind-$n
    run "$tag" "$tree" qwen3-big 280 --max-steps 14
    rm -f /tmp/memory_snapshot_rank*.pickle
  done
  rm -rf "$SNAP"/big-*
}

case "$mode" in
  phase1)
    bash e2e/setup_remote.sh phase1 2>&1 | tee -a "$meta"
    nvidia-smi -L >> "$meta" 2>&1
    note "phase1 done: make the next call (phase 2) within 30 s"
    ;;
  functional) functional ;;
  overhead) setup_phase2 "$PLAIN_TREE" "$INSTR_TREE"; overhead_runs ;;
  dsv2)
    setup_phase2 "$PLAIN_TREE" "$INSTR_DSV2_TREE"
    rm -f /tmp/memory_snapshot_rank*.pickle
    run dsv2-plain "$PLAIN_TREE" dsv2-tiny 220 --max-steps 3
    run dsv2-instr "$INSTR_DSV2_TREE" dsv2-tiny 220 --max-steps 3
    pack_snapshots dsv2-instr
    ;;
  *) echo "usage: $0 phase1|functional|overhead|dsv2" >&2; exit 2 ;;
esac
note "done; files in \$OUT: $(ls "$OUT" | tr '\n' ' ')"
echo "== summary"; grep -H "E2E_END\|E2E_LOSS_SUMS step0\|Traceback\|Error" "$OUT"/*.log 2>/dev/null | cut -c1-300 | tail -40
exit 0
