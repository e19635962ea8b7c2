#!/usr/bin/env bash
# Makes sure a Postgres is reachable and prints `export DATABASE_URL=...` for `eval`.
#
#   eval "$(scripts/db.sh [DBNAME])"      # DBNAME defaults to "postgres"
#
# In order: DATABASE_URL if set (used as is), else a server on 127.0.0.1:5432, else
# `docker compose up -d --wait postgres` where a Docker engine answers, else a throwaway cluster
# from the local PostgreSQL binaries under target/pg (installed with apt-get when missing).
# Everything it says goes to stderr; stdout carries only the export line.
set -euo pipefail

db="${1:-postgres}"
root="$(cd "$(dirname "$0")/.." && pwd)"
log() { echo "db.sh: $*" >&2; }

# Is host:port accepting Postgres connections?
answers() {
  local host="$1" port="$2"
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$host" -p "$port" -t 2
  else
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
  fi
}

emit() { echo "export DATABASE_URL=postgres://postgres@$1:$2/$db"; }

if [[ -n "${DATABASE_URL:-}" ]]; then
  log "using DATABASE_URL from the environment"
  echo "export DATABASE_URL=$DATABASE_URL"
  exit 0
fi

if answers 127.0.0.1 5432; then
  log "Postgres answers on 127.0.0.1:5432"
  emit 127.0.0.1 5432
  exit 0
fi

if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  log "starting Postgres with docker compose"
  (cd "$root" && docker compose up -d --wait postgres) >&2
  emit 127.0.0.1 5432
  exit 0
fi

# A throwaway cluster from local binaries, on its own port.
port=54329
if answers 127.0.0.1 "$port"; then
  log "throwaway cluster already running on 127.0.0.1:$port"
  emit 127.0.0.1 "$port"
  exit 0
fi

bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [[ -z "$bindir" || ! -x "$bindir/initdb" ]]; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing PostgreSQL binaries with apt-get"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) >&2
    bindir="$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)"
  else
    log "no Postgres reachable, no Docker engine, and no PostgreSQL binaries to start one"
    exit 1
  fi
fi

data="$root/target/pg/data"
sock="$root/target/pg/sock"
mkdir -p "$root/target/pg" "$sock"
run_as=()
if [[ "$(id -u)" == 0 ]]; then
  # initdb and postgres refuse to run as root.
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown -R postgres "$root/target/pg"
  run_as=(runuser -u postgres --)
fi
if [[ ! -s "$data/PG_VERSION" ]]; then
  log "initdb $data"
  "${run_as[@]}" "$bindir/initdb" -D "$data" -U postgres --auth=trust -E UTF8 >/dev/null
fi
log "starting throwaway cluster on 127.0.0.1:$port ($bindir)"
"${run_as[@]}" "$bindir/pg_ctl" -D "$data" -l "$root/target/pg/log" -w start \
  -o "-p $port -k $sock -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" >&2
emit 127.0.0.1 "$port"
