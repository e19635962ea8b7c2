#!/usr/bin/env bash
# The Python client of clients/python: generated from openapi/openapi.json by
# openapi-python-client (pinned with everything else in clients/python/requirements.txt,
# installed into a virtualenv under target/ when the pins change), committed as
# clients/python/raptor_client.
#
#   scripts/python-client.sh generate   # regenerate clients/python/raptor_client (make client-generate)
#   scripts/python-client.sh e2e        # drift check, mypy --strict, the journey against a fresh server
#
# `e2e` (part of `make client-e2e`): the package is regenerated into a temporary directory and
# must equal the committed one; mypy --strict checks the generated package, the hand-written
# layer (raptor_sdk), its tests and journey.py, ruff lints the hand-written files; the tests run
# against scripted answers; then journey.py runs against `raptor serve` on a spare port and a
# fresh database, partly through scripts/dropping-proxy.py.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
client="$root/clients/python"
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/python-client-venv"
log() { echo "python-client: $*" >&2; }
# No __pycache__ inside the committed package (the drift check compares directories).
export PYTHONDONTWRITEBYTECODE=1

install() {
  mkdir -p "$target"
  exec 9>"$venv.lock"
  flock 9
  local want have
  want="$(sha256sum "$client/requirements.txt" | cut -d' ' -f1)"
  have="$(cat "$venv/.raptor-requirements" 2>/dev/null || true)"
  if [[ "$have" != "$want" || ! -x "$venv/bin/openapi-python-client" ]]; then
    log "installing clients/python/requirements.txt into $venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$client/requirements.txt" >&2
    echo "$want" > "$venv/.raptor-requirements"
  fi
  exec 9>&-
}

# Generates the package into DIR (which must not exist).
generate_into() {
  local out="$1" work
  work="$(mktemp -d)"
  # The generator's own post-hooks (ruff check --fix, ruff format) run in the output directory;
  # the pinned ruff comes first on PATH.
  (cd "$work" && PATH="$venv/bin:$PATH" "$venv/bin/openapi-python-client" generate \
    --path "$root/openapi/openapi.json" --config "$client/generator.yaml" \
    --custom-template-path "$client/templates" \
    --meta none --output-path "$out" >&2)
  rm -rf "$work"
  # The package ships its types (PEP 561); the generator's `--meta none` leaves the marker out.
  touch "$out/py.typed"
}

install
case "${1:-}" in
  generate)
    out="$client/raptor_client"
    rm -rf "$out"
    generate_into "$out"
    log "regenerated clients/python/raptor_client"
    ;;
  e2e)
    generated="$(mktemp -d)"
    trap 'rm -rf "$generated"' EXIT
    generate_into "$generated/raptor_client"
    if ! diff -r -q -x __pycache__ "$generated/raptor_client" "$client/raptor_client" >/dev/null; then
      diff -r -u -x __pycache__ "$client/raptor_client" "$generated/raptor_client" | head -n 40 >&2 || true
      log "clients/python/raptor_client is out of date with openapi/openapi.json: run \`make client-generate\` and commit it"
      exit 1
    fi
    rm -rf "$generated"
    trap - EXIT
    (cd "$client" && "$venv/bin/mypy" --strict --no-incremental --cache-dir=/dev/null raptor_client raptor_sdk tests journey.py)
    (cd "$client" && "$venv/bin/ruff" check --no-cache raptor_sdk tests journey.py \
      && "$venv/bin/ruff" format --no-cache --check raptor_sdk tests journey.py)
    log "the retry layer and the generated models against scripted answers (tests/)"
    (cd "$client" && "$venv/bin/python" -m unittest discover -s tests)
    # shellcheck source=lib/fresh-server.sh
    source "$root/scripts/lib/fresh-server.sh"
    # No RAPTOR_SMTP_URL: the server logs each sign-in link, where the journey reads its token.
    unset RAPTOR_SMTP_URL
    export RUST_LOG="${RUST_LOG:-info}"
    fresh_server_start client-e2e-python
    fresh_proxy_start client-e2e-python
    (cd "$client" && RAPTOR_SERVER_LOG="$target/checks/client-e2e-python-server.log" "$venv/bin/python" journey.py)
    ;;
  *)
    echo "usage: scripts/python-client.sh generate|e2e" >&2
    exit 2
    ;;
esac
