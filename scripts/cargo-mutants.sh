#!/usr/bin/env bash
# cargo-mutants over the claim module, the protocol's statements and raptor-db's failure
# classification (.cargo/mutants.toml), tested by the integration tests that exercise them.
# Installs cargo-mutants when missing; builds into target/cargo-mutants-target (seeded from
# target/debug, so the dependencies are not rebuilt). Writes the outcome lists to docs/mutants/.
# Takes hours on two cores: run it by hand after changing the claim, not in CI (the curated
# mutants of `make mutants` run there).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
: "${DATABASE_URL:?needs DATABASE_URL (make db-up prints one)}"
command -v cargo-mutants >/dev/null || cargo install --locked cargo-mutants
export CARGO_TARGET_DIR="$root/target/cargo-mutants-target"
if [ ! -d "$CARGO_TARGET_DIR/debug" ] && [ -d target/debug ]; then
  mkdir -p "$CARGO_TARGET_DIR" && cp -a target/debug "$CARGO_TARGET_DIR/"
fi
export RUST_BACKTRACE=0
out="$root/target/cargo-mutants"
status=0
cargo mutants --output "$out" --timeout 300 --jobs 2 --cargo-arg=--package=raptor-integration-tests -- --test api -- \
  idempotency:: conformance:: store_failures:: encryption:: connection_edge:: connection_use:: \
  pool_mode:: trading::orders:: "$@" || status=$?
mkdir -p docs/mutants
for list in caught missed timeout unviable; do
  sort "$out/mutants.out/$list.txt" > "docs/mutants/$list.txt" 2>/dev/null || : > "docs/mutants/$list.txt"
done
exit "$status"
