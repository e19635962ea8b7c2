#!/usr/bin/env bash
# The checks `make lint` runs after rustfmt and clippy, each tool installed at the version the
# project checks with unless it is there already:
#   typos          spelling, in code and docs (a PyPI wheel, in a virtualenv under target/)
#   cargo machete  a dependency declared but not used (built from crates.io, about a minute once)
#   cargo doc      the crate docs (the READMEs included), broken intra-doc links refused
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
TYPOS_VERSION=1.52.0
MACHETE_VERSION=0.9.2
target="${CARGO_TARGET_DIR:-$root/target}"
log() { echo "lint: $*" >&2; }

venv="$target/lint-venv"
if [[ "$("$venv/bin/typos" --version 2>/dev/null)" != "typos-cli $TYPOS_VERSION" ]]; then
  log "installing typos $TYPOS_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "typos==$TYPOS_VERSION"
fi
if [[ "$(cargo machete --version 2>/dev/null)" != "$MACHETE_VERSION" ]]; then
  log "installing cargo-machete $MACHETE_VERSION"
  cargo install --quiet --locked "cargo-machete@$MACHETE_VERSION"
fi

log "typos"
"$venv/bin/typos"
log "cargo machete"
cargo machete
log "cargo doc"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --workspace --locked
