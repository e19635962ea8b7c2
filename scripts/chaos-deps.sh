#!/usr/bin/env bash
# What `make chaos` needs on the machine: PostgreSQL server binaries (initdb, pg_ctl) and
# PgBouncer. Installs what is missing with apt-get when run as root; otherwise says what to do.
set -euo pipefail
log() { echo "chaos-deps: $*" >&2; }

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v pgbouncer >/dev/null 2>&1 || [[ -x /usr/sbin/pgbouncer ]] || missing+=(pgbouncer)
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  log "missing: ${missing[*]} (install them, e.g. apt-get install -y ${missing[*]})"
  exit 1
fi
log "installing ${missing[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq "${missing[@]}" >&2 || { apt-get update -qq >&2 && apt-get install -y -qq "${missing[@]}" >&2; }
# The suite runs postgres and pgbouncer as the postgres user when it is root.
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
