#!/usr/bin/env bash
# Instructions the server executes per request, counted by valgrind's callgrind: a count, not a
# time, so it barely moves with whatever else the machine is doing (a noisy machine moves
# throughput by 20 % between runs; this moves by about 1.5 %, as timing changes how often the
# runtime's workers wake). It counts user space only: the kernel's share (socket calls,
# scheduling) is not in it.
#
#   scripts/profile-server.sh [keyed|unkeyed|replay] [requests]   (make profile)
#
# Builds nothing: it runs target/profiling/raptor (`make profile` builds it: the release build
# with symbols, Cargo.toml's `profiling` profile), or RAPTOR_PROFILE_BINARY. It creates a database of its own,
# starts `raptor serve` under callgrind with counting off, sends 200 requests to warm it up,
# counts the next N (default 1000), one at a time over one keep-alive connection, and prints
# instructions per request and the functions that executed most of them (inclusive). The
# callgrind file stays in target/profile/ for callgrind_annotate or KCachegrind.
set -euo pipefail
cd "$(dirname "$0")/.."

kind=${1:-keyed}
requests=${2:-1000}
case $kind in keyed | unkeyed | replay) ;; *)
	echo "usage: $0 [keyed|unkeyed|replay] [requests]" >&2
	exit 2
	;;
esac

target=${CARGO_TARGET_DIR:-target}
binary=${RAPTOR_PROFILE_BINARY:-$target/profiling/raptor}
[[ -x $binary ]] || {
	echo "$binary is missing: cargo build --profile profiling -p raptor-server --bin raptor" >&2
	exit 2
}
command -v valgrind >/dev/null || {
	echo "installing valgrind (apt-get)" >&2
	apt-get install -y -q valgrind >/dev/null
}
out=$target/profile
mkdir -p "$out"
server=
# shellcheck source=lib/profile-db.sh
source scripts/lib/profile-db.sh
profile_database raptor_profile "$binary"
token=$("$binary" users create --email profile@example.com |
	python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
"$binary" quotes set AAPL --bid 189.90 --ask 190.10 >/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
file=$out/callgrind.$kind.out
RAPTOR_ENV=development RAPTOR_ADDR=127.0.0.1:$port valgrind --tool=callgrind --instr-atstart=no \
	--callgrind-out-file="$file" "$binary" serve 2>"$out/valgrind.log" &
server=$!

python3 - "$port" "$token" "$kind" "$requests" "$server" <<'EOF'
import http.client, json, subprocess, sys, time, uuid

port, token, kind, requests, pid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
body = '{"symbol":"AAPL","qty":"1","side":"buy","type":"market","time_in_force":"day"}'
for _ in range(600):
    try:
        c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=60)
        c.request("GET", "/readyz")
        ready = c.getresponse()
        ready.read()
        if ready.status == 200:
            break
    except OSError:
        pass
    time.sleep(0.5)
else:
    sys.exit("the server did not become ready")
replayed = str(uuid.uuid4())

def order():
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if kind == "keyed":
        headers["Idempotency-Key"] = str(uuid.uuid4())
    elif kind == "replay":
        headers["Idempotency-Key"] = replayed
    c.request("POST", "/api/trading/orders", body, headers)
    r = c.getresponse()
    r.read()
    if r.status != 201:
        sys.exit(f"order answered {r.status}")

for _ in range(200):
    order()
subprocess.run(["callgrind_control", "-i", "on", pid], check=True, stdout=subprocess.DEVNULL)
for _ in range(requests):
    order()
subprocess.run(["callgrind_control", "-i", "off", pid], check=True, stdout=subprocess.DEVNULL)
subprocess.run(["callgrind_control", "-d", pid], check=True, stdout=subprocess.DEVNULL)
EOF
kill "$server"
wait "$server" 2>/dev/null || true
server=

# The dump of the counted requests is the file with the highest part number.
dump=$(ls -1 "$file"* | sort -t. -k4 -n | tail -1)
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ && !n++ {gsub(",", "", $1); print $1}')
echo "$kind orders: $requests counted, $(python3 -c "print(f'{$total / $requests:,.0f}')") instructions per request (user space, callgrind: $dump)"
callgrind_annotate --inclusive=yes "$dump" 2>/dev/null |
	awk '/^-+$/ {n++; next} n >= 5 && NF' | head -n 25 | cut -c1-160 || true
