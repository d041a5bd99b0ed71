#!/usr/bin/env bash
# Runs HERE (pure Python, no torch, no GPU): PithTrain's own memory estimator for every what-if
# shape of device_call.sh whatif (issue 22), pp = ep = cp = 1 on one GPU of 140 GB.
#   bash e2e/whatif_estimates.sh OUT_DIR
# Writes OUT_DIR/estimate-s<seq>-mb<mb>.txt, each the estimator's whole stdout for
#   python3 -m tools.memory_estimator --model e2e/configs/qwen3-moe-big.json --pp-size 1
#     --ep-size 1 --cp-size 1 --total-gpus 1 --micro-batch-size MB
#     --global-batch-size MB*CHUNKS --sequence-length SEQ --gpu-memory-gb 140
# run in the PithTrain export (PT_SRC, default /work/pt), and OUT_DIR/estimate-commands.txt with
# the command of each file. Shapes: E2E_WHATIF_SHAPES and E2E_OOM_LADDER as device_call.sh has
# them (defaults the same), CHUNKS = E2E_WHATIF_CHUNKS (default 8).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:?usage: $0 OUT_DIR}
SRC=${PT_SRC:-/work/pt}
[ -d "$SRC/tools/memory_estimator" ] || { echo "whatif_estimates: no estimator under $SRC" >&2; exit 2; }
config=$PWD/e2e/configs/qwen3-moe-big.json
chunks=${E2E_WHATIF_CHUNKS:-8}
shapes="${E2E_WHATIF_SHAPES:-s1024-mb1 s2048-mb1 s4096-mb1 s8192-mb1 s1024-mb2} ${E2E_OOM_LADDER:-s8192-mb32 s8192-mb64}"
mkdir -p "$out"
: > "$out/estimate-commands.txt"
for shape in $shapes; do
  [[ $shape =~ ^s([0-9]+)-mb([0-9]+)$ ]] || { echo "whatif_estimates: bad shape $shape" >&2; exit 2; }
  seq=${BASH_REMATCH[1]}; mb=${BASH_REMATCH[2]}
  args=(--model "$config" --pp-size 1 --ep-size 1 --cp-size 1 --total-gpus 1
        --micro-batch-size "$mb" --global-batch-size $((mb * chunks)) --sequence-length "$seq"
        --gpu-memory-gb 140)
  (cd "$SRC" && python3 -B -m tools.memory_estimator "${args[@]}") > "$out/estimate-$shape.txt"
  echo "estimate-$shape.txt: python3 -B -m tools.memory_estimator ${args[*]}" \
    | sed "s|$PWD/e2e/configs|<e2e>/configs|" >> "$out/estimate-commands.txt"
  echo "wrote $out/estimate-$shape.txt: $(grep -E '^\s*TOTAL' "$out/estimate-$shape.txt" | tr -s ' ') $(grep -o 'STATUS: [A-Z]*' "$out/estimate-$shape.txt")"
done
