#!/usr/bin/env bash
# The upgrade check (`make upgrade-check`): builds the previous release's `raptor` from its commit
# (release/previous: its tag when the clone has it, else its commit) into target/previous-release/
# (kept, so a second run does not build again), then runs the api test `upgrade::` with it: the
# previous release serves while this release migrates and serves beside it.
#
# The build shares this checkout's target directory, so the dependencies (the same versions in
# both Cargo.lock files) are not compiled again; only the workspace's own crates are.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
log() { echo "upgrade-check: $*" >&2; }

tag="$(sed -n 's/^tag //p' release/previous)"
commit="$(sed -n 's/^commit //p' release/previous)"
if git rev-parse -q --verify "refs/tags/$tag^{commit}" >/dev/null; then
  rev="$(git rev-parse "refs/tags/$tag^{commit}")"
elif git rev-parse -q --verify "$commit^{commit}" >/dev/null; then
  rev="$(git rev-parse "$commit^{commit}")"
else
  log "neither tag $tag nor commit $commit is in this clone (a shallow clone?): fetch the history first"
  exit 1
fi

target="${CARGO_TARGET_DIR:-$root/target}"
dir="$target/previous-release"
bin="$dir/raptor-${rev:0:12}"
if [[ ! -x "$bin" ]]; then
  log "building the previous release's raptor from ${rev:0:12}"
  rm -rf "$dir/src"
  mkdir -p "$dir/src"
  git archive "$rev" | tar -x -C "$dir/src"
  (cd "$dir/src" && CARGO_TARGET_DIR="$target" cargo build --locked -q -p raptor-server --bin raptor)
  cp "$target/debug/raptor" "$bin"
  rm -rf "$dir/src"
  # Put this checkout's own `raptor` back in target/debug (the other checks run it).
  cargo build --locked -q -p raptor-server --bin raptor
fi
log "previous release: $bin"

eval "$(scripts/db.sh postgres)"
RAPTOR_PREVIOUS_BIN="$bin" cargo test --locked -p raptor-integration-tests --test api upgrade:: \
  -- --ignored --test-threads 1
