#!/usr/bin/env bash
# Builds the release wheel of memprints into OUT_DIR and checks it: the [profile.dist] binary
# (stripped), linked by zig against glibc 2.17 and tagged manylinux2014, so that `pip install` and
# `uv tool install` put `memprints` on PATH of RHEL 8-era nodes with no Rust toolchain.
#
#   packaging/build-wheel.sh OUT_DIR [RUST_TARGET]
#
# RUST_TARGET is x86_64-unknown-linux-gnu unless given; aarch64-unknown-linux-gnu builds the wheel
# for GH200 nodes (once `rustup target add aarch64-unknown-linux-gnu` has run). Needs cargo and
# python3; maturin, zig and pyelftools come pinned from packaging/requirements.txt into
# target/wheel-tools. Prints the path of the wheel.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: packaging/build-wheel.sh OUT_DIR [RUST_TARGET]" >&2
  exit 2
fi
mkdir -p "$1"
out=$(cd "$1" && pwd)
rust_target=${2:-x86_64-unknown-linux-gnu}
cd "$(dirname "$0")/.."

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$rust_target"; then
  echo "build-wheel: Rust has no standard library for $rust_target; run: rustup target add $rust_target" >&2
  exit 1
fi

# The pinned tools live in a venv under target/, made again whenever the pins change.
tools=target/wheel-tools
if ! cmp -s packaging/requirements.txt "$tools/requirements.txt"; then
  python3 -m venv --clear "$tools"
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check -r packaging/requirements.txt
  cp packaging/requirements.txt "$tools/requirements.txt"
fi

# Built aside and moved into OUT_DIR only once checked, so OUT_DIR never holds a bad wheel.
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
# maturin runs zig as `python3 -m ziglang`, so the venv goes first on PATH. The target directory is
# cargo's own (target/ or CARGO_TARGET_DIR): dependencies are built once, then kept.
PATH="$PWD/$tools/bin:$PATH" maturin build --locked --zig --compatibility manylinux2014 \
  --target "$rust_target" --out "$staging"
wheel=$(echo "$staging"/memprints-*.whl)
"$tools/bin/python" packaging/check-wheel.py "$wheel"
mv "$wheel" "$out/"
echo "$out/${wheel##*/}"
