#!/usr/bin/env bash
# For `make run`: prints `export STRIPE_…` lines for `eval` when billing can be served locally.
#
#   eval "$(scripts/stripe.sh)"
#
# STRIPE_SECRET_KEY set in the environment (or .env): used as is, nothing printed.
# Otherwise, where a Docker engine answers: starts Stripe's official mock server
# (`stripe/stripe-mock`, docker compose service `stripe-mock`) and points the server at it.
# Otherwise: prints nothing; the billing routes answer 503 billing_not_configured and the rest of
# the service runs. Everything it says goes to stderr.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "stripe.sh: $*" >&2; }

if [[ -n "${STRIPE_SECRET_KEY:-}" ]] || grep -qs '^STRIPE_SECRET_KEY=.\+' "$root/.env"; then
  log "using STRIPE_SECRET_KEY from the environment"
  exit 0
fi
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  log "starting stripe-mock with docker compose"
  if (cd "$root" && docker compose up -d --wait stripe-mock) >&2; then
    echo "export STRIPE_API_BASE=http://127.0.0.1:12111"
    echo "export STRIPE_SECRET_KEY=sk_test_stripe_mock"
    exit 0
  fi
  log "stripe-mock did not start"
fi
log "no STRIPE_SECRET_KEY and no Docker engine: billing routes answer 503 billing_not_configured"
