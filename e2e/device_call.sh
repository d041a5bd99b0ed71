#!/usr/bin/env bash
# The command of ONE `run` device call (runs ON the GPU machine, from the repository root).
# What each mode needs carried, and the order of the calls, is in e2e/README.md.
#   phase1    stage the cu13 libs (carry e2e/.payload/cu13 ONLY: it is 51 MiB)
#   matrix    phase 2 install, lay each instrumented tree (a copy of plain with its overlay from
#             prepare_trees.sh on top), then the runs of MATRIX below in priority order. A run
#             that an earlier call on this machine finished (rc 0) is not run again, so the same
#             command, repeated, goes on where the last call stopped; a plain/instr pair starts
#             only when both fit the time left; anything that does not fit is left PENDING.
#   overhead  phase 2 install, then qwen3-big: plain and instrumented (the qwen3 overlay),
#             14 steps each (E2E_OVERHEAD_ORDER, default "plain instr").
#   whatif    phase 2 install, then issue 22's runs of qwen3-big in the `qwen3` overlay (made
#             with --detail-layers of model chunk 1, e2e/README.md): the shapes of
#             E2E_WHATIF_SHAPES (s<seq>-mb<micro-batch>, default s1024-mb1 s2048-mb1 s4096-mb1
#             s8192-mb1 s1024-mb2), each with global batch = micro-batch x E2E_WHATIF_CHUNKS
#             (default 8, so num_chunks stays 8) and E2E_WHATIF_STEPS steps (default 4), then the
#             OOM ladder E2E_OOM_LADDER (default s8192-mb32 s8192-mb64), in order, until one run
#             fails with torch.OutOfMemoryError. Tags: whatif-<shape>-instr. Only the rank-0
#             snapshots of E2E_WHATIF_SNAPS (default s1024-mb1 s8192-mb1) come back. Repeated on
#             the warm machine, the call goes on where the last one stopped, like matrix.
#             Its overlays: E2E_WHATIF_OVERLAYS (default e2e/.work/overlays-whatif, written by
#             E2E_OVERLAYS_DIR=e2e/.work/overlays-whatif prepare_trees.sh; carry that folder).
# Env: E2E_BUDGET (s, default 560 of the tool's 600) bounds the whole command; E2E_MATRIX
#   (tags, default all seven, in priority order); E2E_TRAIN_ARGS is appended to every train.py
#   call (e.g. "--optimizer adamw"); E2E_EST_FIRST / E2E_EST_NEXT / E2E_EST_RESUME (s) are the
#   planning estimates of a model's first run on this machine, a later run, the resume;
#   E2E_TMP (default /tmp) holds the machine-local state, E2E_SNAPDIR (default /tmp) is where
#   the trees write their snapshots (memprints add --snapshot-dir); E2E_DRY_RUN=1 skips the
#   install and the GPU queries (test_device_call.py runs the matrix here with a fake torchrun).
# Files back in $OUT (at most 4, far below 8 and 16 MB): meta.txt, logs.tgz (the logs of the
#   runs this call finished), snapshots.tgz (their rank-0 memory snapshots), and the log of a
#   run still going when the command was stopped.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
mode=${1:-}
OUT=${OUT:-$PWD/e2e/.work/out}
mkdir -p "$OUT"
BUDGET=${E2E_BUDGET:-560}
PLAIN_TREE=${PLAIN_TREE:-e2e/.work/plain}
OVERLAYS=${OVERLAYS:-e2e/.work/overlays}
TMP=${E2E_TMP:-/tmp}
SNAPDIR=${E2E_SNAPDIR:-/tmp}
TREES=$TMP/e2e_trees
STATE=$TMP/e2e_state          # <tag>.rc of every run on this machine, across calls
CALL=$TMP/e2e_call            # this call's finished logs and snapshots, packed into $OUT
export E2E_CKPT=$TMP/e2e_ckpt E2E_TMP=$TMP E2E_SNAPDIR=$SNAPDIR
CKPT=$E2E_CKPT
EST_FIRST=${E2E_EST_FIRST:-100}
EST_NEXT=${E2E_EST_NEXT:-70}
EST_RESUME=${E2E_EST_RESUME:-60}
meta="$OUT/meta.txt"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

# tag: tree (plain or an overlay name) | variant | train.py options. Priority order.
declare -A TREE VARIANT OPTS
matrix_entry() { TREE[$1]=$2; VARIANT[$1]=$3; OPTS[$1]=$4; }
matrix_entry qwen3-plain   plain   qwen3-tiny   "--max-steps 3 --loss-steps 0,2"
matrix_entry qwen3-instr   qwen3   qwen3-tiny   "--max-steps 3 --loss-steps 0,2 --save-interval 2 --save-location $CKPT/qwen3-tiny"
matrix_entry gpt-oss-plain plain   gpt-oss-tiny "--max-steps 3"
matrix_entry gpt-oss-instr gpt-oss gpt-oss-tiny "--max-steps 3"
matrix_entry dsv2-plain    plain   dsv2-tiny    "--max-steps 3"
matrix_entry dsv2-instr    dsv2    dsv2-tiny    "--max-steps 3"
matrix_entry qwen3-resume  qwen3   qwen3-tiny   "--max-steps 3 --save-location $CKPT/qwen3-tiny"
MATRIX=${E2E_MATRIX:-qwen3-plain qwen3-instr gpt-oss-plain gpt-oss-instr dsv2-plain dsv2-instr qwen3-resume}

note() { echo "[device_call +${SECONDS}s] $*" | tee -a "$meta"; }
left() { echo $((BUDGET - SECONDS)); }
done_ok() { [ "$(cat "$STATE/$1.rc" 2>/dev/null)" = 0 ]; }
tree_dir() { if [ "$1" = plain ]; then echo "$PLAIN_TREE"; else echo "$TREES/$1"; fi; }

estimate() {  # estimate <tag>: seconds this run is planned to take on this machine
  case "$1" in
    *-resume) echo "$EST_RESUME" ;;
    *) if [ -e "$STATE/variant-${VARIANT[$1]}" ]; then echo "$EST_NEXT"; else echo "$EST_FIRST"; fi ;;
  esac
}

pack() {  # re-pack this call's finished logs and snapshots into $OUT (a stopped call keeps them)
  if ls "$CALL"/logs/*.log >/dev/null 2>&1; then
    tar -C "$CALL/logs" -czf "$OUT/logs.tgz.tmp" . && mv "$OUT/logs.tgz.tmp" "$OUT/logs.tgz"
  fi
  if [ -n "$(ls -A "$CALL/snap" 2>/dev/null)" ]; then
    tar -C "$CALL/snap" -czf "$OUT/snapshots.tgz.tmp" . && mv "$OUT/snapshots.tgz.tmp" "$OUT/snapshots.tgz"
    local size; size=$(stat -c %s "$OUT/snapshots.tgz")
    if [ "$size" -gt 14000000 ]; then  # 16 MB come back per call; logs and meta need room too
      note "snapshots.tgz $size bytes: over 14 MB, dropped (meta.txt keeps the sizes)"
      rm -f "$OUT/snapshots.tgz"
    fi
  fi
}

keep_snapshots() {  # keep_snapshots <tag> <log>: move the run's rank-0 snapshots aside by tag
  # The files the log says rank 0 saved (wherever memprints put them), and any rank-0 pickle
  # in $SNAPDIR; other ranks' snapshots are only noted (16 MB come back per call).
  local tag=$1 log=$2 f
  local named; named=$(grep -ao '\[rank=0\] Memory snapshot saved to [^ ]*\.pickle' "$log" | sed 's/.* saved to //')
  for f in $named "$SNAPDIR"/memory_snapshot*.pickle; do
    [ -f "$f" ] || continue
    note "snapshot of $tag: $f $(stat -c %s "$f") bytes"
    case "$(basename "$f")" in
      *rank0_*|*rank0.*) mkdir -p "$CALL/snap/$tag"; mv "$f" "$CALL/snap/$tag/" ;;
      *) rm -f "$f" ;;
    esac
  done
}

# run <tag> [cap]: one run, its log straight into $OUT while it runs, capped at `cap` seconds
# (default: 200 for a model's first run on this machine, 150 for a later one, 120 to resume).
run() {
  local tag=$1 cap=${2:-200}
  if [ -z "${2:-}" ]; then
    [ "$(estimate "$tag")" = "$EST_NEXT" ] && cap=150
    case "$tag" in *-resume) cap=120 ;; esac
  fi
  local t=$(( $(left) - 20 )); [ "$t" -gt "$cap" ] && t=$cap
  local tree; tree=$(tree_dir "${TREE[$tag]}")
  note "RUN $tag (${VARIANT[$tag]}, $tree, timeout ${t}s) ${OPTS[$tag]}"
  rm -f "$SNAPDIR"/memory_snapshot*.pickle
  # shellcheck disable=SC2086  # the options (and E2E_TRAIN_ARGS) split on purpose
  E2E_TAG=$tag E2E_TIMEOUT=$t bash e2e/run_remote.sh "$tree" "${VARIANT[$tag]}" "$OUT" \
    ${OPTS[$tag]} ${E2E_TRAIN_ARGS:-}
  local rc=$?
  echo "$rc" > "$STATE/$tag.rc"
  touch "$STATE/variant-${VARIANT[$tag]}"
  note "END $tag rc=$rc"
  mkdir -p "$CALL/logs"
  mv "$OUT/$tag.log" "$CALL/logs/$tag.log"
  keep_snapshots "$tag" "$CALL/logs/$tag.log"
  pack
  return $rc
}

# fits <seconds>: whether that much planned time is left (20 s kept for packing up).
fits() { [ $(( $(left) - 20 )) -ge "$1" ]; }

run_matrix() {
  local tag partner need
  for tag in $MATRIX; do
    [ -n "${VARIANT[$tag]:-}" ] || { note "unknown matrix tag $tag (skipped)"; continue; }
    if done_ok "$tag"; then note "DONE before: $tag"; continue; fi
    need=$(estimate "$tag")
    case "$tag" in
      *-plain)
        partner=${tag%-plain}-instr
        if [[ " $MATRIX " == *" $partner "* ]] && ! done_ok "$partner"; then
          need=$((need + EST_NEXT))  # the pair runs in one go on this machine, or not at all
        fi ;;
      *-instr)  # after its plain run on this machine (a failed one too: the prints still tell)
        partner=${tag%-instr}-plain
        if [[ " $MATRIX " == *" $partner "* ]] && [ ! -e "$STATE/$partner.rc" ]; then
          note "SKIP $tag: its plain run $partner did not run on this machine"; continue
        fi ;;
      *-resume)
        if [ ! -d "$CKPT/qwen3-tiny/torch-dcp/step-00000002" ]; then
          note "SKIP $tag: no step-2 checkpoint under $CKPT/qwen3-tiny (qwen3-instr saves it)"; continue
        fi
        # Resume from the step-2 checkpoint: drop the later one that max_steps=3 also saved.
        rm -rf "$CKPT/qwen3-tiny/torch-dcp/step-00000003" ;;
    esac
    if ! fits "$need"; then note "SKIP $tag: needs ~${need}s, $(( $(left) - 20 ))s left"; continue; fi
    # qwen3-instr must start from scratch (a checkpoint there would be loaded) and save anew.
    [ "$tag" = qwen3-instr ] && rm -rf "$CKPT/qwen3-tiny"
    run "$tag"
  done
  local pending=()
  for tag in $MATRIX; do done_ok "$tag" || pending+=("$tag")
  done
  if [ ${#pending[@]} = 0 ]; then note "ALL DONE: every matrix run finished on this machine"
  else note "PENDING: ${pending[*]} (repeat this call on the warm machine for them)"; fi
}

lay_trees() {  # a copy of plain with each overlay on top, checked against the overlay's sha256s
  local o name
  rm -rf "$TREES"; mkdir -p "$TREES"
  for o in "$OVERLAYS"/*/; do
    name=$(basename "$o")
    [ -f "$o/E2E_OVERLAY.txt" ] || { note "MISSING $o/E2E_OVERLAY.txt (run prepare_trees.sh)"; exit 2; }
    cp -a "$PLAIN_TREE" "$TREES/$name"
    cp -a "$o/." "$TREES/$name/"
    if ! (cd "$TREES/$name" && sed -n '/^--- sha256/,$p' E2E_OVERLAY.txt | tail -n +2 | sha256sum -c --quiet -); then
      note "overlay $name does not match its E2E_OVERLAY.txt"; exit 2
    fi
    note "tree $TREES/$name: plain + $(sed -n '/^--- sha256/,$p' "$o/E2E_OVERLAY.txt" | tail -n +2 | wc -l) files ($(sed -n 2p "$o/E2E_OVERLAY.txt"))"
  done
}

setup_phase2() {
  [ -f "$PLAIN_TREE/pithtrain/__init__.py" ] || { note "MISSING tree $PLAIN_TREE (carry it)"; exit 2; }
  [ -d "$OVERLAYS" ] || { note "MISSING $OVERLAYS (carry it)"; exit 2; }
  if [ "${E2E_DRY_RUN:-0}" = 1 ]; then
    note "DRY RUN: no install, no GPU queries"
  else
    note "setup phase2"
    bash e2e/setup_remote.sh phase2 2>&1 | tee -a "$meta"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || { note "SETUP FAILED (rc=$rc, see above)"; exit 4; }
    {
      nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
      python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'
    } >> "$meta" 2>&1
  fi
  mkdir -p "$STATE"
  rm -rf "$CALL"; mkdir -p "$CALL/logs" "$CALL/snap"
  lay_trees
}

# A what-if run: tag whatif-<shape>-instr, shape s<seq>-mb<micro-batch>.
whatif_entry() {
  local shape=$1 seq mb
  [[ $shape =~ ^s([0-9]+)-mb([0-9]+)$ ]] || { note "bad what-if shape $shape (s<seq>-mb<mb>)"; return 1; }
  seq=${BASH_REMATCH[1]}; mb=${BASH_REMATCH[2]}
  matrix_entry "whatif-$shape-instr" qwen3 qwen3-big \
    "--max-steps ${E2E_WHATIF_STEPS:-4} --seq $seq --micro-batch $mb --global-batch $((mb * ${E2E_WHATIF_CHUNKS:-8}))"
}

whatif_oomed() { grep -aq 'torch.OutOfMemoryError: CUDA out of memory' "$STATE/$1.log" 2>/dev/null; }

whatif_runs() {
  local shape tag keep need
  local shapes=${E2E_WHATIF_SHAPES:-s1024-mb1 s2048-mb1 s4096-mb1 s8192-mb1 s1024-mb2}
  local ladder=${E2E_OOM_LADDER:-s8192-mb32 s8192-mb64}
  local snaps=" ${E2E_WHATIF_SNAPS:-s1024-mb1 s8192-mb1} "
  local est=${E2E_EST_WHATIF:-90} cap=${E2E_WHATIF_CAP:-240}
  local oom_done=
  for shape in $ladder; do  # an earlier call on this machine already found the OOM
    whatif_oomed "whatif-$shape-instr" && oom_done=$shape
  done
  for shape in $shapes ladder $ladder; do
    if [ "$shape" = ladder ]; then
      [ -n "$oom_done" ] && { note "OOM found before: $oom_done"; break; }
      continue
    fi
    whatif_entry "$shape" || continue
    tag=whatif-$shape-instr
    if done_ok "$tag"; then note "DONE before: $tag"; continue; fi
    if [[ " $ladder " == *" $shape "* ]] && [ -e "$STATE/$tag.rc" ]; then
      note "DONE before: $tag (rc=$(cat "$STATE/$tag.rc"), no OOM)"; continue
    fi
    need=$est; [ -e "$STATE/variant-qwen3-big" ] || need=$((est + 40))
    if ! fits "$need"; then note "SKIP $tag: needs ~${need}s, $(( $(left) - 20 ))s left"; continue; fi
    run "$tag" "$cap"
    cp "$CALL/logs/$tag.log" "$STATE/$tag.log"
    if [[ $snaps != *" $shape "* ]]; then rm -rf "$CALL/snap/$tag"; pack; fi
    if [[ " $ladder " == *" $shape "* ]] && whatif_oomed "$tag"; then
      note "OOM: $tag ran out of memory (the ladder stops here)"; oom_done=$shape; break
    fi
  done
  local pending=()
  for shape in $shapes; do done_ok "whatif-$shape-instr" || pending+=("whatif-$shape-instr"); done
  [ -n "$oom_done" ] || pending+=("an OOM of the ladder ($ladder)")
  if [ ${#pending[@]} = 0 ]; then note "ALL DONE: every what-if run finished on this machine, OOM at $oom_done"
  else note "PENDING: ${pending[*]} (repeat this call on the warm machine for them)"; fi
}

overhead_runs() {
  local kind n=0 tag
  for kind in ${E2E_OVERHEAD_ORDER:-plain instr}; do
    n=$((n + 1))
    tag=big-$kind; [ -e "$CALL/logs/$tag.log" ] && tag=big-$kind-$n
    TREE[$tag]=plain; [ "$kind" = instr ] && TREE[$tag]=qwen3
    VARIANT[$tag]=qwen3-big; OPTS[$tag]="--max-steps 14"
    if fits 150; then run "$tag" 280; else note "SKIP $tag: $(left)s left"; fi
    rm -rf "$CALL/snap/$tag"
  done
  pack
}

case "$mode" in
  phase1)
    bash e2e/setup_remote.sh phase1 2>&1 | tee -a "$meta"
    nvidia-smi -L >> "$meta" 2>&1
    note "phase1 done: make the next call (matrix) within 30 s"
    ;;
  matrix) setup_phase2; run_matrix ;;
  overhead) setup_phase2; overhead_runs ;;
  whatif) OVERLAYS=${E2E_WHATIF_OVERLAYS:-e2e/.work/overlays-whatif}; setup_phase2; whatif_runs ;;
  *) echo "usage: $0 phase1|matrix|overhead|whatif" >&2; exit 2 ;;
esac
note "done; files in \$OUT: $(cd "$OUT" && printf '%s ' *)"
echo "== summary"
grep -aH "E2E_END\|E2E_LOSS_SUMS step0\|Traceback\|Error" "$CALL"/logs/*.log 2>/dev/null \
  | cut -c1-300 | tail -40
exit 0
