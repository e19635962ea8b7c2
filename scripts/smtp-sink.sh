#!/usr/bin/env bash
# The SMTP server the mail tests send to: aiosmtpd (PyPI, pinned) in a virtualenv under target/,
# installed unless it is there already. Prints the virtualenv's python, which runs
# tests/smtp/sink.py. `make test` runs it before the tests; the tests run it too (a lock keeps
# concurrent installs apart).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
AIOSMTPD_VERSION=1.4.6
target="${CARGO_TARGET_DIR:-$root/target}"
venv="$target/smtp-venv"
mkdir -p "$target"
exec 9>"$target/smtp-venv.lock"
flock 9
if [[ "$("$venv/bin/python" -c 'import aiosmtpd; print(aiosmtpd.__version__)' 2>/dev/null)" != "$AIOSMTPD_VERSION" ]]; then
  echo "smtp-sink: installing aiosmtpd $AIOSMTPD_VERSION into $venv" >&2
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "aiosmtpd==$AIOSMTPD_VERSION" >&2
fi
echo "$venv/bin/python"
