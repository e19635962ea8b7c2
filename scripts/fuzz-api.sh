#!/usr/bin/env bash
# `make fuzz-api`: Schemathesis (pinned, in a virtualenv under target/) against a real `raptor`
# on a fresh, seeded database, with an operator token for the admin routes and a user token for
# the rest (fuzz/schemathesis.toml). Fails on any 5xx, any answer the OpenAPI document does not
# allow (status, content type, headers, body), any accepted schema-violating request and any
# success without credentials.
#
#   FUZZ_MAX_EXAMPLES (default 40) and FUZZ_MAX_TIME (seconds, default 420) bound the run.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
SCHEMATHESIS_VERSION=4.32.5
target="${CARGO_TARGET_DIR:-$root/target}"
log() { echo "fuzz-api: $*" >&2; }

eval "$(scripts/db.sh postgres)"
db="raptor_fuzz_$$"
export DATABASE_URL="${DATABASE_URL%/*}/$db"
unset RAPTOR_ADDR

cargo build --locked -q -p raptor-server --bin raptor -p raptor-integration-tests --bin raptor-fake-stripe
raptor="$target/debug/raptor"

venv="$target/fuzz-venv"
if [[ "$("$venv/bin/st" --version 2>/dev/null)" != "st, version $SCHEMATHESIS_VERSION" ]]; then
  log "installing schemathesis $SCHEMATHESIS_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
server_pid=""
stripe_pid=""
cleanup() {
  for pid in $server_pid $stripe_pid; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
  psql -q "${DATABASE_URL%/*}/postgres" -c "drop database if exists $db with (force)" >/dev/null 2>&1 || true
}
trap cleanup EXIT

"$raptor" migrate >/dev/null
token() { sed -n 's/.*"token":"\([^"]*\)".*/\1/p'; }
export FUZZ_OPERATOR_TOKEN FUZZ_USER_TOKEN
FUZZ_OPERATOR_TOKEN="$("$raptor" users create --email fuzz-operator@example.com --role operator | token)"
FUZZ_USER_TOKEN="$("$raptor" users create --email fuzz-user@example.com | token)"
# Quotes for the symbols the document's examples use, so orders can fill and rest.
"$raptor" quotes set AAPL --bid 189.90 --ask 190.10 >/dev/null
"$raptor" quotes set AAPL260918C00065000 --bid 1.20 --ask 1.25 >/dev/null
"$raptor" quotes set XYZ270115C00067500 --bid 0.80 --ask 0.85 >/dev/null

# Billing talks to the tests' fake Stripe, so the billing routes run instead of answering
# 503 billing_not_configured; the webhook checks signatures with a secret of our own.
coproc STRIPE { "$target/debug/raptor-fake-stripe"; }
stripe_pid=$STRIPE_PID
read -r stripe_base <&"${STRIPE[0]}"
export STRIPE_API_BASE="$stripe_base" STRIPE_SECRET_KEY=sk_test_fake STRIPE_WEBHOOK_SECRET=whsec_fuzz

RAPTOR_ADDR="127.0.0.1:$port" RUST_LOG="${RUST_LOG:-warn}" "$raptor" serve >"$target/fuzz-server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { log "server did not become ready"; cat "$target/fuzz-server.log" >&2; exit 1; }

log "fuzzing http://127.0.0.1:$port (server log: $target/fuzz-server.log)"
"$venv/bin/st" --config-file fuzz/schemathesis.toml run "http://127.0.0.1:$port/openapi.json" \
  -H "Authorization: Bearer $FUZZ_USER_TOKEN" \
  --max-examples "${FUZZ_MAX_EXAMPLES:-40}" --max-time "${FUZZ_MAX_TIME:-420}" \
  --generation-database none --no-color "$@"
