#!/usr/bin/env bash
# cargo-mutants over the claim module, the protocol's statements and raptor-db's failure
# classification, tested by the integration tests that exercise them.
# Installs cargo-mutants when missing; builds into target/cargo-mutants-target (seeded from
# target/debug, so the dependencies are not rebuilt). Writes the outcome lists to docs/mutants/
# (caught, missed, timeout, unviable, and not-run: listed but not tested, when the run was
# stopped). Takes hours on two cores: run it by hand after changing the claim, not in CI (the
# curated mutants of `make mutants` run there). Extra arguments go to cargo-mutants (e.g.
# `-f crates/raptor-idempotency/src/protocol.rs` for one file); MUTANTS_BASELINE=skip skips the
# unmutated run when `make test` just passed.
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
if [ "$#" -eq 0 ]; then
  set -- -f 'crates/raptor-idempotency/src/protocol.rs' -f 'crates/raptor-idempotency/src/claim/**' \
    -f crates/raptor-db/src/error.rs -f crates/raptor-db/src/reach.rs
fi
out="$root/target/cargo-mutants"
status=0
# The mutated crates' packages plus the integration tests' one: their unit tests (`tests::`) and
# the `api` binary's modules that exercise the claim.
cargo mutants --output "$out" --timeout 300 --jobs 2 --no-shuffle ${MUTANTS_BASELINE:+--baseline="$MUTANTS_BASELINE"} \
  --cargo-arg=--package=raptor-integration-tests "$@" -- --lib --test api -- tests:: \
  idempotency:: conformance:: store_failures:: encryption:: connection_edge:: connection_use:: \
  pool_mode:: trading::orders:: || status=$?
mkdir -p docs/mutants
tested=$(mktemp)
for list in caught missed timeout unviable; do
  sort "$out/mutants.out/$list.txt" > "docs/mutants/$list.txt" 2>/dev/null || : > "docs/mutants/$list.txt"
  cat "docs/mutants/$list.txt" >> "$tested"
done
cargo mutants --list "$@" | sort | comm -23 - <(sort "$tested") > docs/mutants/not-run.txt
rm -f "$tested"
exit "$status"
