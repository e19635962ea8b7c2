#!/usr/bin/env bash
# `make fuzz-api`: Schemathesis (pinned, in a virtualenv under target/) against a real `raptor`
# on a fresh, seeded database (scripts/lib/fresh-server.sh), with billing pointed at the tests'
# fake Stripe. Every request carries a user's token; the admin routes an operator's; logout and
# erasure their own throwaway users' (they revoke or delete their caller). fuzz/schemathesis.toml
# turns on every check: any 5xx, any answer the OpenAPI document does not allow (status,
# content type, headers, body), any accepted schema-violating request, any rejected valid one
# and any success without credentials fails the run.
#
#   FUZZ_MAX_EXAMPLES (default 30) and FUZZ_MAX_TIME (seconds, default 300) bound the run;
#   extra arguments go to `st run` (e.g. --seed N to replay a run).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
SCHEMATHESIS_VERSION=4.32.5
target="${CARGO_TARGET_DIR:-$root/target}"
log() { echo "fuzz-api: $*" >&2; }

venv="$target/fuzz-venv"
if [[ "$("$venv/bin/st" --version 2>/dev/null)" != "st, version $SCHEMATHESIS_VERSION" ]]; then
  log "installing schemathesis $SCHEMATHESIS_VERSION into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
fi

# Billing talks to the tests' fake Stripe, so the billing routes run instead of answering
# 503 billing_not_configured; the webhook checks signatures with a secret of our own.
cargo build --locked -q -p raptor-integration-tests --bin raptor-fake-stripe
coproc STRIPE { exec "$target/debug/raptor-fake-stripe"; }
stripe_pid=$STRIPE_PID
read -r stripe_base <&"${STRIPE[0]}"
export STRIPE_API_BASE="$stripe_base" STRIPE_SECRET_KEY=sk_test_fake STRIPE_WEBHOOK_SECRET=whsec_fuzz
export RUST_LOG="${RUST_LOG:-warn}"

# shellcheck source=lib/fresh-server.sh
source "$root/scripts/lib/fresh-server.sh"
fresh_server_start fuzz-api
trap 'fresh_server_stop; kill "$stripe_pid" 2>/dev/null || true' EXIT

token() { sed -n 's/.*"token":"\([^"]*\)".*/\1/p'; }
user() { "$RAPTOR_BIN" users create --email "$1" ${2:+--role "$2"} | token; }
export FUZZ_OPERATOR_TOKEN FUZZ_USER_TOKEN FUZZ_LOGOUT_TOKEN FUZZ_ERASURE_TOKEN
FUZZ_OPERATOR_TOKEN="$(user fuzz-operator@example.com operator)"
FUZZ_USER_TOKEN="$(user fuzz-user@example.com)"
FUZZ_LOGOUT_TOKEN="$(user fuzz-logout@example.com)"
FUZZ_ERASURE_TOKEN="$(user fuzz-erasure@example.com)"
# Quotes for the symbols the document's examples use, so orders can fill and rest.
"$RAPTOR_BIN" quotes set AAPL --bid 189.90 --ask 190.10 >/dev/null
"$RAPTOR_BIN" quotes set AAPL260918C00065000 --bid 1.20 --ask 1.25 >/dev/null
"$RAPTOR_BIN" quotes set XYZ270115C00067500 --bid 0.80 --ask 0.85 >/dev/null

# fuzz/hooks.py registers the Idempotency-Key header's format (why: see the file).
export SCHEMATHESIS_HOOKS="$root/fuzz/hooks.py"
log "fuzzing $RAPTOR_URL"
status=0
# The trade-updates stream never ends (a server-sent event stream): it is left out here and
# tested by tests/api/trading/stream.rs.
"$venv/bin/st" --config-file fuzz/schemathesis.toml run "$RAPTOR_URL/openapi.json" \
  -H "Authorization: Bearer $FUZZ_USER_TOKEN" \
  --exclude-path /api/trading/stream \
  --max-examples "${FUZZ_MAX_EXAMPLES:-30}" --max-time "${FUZZ_MAX_TIME:-300}" \
  --generation-database none --no-color "$@" || status=$?
if grep -q "panicked" "$target/checks/fuzz-api-server.log"; then
  log "the server panicked:"; grep -m5 "panicked" "$target/checks/fuzz-api-server.log" >&2
  status=1
fi
exit "$status"
