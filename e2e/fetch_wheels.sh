#!/usr/bin/env bash
# Download (HERE, where PyPI is reachable) the wheels PithTrain needs on the GPU machine and
# split them into two carry-able bundles (each call of the `run` tool carries <= 64 MiB):
#   e2e/.payload/cu13/  the 92 MB nvidia-cutlass-dsl-libs-cu13 wheel, unzipped and re-packed
#                       with xz (tar -cJf, ~51 MiB), sent ALONE in device call 1
#   e2e/.payload/rest/  every other wheel (about 12 MB), sent in device call 2
# wandb and deep_gemm are NOT downloaded: e2e/stubs/ holds our own import stand-ins.
# Idempotent: wheels already present are not fetched again; the tarball is rebuilt only
# when missing. Usage: bash e2e/fetch_wheels.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
payload="$here/.payload"
dl="$payload/download"
mkdir -p "$dl" "$payload/rest" "$payload/cu13"

PIP="${PIP:-python3 -m pip}"
COMMON=(download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 -d "$dl")

# name==version as GPU.md lists them (pure-python wheels match too: pip always accepts
# py3-none-any next to the platforms named).
PRE=(flash-attn-4==4.0.0b36)
REL=(nvidia-cutlass-dsl==4.8.1
     nvidia-cutlass-dsl-libs-base==4.8.1
     nvidia-cutlass-dsl-libs-core==4.8.1
     nvidia-cutlass-dsl-libs-cu13==4.8.1
     quack-kernels==0.6.5
     apache-tvm-ffi==0.1.15.post2
     torch-c-dlpack-ext==0.1.5
     flash-linear-attention==0.6.0
     fla-core==0.6.0)

$PIP "${COMMON[@]}" --pre "${PRE[@]}"
$PIP "${COMMON[@]}" "${REL[@]}"

# Check every pinned name==version is present exactly once.
for spec in "${PRE[@]}" "${REL[@]}"; do
  name="${spec%%==*}"; ver="${spec##*==}"
  norm="$(echo "$name" | tr '-' '_')"
  n=0
  for w in "$dl/${norm}-${ver}-"*.whl; do [ -e "$w" ] && n=$((n + 1)); done
  if [ "$n" != 1 ]; then echo "fetch_wheels: expected one wheel for $spec, found $n" >&2; exit 1; fi
done

# Bundle 2: everything but the cu13 libs (the metapackage nvidia-cutlass-dsl is kept although
# pip --target ignores its .pth: setup_remote.sh puts dsl_packages on PYTHONPATH itself).
rm -f "$payload/rest/"*.whl
for w in "$dl"/*.whl; do
  case "$(basename "$w")" in
    nvidia_cutlass_dsl_libs_cu13-*) ;;
    *) cp "$w" "$payload/rest/" ;;
  esac
done

# Bundle 1: the cu13 libs wheel's contents, xz-compressed (92 MB zip -> ~51 MiB tar.xz).
cu13_whl="$(ls "$dl"/nvidia_cutlass_dsl_libs_cu13-4.8.1-*.whl)"
tarball="$payload/cu13/$(basename "$cu13_whl" .whl).tar.xz"
if [ ! -s "$tarball" ]; then
  rm -rf "$payload/cu13/"* "$payload/unzip"
  mkdir -p "$payload/unzip"
  python3 -m zipfile -e "$cu13_whl" "$payload/unzip"
  # One 256 MiB-dictionary xz stream (single-threaded, ~3-4 min): 51 MiB instead of the
  # 61 MiB of plain -9e, leaving room for the repository in device call 1.
  XZ_OPT="${XZ_OPT:---lzma2=preset=9e,dict=256MiB -T1}" \
    tar -C "$payload/unzip" --sort=name --owner=0 --group=0 --numeric-owner -cJf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
  rm -rf "$payload/unzip"
fi

# Manifest with checksums (setup_remote.sh verifies them before installing).
( cd "$payload" && sha256sum cu13/*.tar.xz rest/*.whl > MANIFEST.sha256 )
cp "$payload/MANIFEST.sha256" "$payload/rest/MANIFEST.sha256"
cp "$payload/MANIFEST.sha256" "$payload/cu13/MANIFEST.sha256"

echo "== payload sizes"
du -b "$tarball" | awk '{printf "cu13 tarball: %d bytes (%.1f MiB)\n", $1, $1/1048576}'
du -cb "$payload/rest/"*.whl | tail -1 | awk '{printf "rest wheels:  %d bytes (%.1f MiB)\n", $1, $1/1048576}'
ls -l "$payload/rest/"
