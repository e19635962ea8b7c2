#!/usr/bin/env bash
# Prints one new RAPTOR_RESPONSE_KEYS entry, `kid:base64key` (32 random bytes), for the key id
# given (default: `k` and today's date). Put it first in the list to rotate (docs/operations.md).
#
#   scripts/response-key.sh 2027-01
set -euo pipefail
kid="${1:-k$(date -u +%Y%m%d)}"
if ! [[ "$kid" =~ ^[A-Za-z0-9._-]{1,32}$ ]]; then
  echo "response-key.sh: the key id must be 1 to 32 characters of A-Z a-z 0-9 . _ -" >&2
  exit 2
fi
key="$(head -c 32 /dev/urandom | base64 | tr -d '\n')"
echo "${kid}:${key}"
