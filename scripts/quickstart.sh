#!/usr/bin/env bash
# make quickstart-check: runs README.md's quick start AS WRITTEN (the ```sh block(s) between
# `<!-- quickstart:begin` and `<!-- quickstart:end -->`, so the README stays the single source)
# against a fresh server, and asserts the order was created (`HTTP 201`).
#
# `make run` would serve on 127.0.0.1:8080 against the database named in `.env`; this check must
# neither take a port a developer's `make run` may hold nor rewrite their `.env`, so it starts
# `raptor serve` on a spare port against a fresh database and exports RAPTOR_ADDR and
# DATABASE_URL: the block's `API=...${RAPTOR_ADDR:-...}` picks up the address, and `raptor`
# prefers DATABASE_URL from the environment over `.env` (dotenv never overrides a set variable).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

block="$(awk '
  /<!-- quickstart:begin/ { inside = 1; next }
  /<!-- quickstart:end/   { inside = 0; next }
  inside && /^```/        { fenced = !fenced; next }
  inside && fenced        { print }
' README.md)"
if [[ -z "$block" ]]; then
  echo "quickstart: no quick-start block between the markers in README.md" >&2
  exit 1
fi

# shellcheck source=lib/fresh-server.sh
source scripts/lib/fresh-server.sh
fresh_server_start quickstart

out="${CARGO_TARGET_DIR:-$root/target}/checks/quickstart.out"
echo "quickstart: running README.md's quick start:" >&2
sed 's/^/    /' <<<"$block" >&2
if ! bash -euo pipefail -c "$block" >"$out" 2>&1; then
  cat "$out" >&2
  echo "quickstart: FAILED: the quick start exited non-zero" >&2
  exit 1
fi
cat "$out"
echo
if ! grep -qx 'HTTP 201' "$out"; then
  echo "quickstart: FAILED: the order was not created (no 'HTTP 201' line)" >&2
  exit 1
fi
grep -q '"status":"filled"' "$out" || { echo "quickstart: FAILED: the order did not fill" >&2; exit 1; }
echo "quickstart: ok: the README's quick start created and filled an order" >&2
