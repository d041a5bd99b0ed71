#!/usr/bin/env bash
# Builds the fuzz targets named (default: all) with cargo-fuzz on stable Rust
# (RUSTC_BOOTSTRAP=1, no sanitizer), stripped, into fuzz/bin/ (git-ignored), for
# fuzz/run_long.sh on a machine with more cores.
#   usage: fuzz/build_bins.sh [TARGET...]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
mkdir -p bin
for target in "${targets[@]}"; do
  RUSTC_BOOTSTRAP=1 cargo fuzz build --sanitizer none -O "$target"
  cp "target/x86_64-unknown-linux-gnu/release/$target" "bin/$target"
  strip "bin/$target"
  ls -la "bin/$target"
done
