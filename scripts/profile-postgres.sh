#!/usr/bin/env bash
# Instructions Postgres executes per request, counted by valgrind's callgrind in every backend:
# a count, not a time, so it does not move with a busy or slower machine, where throughput
# ratios between two runs swing by 20 % or more. It is how the cost of an idempotency key to
# Postgres is measured (keyed minus unkeyed), and what a change to a statement or the schema
# saves, before `make bench` times it.
#
#   scripts/profile-postgres.sh [keyed|unkeyed|replay ...]   (make profile-postgres)
#
# Starts a throwaway cluster of its own from the local PostgreSQL binaries (apt-get installs
# postgresql and valgrind when missing) under callgrind, on a free port under
# target/profile/pg, with the bench's settings that matter here (fsync on, autovacuum off).
# For each kind it runs the `raptor` binary (target/release/raptor, or RAPTOR_PROFILE_BINARY)
# twice on a fresh database, sending SHORT and then LONG orders (default 100 and 400) one at a
# time over one keep-alive connection; each run's backends exit with the server and write their
# counts. Instructions per request = (LONG run - SHORT run) / (LONG - SHORT): what connecting,
# warming caches and the first plans cost cancels out. The callgrind files stay in
# target/profile/postgres.<kind>.<orders>/ (callgrind_annotate); when both kinds ran, the
# functions whose inclusive count per order grew most from unkeyed to keyed are printed, per
# order by the same difference of the two runs.
# PROFILE_SHORT and PROFILE_LONG set the two runs' orders. PROFILE_SQL, when set, runs on each
# database after its migrations: what a schema change would save (drop an index, a trigger, a
# constraint), counted before it is written as a migration.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

kinds=("$@")
[[ ${#kinds[@]} -gt 0 ]] || kinds=(unkeyed keyed replay)
for kind in "${kinds[@]}"; do
	case $kind in keyed | unkeyed | replay) ;; *)
		echo "usage: $0 [keyed|unkeyed|replay ...]" >&2
		exit 2
		;;
	esac
done
short=${PROFILE_SHORT:-100}
long=${PROFILE_LONG:-400}

target=${CARGO_TARGET_DIR:-target}
[[ $target == /* ]] || target=$root/$target
binary=${RAPTOR_PROFILE_BINARY:-$target/release/raptor}
[[ -x $binary ]] || {
	echo "$binary is missing: cargo build --release -p raptor-server --bin raptor" >&2
	exit 2
}
install() {
	echo "installing $* (apt-get)" >&2
	apt-get install -y -q "$@" >/dev/null
}
command -v valgrind >/dev/null || install valgrind
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
[[ -n $bindir && -x $bindir/initdb ]] || {
	install postgresql
	bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
}

out=$target/profile
pg=$out/pg
rm -rf "$pg"
mkdir -p "$pg/dumps"
run_as=()
if [[ $(id -u) == 0 ]]; then
	# initdb and postgres refuse to run as root.
	id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
	run_as=(runuser -u postgres --)
fi
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
[[ $(id -u) == 0 ]] && chown -R postgres "$pg"
"${run_as[@]}" "$bindir/initdb" -D "$pg/data" -U postgres --auth=trust -E UTF8 >/dev/null
cat >>"$pg/data/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$pg'
autovacuum = off
fsync = on
EOF
server=
postmaster=
cleanup() {
	[[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
	if [[ -n $postmaster ]]; then
		"${run_as[@]}" "$bindir/pg_ctl" -D "$pg/data" stop -m fast -w -t 120 >/dev/null 2>&1 ||
			kill "$postmaster" 2>/dev/null
		wait "$postmaster" 2>/dev/null
	fi
	true
}
trap cleanup EXIT
# Every process the postmaster forks stays under callgrind and writes its own file when it
# exits (valgrind follows fork; --trace-children is for exec).
"${run_as[@]}" valgrind --tool=callgrind --trace-children=yes \
	--callgrind-out-file="$pg/dumps/callgrind.%p" "$bindir/postgres" -D "$pg/data" \
	>"$pg/valgrind.log" 2>&1 &
postmaster=$!
for _ in $(seq 120); do
	pg_isready -q -h 127.0.0.1 -p "$port" && break
	sleep 1
done
pg_isready -q -h 127.0.0.1 -p "$port" || {
	echo "Postgres under callgrind did not start; see $pg/valgrind.log" >&2
	exit 1
}

export RUST_LOG=warn RAPTOR_LOG_FORMAT=json
# A throwaway server on this machine: no SMTP relay, development keys (production, the default,
# refuses to start without them).
export RAPTOR_ENV=development
# No background jobs: their statements would be counted.
export RAPTOR_ORDER_EXPIRY_INTERVAL_SECS=0 RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS=0
export RAPTOR_QUOTE_SWEEP_INTERVAL_MS=0 RAPTOR_MAIL_RELAY_INTERVAL_MS=0
export RAPTOR_PAPER_STARTING_CASH=100000000.00
export RAPTOR_RESPONSE_KEYS=${RAPTOR_RESPONSE_KEYS:-$(scripts/response-key.sh profile)}

# Sums the counts in the files written since $1 and moves them to $2; prints the sum.
collect() {
	python3 - "$1" "$2" "$pg/dumps" <<'EOF'
import os, re, sys
since, into, dumps = float(sys.argv[1]), sys.argv[2], sys.argv[3]
os.makedirs(into, exist_ok=True)
total = 0
for name in os.listdir(dumps):
    path = os.path.join(dumps, name)
    if os.stat(path).st_mtime < since:
        continue
    with open(path, errors="replace") as f:
        m = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
    if m:
        total += int(m.group(1))
        os.replace(path, os.path.join(into, name))
print(total)
EOF
}

# One server run of $2 orders of kind $1 on database $3; prints the instructions its backends ran.
run() {
	local kind=$1 orders=$2 db=$3 since http
	since=$(date +%s.%N)
	sleep 0.1
	http=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	DATABASE_URL=postgres://postgres@127.0.0.1:$port/$db?sslmode=disable RAPTOR_ADDR=127.0.0.1:$http \
		"$binary" serve 2>>"$pg/serve.log" &
	server=$!
	python3 - "$http" "$(cat "$pg/$db.token")" "$kind" "$orders" <<'EOF'
import http.client, sys, time, uuid
port, token, kind, orders = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for _ in range(600):
    try:
        c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)
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
body = '{"symbol":"AAPL","qty":"1","side":"buy","type":"market","time_in_force":"day"}'
replayed = str(uuid.uuid4())
for _ in range(orders):
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
EOF
	kill "$server"
	wait "$server" 2>/dev/null || true
	server=
	# The backends write their files as they exit.
	sleep 3
	collect "$since" "$out/postgres.$kind.$orders"
}

declare -A per
for kind in "${kinds[@]}"; do
	db=profile_$kind
	psql -q -h 127.0.0.1 -p "$port" -U postgres -c "create database $db"
	DATABASE_URL=postgres://postgres@127.0.0.1:$port/$db?sslmode=disable "$binary" migrate >/dev/null
	if [[ -n ${PROFILE_SQL:-} ]]; then
		psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" -c "$PROFILE_SQL"
	fi
	DATABASE_URL=postgres://postgres@127.0.0.1:$port/$db?sslmode=disable "$binary" users create --email "profile@example.com" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' >"$pg/$db.token"
	DATABASE_URL=postgres://postgres@127.0.0.1:$port/$db?sslmode=disable "$binary" quotes set AAPL --bid 189.90 --ask 190.10 >/dev/null
	rm -rf "$out/postgres.$kind".*
	a=$(run "$kind" "$short" "$db")
	b=$(run "$kind" "$long" "$db")
	per[$kind]=$(((b - a) / (long - short)))
	printf '%s orders: %s Postgres instructions per request (callgrind, every backend; files in %s)\n' \
		"$kind" "$(python3 -c "print(f'{${per[$kind]}:,}')")" "$out/postgres.$kind.{$short,$long}"
done

if [[ -n ${per[keyed]:-} && -n ${per[unkeyed]:-} ]]; then
	printf 'the key: %s instructions per order (keyed - unkeyed); unkeyed / keyed %.3f\n' \
		"$(python3 -c "print(f'{${per[keyed]} - ${per[unkeyed]}:,}')")" \
		"$(python3 -c "print(${per[unkeyed]} / ${per[keyed]})")"
	echo "functions whose inclusive instructions per order grew most from unkeyed to keyed:"
	python3 - "$out" "$short" "$long" <<'EOF'
import collections, os, re, subprocess, sys
out, short, long = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def inclusive(d):
    total = collections.Counter()
    for name in os.listdir(d):
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100",
                               os.path.join(d, name)], capture_output=True, text=True).stdout
        for line in text.splitlines():
            m = re.match(r"^\s*([\d,]+)\s+\([^)]*\)\s+\S*:(\w+)\b", line)
            if m:
                total[m.group(2)] += int(m.group(1).replace(",", ""))
    return total
def per_order(kind):
    a = inclusive(f"{out}/postgres.{kind}.{short}")
    b = inclusive(f"{out}/postgres.{kind}.{long}")
    return {k: (b[k] - a[k]) / (long - short) for k in set(a) | set(b)}
unkeyed, keyed = per_order("unkeyed"), per_order("keyed")
# The frames every request runs under say nothing of where the key's work goes.
frames = {"main", "PostmasterMain", "PostgresMain", "PortalRun", "__libc_start_main"}
names = [k for k in keyed if not k.startswith("0x") and k not in frames]
for name in sorted(names, key=lambda k: unkeyed.get(k, 0) - keyed[k])[:15]:
    print(f"  {keyed[name] - unkeyed.get(name, 0):>10,.0f}  {name}")
EOF
fi
