#!/usr/bin/env bash
# make client-e2e: the TypeScript client of clients/typescript (@raptor/client: types generated
# from openapi/openapi.json by openapi-typescript, calls through openapi-fetch, the SDK of
# src/sdk.ts) is tested, packed, and runs Antlers' journey against a real server on a fresh
# database.
#
#   1. npm ci (when the lock file changed);
#   2. src/schema.ts is regenerated into a temporary file and must equal the committed one
#      (`make client-generate` updates it);
#   3. tsc --strict --noEmit, then tsc (to dist/);
#   4. the SDK's unit tests (node --test dist/sdk.test.js, against local stub servers);
#   5. the package: its version must be the document's, and `npm pack --dry-run` must hold
#      every file `exports` names and every file they import;
#   6. raptor serve on a spare port against a fresh database, scripts/dropping-proxy.py in front
#      of it (RAPTOR_PROXY_URL); node dist/journey.js.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
client="$root/clients/typescript"
"$root/scripts/npm-ci.sh" "$client"
cd "$client"

generated="$(mktemp --suffix=.ts)"
trap 'rm -f "$generated"' EXIT
npx --no-install openapi-typescript ../../openapi/openapi.json --output "$generated" >&2
if ! diff -q "$generated" src/schema.ts >/dev/null; then
  diff -u src/schema.ts "$generated" | head -n 40 >&2 || true
  echo "client-e2e: clients/typescript/src/schema.ts is out of date with openapi/openapi.json: run \`make client-generate\` and commit it" >&2
  exit 1
fi
rm -f "$generated"
trap - EXIT

npx --no-install tsc --strict --noEmit
rm -rf dist
npx --no-install tsc

node --test dist/sdk.test.js

# The package's version is the API document's.
node -e '
  const fs = require("node:fs");
  const pkg = JSON.parse(fs.readFileSync("package.json", "utf8")).version;
  const api = JSON.parse(fs.readFileSync("../../openapi/openapi.json", "utf8")).info.version;
  if (pkg !== api) {
    console.error(`client-e2e: clients/typescript/package.json is version ${pkg}, openapi/openapi.json ${api}: make them equal`);
    process.exit(1);
  }
'

# The tarball holds what `exports` names and what those files import (dist/ is self-contained).
npm pack --dry-run --json --ignore-scripts 2>/dev/null | node --input-type=module -e '
  import { readFileSync } from "node:fs";
  import { dirname, join, normalize } from "node:path";
  const [pack] = JSON.parse(readFileSync(0, "utf8"));
  const packed = new Set(pack.files.map((f) => f.path));
  const pkg = JSON.parse(readFileSync("package.json", "utf8"));
  const wanted = [pkg.main, pkg.types, ...Object.values(pkg.exports).flatMap((e) => (typeof e === "string" ? [e] : Object.values(e)))];
  const missing = [];
  const checked = new Set();
  for (let i = 0; i < wanted.length; i++) {
    const file = normalize(wanted[i]);
    if (checked.has(file)) continue;
    checked.add(file);
    if (!packed.has(file)) { missing.push(file); continue; }
    if (!/\.(js|d\.ts)$/.test(file)) continue;
    const text = readFileSync(file, "utf8");
    for (const [, spec] of text.matchAll(/(?:from|import)\s*\(?\s*"(\.{1,2}\/[^"]+)"/g)) {
      const target = join(dirname(file), spec);
      wanted.push(target);
      if (file.endsWith(".d.ts")) wanted.push(target.replace(/\.js$/, ".d.ts"));
    }
  }
  if (missing.length) {
    console.error(`client-e2e: ${pack.filename} lacks ${missing.join(", ")}: fix "files" in package.json`);
    process.exit(1);
  }
  console.error(`client-e2e: ${pack.filename}: ${pack.files.length} files; the ${checked.size} that exports names or imports are packed`);
'

# shellcheck source=lib/fresh-server.sh
source "$root/scripts/lib/fresh-server.sh"
fresh_server_start client-e2e
fresh_proxy_start client-e2e
node dist/journey.js
