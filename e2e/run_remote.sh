#!/usr/bin/env bash
# Runs ON the GPU machine, from the repository root: ONE PithTrain training run.
#   e2e/run_remote.sh <pithtrain-tree> <variant> <out-dir> [train.py options ...]
# <pithtrain-tree>  a folder holding the `pithtrain/` package (plain export or instrumented copy)
# <variant>         a preset of e2e/train.py: qwen3-tiny | gpt-oss-tiny | dsv2-tiny | qwen3-big
# <out-dir>         where the log goes: <out-dir>/${E2E_TAG:-<variant>-<tree name>}.log
# Extra options go to train.py (--max-steps N, --save-interval K, --save-location DIR, ...).
# Env: E2E_TIMEOUT (s, default 300) caps the run; E2E_PORT picks the rendezvous port;
# E2E_TORCHRUN replaces the launcher (default: python3 -m torch.distributed.run, i.e. torchrun);
# E2E_TMP (default /tmp) holds the datasets and the inductor cache; E2E_CKPT and E2E_SNAPDIR
# (set by device_call.sh) are only recorded in the E2E_PATHS line.
# Needs setup_remote.sh phase1 + phase2 done on this machine. Exit status: torchrun's (124 = timeout).
# The log opens with what keep_results.sh and check.py read back: E2E_PATHS (the machine paths
# that keep_results.sh rewrites) and E2E_PRINTS (what the tree was instrumented to print, read
# from its code by tree_prints.py).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
if [ $# -lt 3 ]; then
  echo "usage: $0 <pithtrain-tree> <variant> <out-dir> [train.py options ...]" >&2; exit 2
fi
tree=$(cd "$1" && pwd) || exit 2
variant=$2
out=$3
shift 3
[ -f "$tree/pithtrain/__init__.py" ] || { echo "run_remote: $tree/pithtrain is not a PithTrain package" >&2; exit 2; }
mkdir -p "$out"
tag=${E2E_TAG:-$variant-$(basename "$tree")}
logf="$out/$tag.log"

# NVLink multicast stays off (KINDS.md: a program using it can take the host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1
export TORCH_SYMBOLIZE_MODE=${TORCH_SYMBOLIZE_MODE:-dladdr}  # fast C++ frames in snapshots
TMP=${E2E_TMP:-/tmp}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$TMP/e2e_inductor}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
export E2E_TREE=$tree
eval "$(bash e2e/setup_remote.sh env)"

# The dataset folder: the variant's own for its preset shape, one per shape otherwise
# (--seq/--micro-batch/--global-batch among the options; train.py --dataset-name says which).
dataset=$(python3 e2e/train.py --variant "$variant" "$@" --dataset-name) || exit 5
data=$TMP/e2e_data/$dataset
if [ ! -f "$data/shard-000.bin" ]; then
  python3 e2e/train.py --variant "$variant" "$@" --make-dataset "$data" || exit 5
fi

port=${E2E_PORT:-$((29500 + RANDOM % 2000))}
limit=${E2E_TIMEOUT:-300}
# The site-packages folder that holds torch (its frames fill the snapshots); found, not imported.
torch_site=$(python3 -c 'import importlib.util as u, os; print(os.path.dirname(os.path.dirname(u.find_spec("torch").origin)))' 2>/dev/null || echo none)
{
  echo "E2E_RUN tag=$tag variant=$variant tree=$tree port=$port timeout=${limit}s args=$*"
  echo "E2E_START $(date -u +%FT%TZ)"
  echo "E2E_PATHS tree=$tree repo=$PWD site=${E2E_SITE:-/tmp/site} data=$TMP/e2e_data" \
       "ckpt=${E2E_CKPT:-$TMP/e2e_ckpt} snapdir=${E2E_SNAPDIR:-/tmp}" \
       "inductor=$TORCHINDUCTOR_CACHE_DIR torch=$torch_site"
  python3 e2e/tree_prints.py "$tree" || echo "E2E_PRINTS {}"
} | tee "$logf"
t0=$SECONDS
# torchrun, as the module of the same python3 that holds torch (E2E_TORCHRUN overrides it).
read -r -a launcher <<< "${E2E_TORCHRUN:-python3 -m torch.distributed.run}"
# timeout signals its whole process group: torchrun and the workers it started.
timeout --signal=TERM --kill-after=30 "$limit" \
  "${launcher[@]}" --nproc-per-node=gpu --rdzv-backend=c10d --rdzv-endpoint="localhost:$port" \
  e2e/train.py --variant "$variant" --data-dir "$data" "$@" 2>&1 | tee -a "$logf"
rc=${PIPESTATUS[0]}
echo "E2E_END tag=$tag rc=$rc wall=$((SECONDS - t0))s" | tee -a "$logf"
exit "$rc"
