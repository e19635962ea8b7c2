#!/usr/bin/env bash
# The alerting rules (ops/prometheus/raptor-rules.yml), as `make lint` checks them:
#   promtool check rules   the file parses, every expression is valid PromQL
#   promtool test rules    the unit tests (ops/prometheus/raptor-rules.test.yml) pass
#   runbooks               every alert has an absolute runbook_url (https://, the same base for
#                          all) whose #anchor names a heading of docs/operations.md
# promtool comes from Debian's `prometheus` package, installed with apt-get when missing and
# run as root (the package's service is never started); otherwise it says what to do.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rules=ops/prometheus/raptor-rules.yml
tests=ops/prometheus/raptor-rules.test.yml
log() { echo "prometheus-rules: $*" >&2; }

if ! command -v promtool >/dev/null 2>&1; then
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "missing: promtool (install Debian's prometheus package, e.g. apt-get install -y prometheus)"
    exit 1
  fi
  log "installing prometheus (for promtool) with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends prometheus >&2 \
    || { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends prometheus >&2; }
fi

log "promtool check rules"
promtool check rules "$rules"
log "promtool test rules"
(cd "$(dirname "$tests")" && promtool test rules "$(basename "$tests")")

log "runbooks"
# GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes.
anchors="$(grep -E '^#{1,6} ' docs/operations.md | sed -E 's/^#+ +//' \
  | tr '[:upper:]' '[:lower:]' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g')"
alerts="$(grep -cE '^ *- alert: ' "$rules")"
# Each value as written, quotes dropped: an absolute https URL ending in #anchor.
urls="$(sed -nE "s/^ *runbook_url: *['\"]?([^'\"]*)['\"]? *$/\1/p" "$rules")"
links="$(grep -c . <<<"$urls" || true)"
if [[ "$alerts" != "$links" ]]; then
  log "$alerts alerts but $links runbook_url annotations in $rules: each alert needs one"
  exit 1
fi
if bad="$(grep -vE '^https://[^#[:space:]]+#[a-z0-9_-]+$' <<<"$urls")"; then
  log "runbook_url not an absolute https URL ending in #anchor: $bad"
  exit 1
fi
bases="$(sed 's/#.*//' <<<"$urls" | sort -u)"
if [[ "$(grep -c . <<<"$bases")" != 1 ]]; then
  log "runbook_url bases differ (one base for every alert, where docs/operations.md is published):"
  log "$bases"
  exit 1
fi
missing=0
while read -r anchor; do
  if ! grep -qxF "$anchor" <<<"$anchors"; then
    log "runbook_url #$anchor names no heading of docs/operations.md"
    missing=1
  fi
done < <(sed 's/.*#//' <<<"$urls" | sort -u)
exit "$missing"
