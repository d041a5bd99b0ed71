# Sourced by bench/report.sh and bench/scale.sh, from the repository root: sets `bin` (the
# memprints binary to time: $BIN, or one built here in release) and `work` (where the generated
# inputs go: $WORK, kept, or a temporary folder removed on exit; $1 names it).
if [ -n "${BIN:-}" ]; then
  bin=$(realpath "$BIN")
else
  cargo build --release --quiet --bin memprints
  bin=$PWD/target/release/memprints
fi
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d --tmpdir "memprints-$1-XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
