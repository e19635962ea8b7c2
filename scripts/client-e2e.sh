#!/usr/bin/env bash
# make client-e2e: the TypeScript client of clients/typescript (types generated from
# openapi/openapi.json by openapi-typescript, calls through openapi-fetch) runs Antlers' journey
# against a real server on a fresh database.
#
#   1. npm ci (when the lock file changed);
#   2. src/schema.d.ts is regenerated into a temporary file and must equal the committed one
#      (`make client-generate` updates it);
#   3. tsc --strict --noEmit, then tsc (to dist/);
#   4. raptor serve on a spare port against a fresh database; node dist/journey.js.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
client="$root/clients/typescript"
"$root/scripts/npm-ci.sh" "$client"
cd "$client"

generated="$(mktemp --suffix=.d.ts)"
trap 'rm -f "$generated"' EXIT
npx --no-install openapi-typescript ../../openapi/openapi.json --output "$generated" >&2
if ! diff -q "$generated" src/schema.d.ts >/dev/null; then
  diff -u src/schema.d.ts "$generated" | head -n 40 >&2 || true
  echo "client-e2e: clients/typescript/src/schema.d.ts is out of date with openapi/openapi.json: run \`make client-generate\` and commit it" >&2
  exit 1
fi
rm -f "$generated"
trap - EXIT

npx --no-install tsc --strict --noEmit
rm -rf dist
npx --no-install tsc

# shellcheck source=lib/fresh-server.sh
source "$root/scripts/lib/fresh-server.sh"
fresh_server_start client-e2e
node dist/journey.js
