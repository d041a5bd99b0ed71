#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root. Installs the carried wheels into /tmp/site.
# Two phases, because one `run` call carries at most 64 MiB:
#   phase1  (carry e2e/.payload/cu13)  unpack the re-packed nvidia-cutlass-dsl-libs-cu13 wheel
#           into /tmp/e2e_stage and zip it back into a wheel there (no install yet: pip --target
#           never merges a top-level folder that already exists, and libs-base/-core/-cu13 all
#           share nvidia_cutlass_dsl/, so every wheel must go into ONE pip call, in phase 2).
#   phase2  (carry e2e/.payload/rest)  pip install --no-index --no-deps --target /tmp/site of
#           all wheels at once, then our stand-ins for wandb and deep_gemm (e2e/stubs), then an
#           import smoke test. Needs phase 1 on the SAME machine (it is warm 30 s after a call).
#   env     print the export lines (PYTHONPATH ...) that run_remote.sh uses.
# Idempotent: each phase records what it did and skips work already done with the same inputs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SITE=${E2E_SITE:-/tmp/site}
STAGE=${E2E_STAGE:-/tmp/e2e_stage}
PY=${PYTHON:-python3}
PAYLOAD=e2e/.payload

log() { echo "[setup_remote] $*"; }

verify() {  # verify the sha256 of every payload file listed for one bundle that is present
  local bundle=$1 manifest=$PAYLOAD/$1/MANIFEST.sha256
  [ -f "$manifest" ] || { log "no $manifest: did fetch_wheels.sh run and is $PAYLOAD/$bundle carried?"; exit 3; }
  ( cd $PAYLOAD && grep " $bundle/" "$bundle/MANIFEST.sha256" | sha256sum -c --quiet - ) \
    || { log "checksum mismatch in $bundle"; exit 3; }
}

phase1() {
  verify cu13
  local tarball; tarball=$(ls $PAYLOAD/cu13/*.tar.xz)
  local name; name=$(basename "$tarball" .tar.xz)
  local sum; sum=$(sha256sum "$tarball" | cut -d' ' -f1)
  mkdir -p "$STAGE/wheels"
  if [ -f "$STAGE/cu13.done" ] && [ "$(cat "$STAGE/cu13.done")" = "$sum" ] && [ -s "$STAGE/wheels/$name.whl" ]; then
    log "phase1: $name.whl already staged"; return 0
  fi
  rm -rf "$STAGE/cu13tree" "$STAGE/wheels/$name.whl"
  mkdir -p "$STAGE/cu13tree"
  local t0=$SECONDS
  tar -C "$STAGE/cu13tree" -xJf "$tarball"
  # Zip the tree back into a wheel (stored, not deflated: only pip reads it, right after).
  $PY - "$STAGE/cu13tree" "$STAGE/wheels/$name.whl" <<'PYEOF'
import os, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out + ".tmp", "w", zipfile.ZIP_STORED) as z:
    for d, _, files in os.walk(root):
        for f in sorted(files):
            p = os.path.join(d, f)
            z.write(p, os.path.relpath(p, root))
os.replace(out + ".tmp", out)
PYEOF
  rm -rf "$STAGE/cu13tree"
  echo "$sum" > "$STAGE/cu13.done"
  rm -f "$STAGE/site.done"  # a new cu13 wheel means phase 2 must reinstall
  log "phase1: staged $STAGE/wheels/$name.whl ($(du -h "$STAGE/wheels/$name.whl" | cut -f1)) in $((SECONDS - t0)) s"
}

env_lines() {
  # The PithTrain tree under test (E2E_TREE, set by run_remote.sh) comes first.
  echo "export PYTHONPATH=\${E2E_TREE:+\$E2E_TREE:}$SITE:$SITE/nvidia_cutlass_dsl/dsl_packages"
}

phase2() {
  if ! ls "$STAGE"/wheels/nvidia_cutlass_dsl_libs_cu13-*.whl >/dev/null 2>&1; then
    log "PHASE1_MISSING: $STAGE has no cu13 wheel. The machine was given back between calls;"
    log "redo device call 1 (setup_remote.sh phase1 with carry e2e/.payload/cu13), then this one."
    exit 4
  fi
  verify rest
  local key; key=$( (sha256sum $PAYLOAD/rest/*.whl "$STAGE"/wheels/*.whl | cut -d' ' -f1;
                     cat e2e/stubs/*/*.py e2e/stubs/*/*/*.py) | sha256sum | cut -d' ' -f1)
  if [ -f "$STAGE/site.done" ] && [ "$(cat "$STAGE/site.done")" = "$key" ]; then
    log "phase2: $SITE already installed"
  else
    local t0=$SECONDS
    rm -rf "$SITE"
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target "$SITE" $PAYLOAD/rest/*.whl "$STAGE"/wheels/*.whl
    cp -r e2e/stubs/wandb e2e/stubs/deep_gemm "$SITE/"
    echo "$key" > "$STAGE/site.done"
    log "phase2: installed into $SITE in $((SECONDS - t0)) s"
  fi
  # Smoke test: every module PithTrain imports at load, from /tmp/site, plus torch facts.
  eval "$(env_lines)"
  $PY - <<'PYEOF'
import importlib, torch
mods = ["cutlass", "flash_attn.cute.interface", "quack", "tvm_ffi", "fla", "wandb", "deep_gemm"]
for m in mods:
    mod = importlib.import_module(m)
    print("[setup_remote] import %-28s %s" % (m, getattr(mod, "__file__", "?")))
import wandb, deep_gemm
assert getattr(wandb, "E2E_STUB", False) and getattr(deep_gemm, "E2E_STUB", False)
print("[setup_remote] torch %s cuda %s gpus %d grouped_mm %s" % (
    torch.__version__, torch.version.cuda, torch.cuda.device_count(),
    hasattr(torch.nn.functional, "grouped_mm")))
PYEOF
}

case "${1:-}" in
  phase1) phase1 ;;
  phase2) phase2 ;;
  env) env_lines ;;
  *) echo "usage: $0 phase1|phase2|env" >&2; exit 2 ;;
esac
