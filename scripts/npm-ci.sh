#!/usr/bin/env bash
# Installs a package directory's npm dependencies from its lock file (`npm ci`) unless they are
# already installed from the same lock file.
#
#   scripts/npm-ci.sh DIR            # everything (the checks' tools)
#   scripts/npm-ci.sh DIR --omit=dev # only `dependencies` (what the server serves: Swagger UI)
set -euo pipefail
dir="$1"
shift
mode="${1:-full}"
cd "$dir"
command -v npm >/dev/null 2>&1 || { echo "npm-ci.sh: npm is not installed (Node.js 20.19+ with npm is needed)" >&2; exit 1; }
lock="$(sha256sum package-lock.json | cut -d' ' -f1)"
stamp=node_modules/.raptor-npm-ci
have="$(cat "$stamp" 2>/dev/null || true)"
# A full install also satisfies --omit=dev.
if [[ "$have" == "$lock $mode" || "$have" == "$lock full" ]]; then
  exit 0
fi
echo "npm-ci.sh: npm ci ${*:-} in $dir" >&2
# --ignore-scripts: no package needs an install script (swagger-ui-dist's only one is analytics).
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error "$@" >&2
echo "$lock $mode" > "$stamp"
