#!/usr/bin/env bash
# What `make chaos` needs on the machine: PostgreSQL server binaries (initdb, pg_ctl), PgBouncer,
# and for the failover scenario and the restore drill (8 and 9) Patroni, etcd, HAProxy and
# pgBackRest, all from Debian's packages. Installs what is missing with apt-get when run as root;
# otherwise says what to do.
set -euo pipefail
log() { echo "chaos-deps: $*" >&2; }

has() { command -v "$1" >/dev/null 2>&1 || [[ -x "/usr/sbin/$1" || -x "/usr/bin/$1" ]]; }

missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
has pgbouncer || missing+=(pgbouncer)
has patroni || missing+=(patroni)
has etcd || missing+=(etcd-server)
has haproxy || missing+=(haproxy)
has pgbackrest || missing+=(pgbackrest)
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
# The suite runs postgres, pgbouncer, etcd, Patroni and pgBackRest as the postgres user when it
# is root; it starts its own processes on free ports and never uses the packages' services.
id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
