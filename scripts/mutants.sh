#!/usr/bin/env bash
# `make mutants`: the known-bad changes of the claim protocol (tests/mutants/*.patch), each applied
# to a worktree of the checkout (HEAD plus any uncommitted changes) in turn. For each one the
# protocol's statements must still prepare against Postgres (a mutant that dies on a SQL error
# proves nothing), and then the tests its `Tests:` line names must fail, on an assertion and
# not on a SQL error. Exits 1 when a mutant survives, is invalid, or no longer applies.
#
# MUTANTS="no-fence release-without-status" runs some only. Needs DATABASE_URL (the Makefile's
# target starts Postgres). The worktree builds into the shared target/ (only the crates a patch
# touches, and those that depend on them, are rebuilt between mutants).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
: "${DATABASE_URL:?make mutants starts Postgres and sets DATABASE_URL}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export RUST_BACKTRACE=0
work="$CARGO_TARGET_DIR/mutants/worktree"
logs="$CARGO_TARGET_DIR/mutants/logs"
mkdir -p "$logs"

git worktree remove --force "$work" >/dev/null 2>&1 || rm -rf "$work"
git worktree prune
git worktree add --quiet --detach "$work" HEAD
trap 'git -C "$root" worktree remove --force "$work" >/dev/null 2>&1 || true' EXIT
base="$CARGO_TARGET_DIR/mutants/uncommitted.diff"
git diff HEAD --binary > "$base"
reset() {
  git -C "$work" checkout --quiet -- .
  git -C "$work" clean -fdq
  if [ -s "$base" ]; then git -C "$work" apply --whitespace=nowarn "$base"; fi
}

if [ -n "${MUTANTS:-}" ]; then
  read -r -a names <<< "$MUTANTS"
else
  names=()
  for patch in tests/mutants/*.patch; do names+=("$(basename "$patch" .patch)"); done
fi

# Errors that say the mutant broke the SQL rather than the protocol.
invalid_sql='42601|42703|42P01|42883|42804|08P01|syntax error|bind message supplies'
failed=()
for name in "${names[@]}"; do
  patch="$root/tests/mutants/$name.patch"
  reset
  if ! git -C "$work" apply --whitespace=nowarn "$patch"; then
    echo "mutants: $name no longer applies; update tests/mutants/$name.patch" >&2
    failed+=("$name (stale patch)")
    continue
  fi
  read -r -a tests <<< "$(sed -n 's/^Tests: //p' "$patch")"
  log="$logs/$name.log"
  echo "mutants: $name: building and preparing the statements"
  if ! (cd "$work" && cargo test --locked -q -p raptor-integration-tests --test api -- \
      --exact conformance::the_protocol_statements_prepare) > "$log" 2>&1; then
    echo "mutants: $name is invalid: it does not build or its statements do not prepare ($log)" >&2
    failed+=("$name (invalid)")
    continue
  fi
  echo "mutants: $name: running ${tests[*]}"
  started=$SECONDS
  if (cd "$work" && cargo test --locked -q -p raptor-integration-tests --test api -- "${tests[@]}") \
      >> "$log" 2>&1; then
    echo "mutants: $name SURVIVED: ${tests[*]} passed with it ($log)" >&2
    failed+=("$name (survived)")
  elif grep -Eq "$invalid_sql" "$log"; then
    echo "mutants: $name failed on a SQL error, not on the protocol ($log)" >&2
    failed+=("$name (invalid SQL)")
  else
    killed_by=$(grep -E '^    [a-z_:]+$' "$log" | sed 's/^ *//' | tr '\n' ' ')
    echo "mutants: $name killed in $((SECONDS - started)) s by: $killed_by"
  fi
done

if (( ${#failed[@]} > 0 )); then
  echo "mutants: not rejected: ${failed[*]}" >&2
  exit 1
fi
echo "mutants: all ${#names[@]} rejected"
