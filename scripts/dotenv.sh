#!/usr/bin/env bash
# Sets NAME=VALUE in the git-ignored .env (replacing an earlier value), so that every `raptor`
# command run by hand finds what `make run` uses (the binary reads .env in development).
#
#   scripts/dotenv.sh DATABASE_URL postgres://postgres@127.0.0.1:5432/raptor
set -euo pipefail
name="$1" value="$2"
file="$(cd "$(dirname "$0")/.." && pwd)/.env"
touch "$file"
grep -v "^${name}=" "$file" > "$file.tmp" || true
echo "${name}=${value}" >> "$file.tmp"
mv "$file.tmp" "$file"
echo "dotenv.sh: ${name} written to .env" >&2
