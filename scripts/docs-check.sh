#!/usr/bin/env bash
# make docs-check: /docs from a real server in headless Chromium with the network off
# (scripts/docs-check.mjs). Installs Debian's chromium when /usr/bin/chromium is missing, and the
# npm tooling (playwright-core, swagger-ui-dist) from the lock file.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if [[ ! -x /usr/bin/chromium ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "docs-check: installing chromium with apt-get" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >&2
  else
    echo "docs-check: /usr/bin/chromium is missing (apt-get install chromium)" >&2
    exit 1
  fi
fi
scripts/npm-ci.sh .

# shellcheck source=lib/fresh-server.sh
source scripts/lib/fresh-server.sh
fresh_server_start docs-check
DOCS_SCREENSHOT="${CARGO_TARGET_DIR:-$root/target}/docs.png" node scripts/docs-check.mjs
