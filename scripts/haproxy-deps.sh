#!/usr/bin/env bash
# What `make test` needs beyond Postgres: HAProxy (Debian's package), which the load-balancer
# tests start in front of the server on ports of their own (the package's service is never
# used). Installs it with apt-get when missing and run as root; otherwise says what to do.
set -euo pipefail
log() { echo "haproxy-deps: $*" >&2; }

if command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]]; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  log "missing: haproxy (install it, e.g. apt-get install -y haproxy)"
  exit 1
fi
log "installing haproxy with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq haproxy >&2 || { apt-get update -qq >&2 && apt-get install -y -qq haproxy >&2; }
