#!/usr/bin/env bash
# cargo-mutants over the claim module, the protocol's statements and raptor-db's failure
# classification, tested by the integration tests that exercise them.
# Installs cargo-mutants when missing; builds into target/cargo-mutants-target (seeded from
# target/debug, so the dependencies are not rebuilt); each test binary stops at its first failing
# test (scripts/fail-fast-runner.sh), since one failure decides a mutant.
# Iterates on docs/mutants/: the mutants listed there as caught or unviable are skipped, the
# others (missed, timed out, not run yet) are tested, and the outcome is folded back into the
# lists (caught, missed, timeout, unviable, and not-run: mutants of those files not yet tested);
# a mutant the code no longer has drops out. Delete docs/mutants/*.txt for a run from scratch.
# Takes hours on two cores from scratch: run it by hand after changing the claim, not in CI (the
# curated mutants of `make mutants` run there). Extra arguments go to cargo-mutants (e.g.
# `-f crates/raptor-idempotency/src/claim/judge.rs` for one file); MUTANTS_BASELINE=skip skips
# the unmutated run when `make test` just passed. MUTANTS_TESTS=unit runs only the mutated
# crate's own unit tests: minutes instead of hours for raptor-db, whose every change rebuilds the
# whole workspace; run the integration tests afterwards on what survived (the default).
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
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$root/scripts/fail-fast-runner.sh"
files=(-f 'crates/raptor-idempotency/src/protocol.rs' -f 'crates/raptor-idempotency/src/claim/**'
  -f crates/raptor-db/src/error.rs -f crates/raptor-db/src/reach.rs)
[ "$#" -gt 0 ] || set -- "${files[@]}"
out="$root/target/cargo-mutants"
rm -rf "$out/mutants.out" "$out/mutants.out.old"
mkdir -p "$out/mutants.out" docs/mutants
for list in caught unviable; do
  touch "docs/mutants/$list.txt"
  cp "docs/mutants/$list.txt" "$out/mutants.out/$list.txt"
done
status=0
# The mutated crates' packages plus the integration tests' one: their unit tests (`tests::`) and
# the `api` binary's modules that exercise the claim, and those of the claim's users that read
# what it lends them (the key behind a derived client order id or reset id, Stripe's forwarded
# key, an upstream timeout that releases the key).
if [ "${MUTANTS_TESTS:-}" = unit ]; then
  cargo mutants --output "$out" --timeout 120 --jobs 1 --no-shuffle --iterate \
    ${MUTANTS_BASELINE:+--baseline="$MUTANTS_BASELINE"} "$@" -- --lib || status=$?
else
  cargo mutants --output "$out" --timeout 300 --jobs 2 --no-shuffle --iterate ${MUTANTS_BASELINE:+--baseline="$MUTANTS_BASELINE"} \
    --cargo-arg=--package=raptor-integration-tests "$@" -- --lib --test api -- tests:: \
    idempotency:: conformance:: store_failures:: encryption:: connection_edge:: connection_use:: \
    pool_mode:: trading::orders:: trading::client_order_id:: billing:: || status=$?
fi
mkdir -p docs/mutants
all=$(mktemp) run=$(mktemp) tested=$(mktemp)
cargo mutants --list "${files[@]}" | sort > "$all"
cat "$out"/mutants.out/{caught,missed,timeout,unviable}.txt 2>/dev/null | sort > "$run" || :
for list in caught missed timeout unviable; do
  touch "docs/mutants/$list.txt"
  # Earlier outcomes not re-tested now, plus this run's; only mutants the code still has.
  { comm -23 <(sort "docs/mutants/$list.txt") "$run"; cat "$out/mutants.out/$list.txt" 2>/dev/null || :; } \
    | sort -u | comm -12 - "$all" > "docs/mutants/$list.txt.new"
  mv "docs/mutants/$list.txt.new" "docs/mutants/$list.txt"
  cat "docs/mutants/$list.txt" >> "$tested"
done
comm -23 "$all" <(sort "$tested") > docs/mutants/not-run.txt
rm -f "$all" "$run" "$tested"
exit "$status"
