# Sourced by the checks (client-e2e, docs-check, quickstart): `raptor serve` on a spare port of
# 127.0.0.1 against a fresh, uniquely named database on the Postgres scripts/db.sh finds; both
# are removed on exit.
#
#   source scripts/lib/fresh-server.sh
#   fresh_server_start NAME       # exports DATABASE_URL, RAPTOR_ADDR, RAPTOR_URL, RAPTOR_BIN
#   fresh_proxy_start             # then: exports RAPTOR_PROXY_URL, a proxy in front of the
#                                 # server that drops the first answer of every request
#
# The server runs from the repository root (so RAPTOR_DOCS_ASSETS' default resolves there) and
# logs to target/checks/NAME-server.log.

FRESH_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FRESH_PID=""
FRESH_DB=""
FRESH_ADMIN_URL=""
FRESH_PROXY_PID=""

fresh_server_stop() {
  if [[ -n "$FRESH_PROXY_PID" ]]; then
    kill "$FRESH_PROXY_PID" 2>/dev/null || true
    wait "$FRESH_PROXY_PID" 2>/dev/null || true
    FRESH_PROXY_PID=""
  fi
  if [[ -n "$FRESH_PID" ]] && kill -0 "$FRESH_PID" 2>/dev/null; then
    kill "$FRESH_PID" 2>/dev/null || true
    wait "$FRESH_PID" 2>/dev/null || true
  fi
  FRESH_PID=""
  if [[ -n "$FRESH_DB" ]]; then
    if command -v psql >/dev/null 2>&1; then
      psql "$FRESH_ADMIN_URL" -qXc "drop database if exists \"$FRESH_DB\" with (force)" >/dev/null 2>&1 \
        || echo "fresh-server: could not drop database $FRESH_DB" >&2
    else
      echo "fresh-server: no psql; database $FRESH_DB is left behind" >&2
    fi
    FRESH_DB=""
  fi
}

# A free TCP port on 127.0.0.1 (asked from the kernel).
fresh_free_port() {
  node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

fresh_server_start() {
  local name="$1"
  local target="${CARGO_TARGET_DIR:-$FRESH_ROOT/target}"
  echo "fresh-server: building raptor" >&2
  (cd "$FRESH_ROOT" && cargo build --locked -q -p raptor-server --bin raptor)
  export RAPTOR_BIN="$target/debug/raptor"

  eval "$("$FRESH_ROOT/scripts/db.sh" postgres)"
  FRESH_ADMIN_URL="$DATABASE_URL"
  # Same server and options, another database name.
  local base="${DATABASE_URL%%\?*}"
  local query="${DATABASE_URL#"$base"}"
  FRESH_DB="raptor_${name//-/_}_$(date +%s)_$$"
  export DATABASE_URL="${base%/*}/$FRESH_DB$query"

  local port
  port="$(fresh_free_port)"
  export RAPTOR_ADDR="127.0.0.1:$port"
  export RAPTOR_URL="http://$RAPTOR_ADDR"
  # A throwaway server on a developer's machine or in CI: no SMTP relay, development keys.
  export RAPTOR_ENV="${RAPTOR_ENV:-development}"
  mkdir -p "$target/checks"
  local log="$target/checks/$name-server.log"
  trap fresh_server_stop EXIT
  (cd "$FRESH_ROOT" && exec "$RAPTOR_BIN" serve) >"$log" 2>&1 &
  FRESH_PID=$!
  local waited=0
  until [[ "$(curl -s -o /dev/null -w '%{http_code}' "$RAPTOR_URL/readyz" || true)" == 200 ]]; do
    if ! kill -0 "$FRESH_PID" 2>/dev/null || (( waited >= 120 )); then
      echo "fresh-server: raptor serve did not become ready; its log ($log):" >&2
      tail -n 40 "$log" >&2
      return 1
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  echo "fresh-server: raptor serve on $RAPTOR_URL, database $FRESH_DB (log: $log)" >&2
}

# scripts/dropping-proxy.py in front of the started server (its log: target/checks/NAME-proxy.log).
fresh_proxy_start() {
  local name="$1"
  local target="${CARGO_TARGET_DIR:-$FRESH_ROOT/target}"
  local port_file="$target/checks/$name-proxy.port"
  rm -f "$port_file"
  python3 "$FRESH_ROOT/scripts/dropping-proxy.py" --upstream "$RAPTOR_URL" --port-file "$port_file" \
    2>"$target/checks/$name-proxy.log" &
  FRESH_PROXY_PID=$!
  local waited=0
  until [[ -s "$port_file" ]]; do
    if ! kill -0 "$FRESH_PROXY_PID" 2>/dev/null || (( waited >= 50 )); then
      echo "fresh-server: the dropping proxy did not start:" >&2
      cat "$target/checks/$name-proxy.log" >&2
      return 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  export RAPTOR_PROXY_URL="http://127.0.0.1:$(cat "$port_file")"
  echo "fresh-server: dropping proxy on $RAPTOR_PROXY_URL" >&2
}
