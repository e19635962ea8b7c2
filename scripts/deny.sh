#!/usr/bin/env bash
# cargo-deny (deny.toml) at the version the project checks with, installed from crates.io when
# missing (`cargo install --locked`, a few minutes once):
#   licenses, bans, sources  always (they need only the lock file and the downloaded crates)
#   advisories               against the RustSec database, which cargo-deny clones from GitHub
#                            into ~/.cargo/advisory-dbs. When GitHub cannot be reached, a copy
#                            already there is used (its date is printed); with none, the check
#                            is skipped with a warning, or fails when DENY_ADVISORIES=required.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
DENY_VERSION=0.20.2
log() { echo "deny: $*" >&2; }

if [[ "$(cargo deny --version 2>/dev/null)" != "cargo-deny $DENY_VERSION" ]]; then
  log "installing cargo-deny $DENY_VERSION"
  cargo install --quiet --locked "cargo-deny@$DENY_VERSION"
fi

log "licenses, bans, sources"
# The duplicate-version warnings without their inclusion graphs (deny.toml says which are known).
cargo deny --locked check --hide-inclusion-graph licenses bans sources

dbs="${CARGO_HOME:-$HOME/.cargo}/advisory-dbs"
if timeout 120 cargo deny --locked fetch db >/dev/null 2>&1; then
  log "advisories (database fetched)"
  cargo deny --locked check advisories
elif compgen -G "$dbs/advisory-db-*/crates" >/dev/null; then
  copy="$(compgen -G "$dbs/advisory-db-*" | head -n1)"
  log "WARNING: the advisory database could not be fetched; checking against the copy in $copy" \
      "(last change $(git -C "$copy" log -1 --format=%cs 2>/dev/null || echo unknown))"
  cargo deny --offline check advisories
elif [[ "${DENY_ADVISORIES:-}" == required ]]; then
  log "the advisory database (github.com/RustSec/advisory-db) cannot be fetched and there is no copy in $dbs"
  exit 1
else
  log "WARNING: advisories NOT checked: the advisory database (github.com/RustSec/advisory-db)" \
      "cannot be fetched from here and there is no copy in $dbs (DENY_ADVISORIES=required makes this an error)"
fi
