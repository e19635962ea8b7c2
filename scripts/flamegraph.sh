#!/usr/bin/env bash
# Where the server's CPU goes while it takes keyed orders from many clients at once, as a flame
# graph: `perf record` samples the `raptor serve` process (user space and kernel, every thread,
# DWARF call stacks) while 32 connections send keyed market orders, each with a fresh key, for
# 40 users (so the orders do not queue on one account's lock). Unlike `make profile` (user-space
# instructions, one order at a time) it shows the kernel's part (socket calls, wake-ups,
# scheduling) and what concurrency costs.
#
#   scripts/flamegraph.sh [seconds]   (make flamegraph; default 15 s sampled after 5 s of warm-up)
#
# Builds nothing: it runs target/profiling/raptor (the release build with symbols, Cargo.toml's
# `profiling` profile), or RAPTOR_PROFILE_BINARY. It creates a database of its own, installs
# perf (apt-get, linux-perf) and inferno (cargo install, into target/tools) when missing, and
# writes target/profile/flamegraph.keyed.svg (kernel frames marked `_[k]`), the folded stacks
# beside it, and a summary: orders/s, the server's CPU per order from /proc, the kernel's share,
# self time by kernel activity and by crate, and the inclusive shares of the request's parts.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=${1:-15}
clients=32
users=40
INFERNO_VERSION=0.12.8

target=${CARGO_TARGET_DIR:-target}
[[ $target == /* ]] || target=$root/$target
binary=${RAPTOR_PROFILE_BINARY:-$target/profiling/raptor}
[[ -x $binary ]] || {
	echo "$binary is missing: cargo build --profile profiling -p raptor-server --bin raptor" >&2
	exit 2
}
command -v perf >/dev/null || {
	echo "installing perf (apt-get)" >&2
	apt-get install -y -q linux-perf >/dev/null
}
tools=$target/tools
if ! cargo install --list --root "$tools" 2>/dev/null | grep -qx "inferno v$INFERNO_VERSION:"; then
	echo "installing inferno $INFERNO_VERSION into $tools (cargo install, a few minutes once)" >&2
	cargo install --quiet --locked --root "$tools" "inferno@$INFERNO_VERSION"
fi
out=$target/profile
mkdir -p "$out"
server=
# shellcheck source=lib/profile-db.sh
source scripts/lib/profile-db.sh
profile_database raptor_flame "$binary"
tokens=$out/flame.tokens
: >"$tokens"
for i in $(seq "$users"); do
	"$binary" users create --email "flame$i@example.com" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])' >>"$tokens"
done
"$binary" quotes set AAPL --bid 189.90 --ask 190.10 >/dev/null

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
RAPTOR_ENV=development RAPTOR_ADDR=127.0.0.1:$port "$binary" serve 2>"$out/flame.serve.log" &
server=$!

data=$out/perf.keyed.data
folded=$out/flamegraph.keyed.folded
svg=$out/flamegraph.keyed.svg
# The load: $clients keep-alive connections, each sending keyed orders one after another until
# told to stop; prints how many were answered while perf sampled (each answer must be 201).
python3 - "$port" "$tokens" "$clients" "$seconds" "$server" "$data" <<'EOF'
import asyncio, os, subprocess, sys, time, urllib.request, uuid

port, tokens, clients, seconds, pid, data = (
    int(sys.argv[1]), open(sys.argv[2]).read().split(), int(sys.argv[3]),
    float(sys.argv[4]), sys.argv[5], sys.argv[6])
for _ in range(600):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            if r.status == 200:
                break
    except OSError:
        pass
    time.sleep(0.5)
else:
    sys.exit("the server did not become ready")

body = b'{"symbol":"AAPL","qty":"1","side":"buy","type":"market","time_in_force":"day"}'
counting = False
answered = 0
stop = False

async def client(n):
    global answered
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    token = tokens[n % len(tokens)]
    while not stop:
        writer.write(
            b"POST /api/trading/orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Type: application/json\r\n"
            b"Idempotency-Key: " + str(uuid.uuid4()).encode() + b"\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        status = (await reader.readline()).split()[1]
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.lower() == b"content-length":
                length = int(value)
        await reader.readexactly(length)
        if status != b"201":
            sys.exit(f"an order answered {status.decode()}")
        if counting:
            answered += 1
    writer.close()

def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

async def main():
    global counting, stop
    tasks = [asyncio.create_task(client(n)) for n in range(clients)]
    await asyncio.sleep(5)
    perf = await asyncio.create_subprocess_exec(
        "perf", "record", "-q", "-F", "499", "--call-graph", "dwarf,16384", "-p", pid,
        "-o", data, "--", "sleep", str(seconds))
    await asyncio.sleep(0.5)
    counting, began, cpu = True, time.monotonic(), cpu_ms(pid)
    await asyncio.sleep(seconds - 1)
    counting, took, cpu = False, time.monotonic() - began, cpu_ms(pid) - cpu
    await perf.wait()
    stop = True
    await asyncio.gather(*tasks)
    print(f"{answered} keyed orders in {took:.1f} s while sampled: {answered / took:,.0f} orders/s, "
          f"server CPU {cpu / max(answered, 1):.3f} ms per order (/proc, perf's own cost included)")

asyncio.run(main())
EOF
kill "$server"
wait "$server" 2>/dev/null || true
server=

perf script -i "$data" --no-inline 2>/dev/null | "$tools/bin/inferno-collapse-perf" --kernel >"$folded"
"$tools/bin/inferno-flamegraph" --title "raptor serve: keyed market orders, $clients clients" \
	--minwidth 0.1 <"$folded" >"$svg"
echo "flame graph: $svg (folded stacks: $folded)"

# Where the sampled CPU went (each sample weighs the CPU time it stands for). Self time: a
# sample in the kernel goes to what the kernel was doing (below the syscall it entered), one in
# user space to the crate of its deepest Rust frame (mimalloc and libc by their symbols; the
# release build inlines across crates, and inlined code counts to the function it was inlined
# into, so a crate's self time is approximate: axum's futures carry inlined handler code). Then
# inclusive shares of the request's main parts (parts nest, so they overlap).
python3 - "$folded" <<'EOF'
import collections, sys

def kernel_part(frames):
    bare = {f.removesuffix("_[k]") for f in frames if f.endswith("_[k]")}
    if "net_rx_action" in bare:
        return "kernel: the loopback receiver's side, run by the sender (net_rx_action)"
    if bare & {"__sys_sendto", "__sys_sendmsg", "do_writev", "ksys_write"}:
        return "kernel: sending (TCP transmit)"
    if bare & {"__sys_recvfrom", "__sys_recvmsg", "ksys_read", "do_epoll_wait"}:
        return "kernel: receiving and epoll"
    if bare & {"__schedule", "try_to_wake_up", "__x64_sys_futex"}:
        return "kernel: switching tasks and wake-ups (futex included)"
    return "kernel: the rest (interrupts, page faults, timers)"

def crate(frame):
    if frame.startswith(("mi_", "_mi_")):
        return "mimalloc"
    name = frame.lstrip("<")
    if "::" not in name:
        return "libc (memcpy, memcmp)" if frame.startswith("__mem") else None
    head = name.split("::", 1)[0]
    if " as " in head:
        # `<F as axum::handler::Handler<…>>::call`: a type parameter's impl, the trait's crate.
        own, trait = head.split(" as ", 1)
        head = own if len(own) > 1 else trait
    if head in ("core", "alloc", "std"):
        return None
    return head

parts = {
    "the order's handler (raptor_api::trading::handlers::place)": "raptor_api::trading::handlers::place::",
    "  the claim (raptor_idempotency::claim)": "raptor_idempotency::claim",
    "  the claim round's task (its statement, on the store pool)": "tokio_util::task::task_tracker::TrackedFuture",
    "authentication and the gates (trading::gate::Writer)": "raptor_api::trading::gate::Writer",
    "connections going back to a pool (sqlx's ping on release)": "PoolConnection<DB>::return_to_pool",
    "BEGIN and COMMIT": "sqlx_core::transaction::Transaction<DB>::",
    "writing the response (hyper's poll_write)": "Dispatcher<D,Bs,I,T>::poll_write",
}
total, own, inclusive = 0, collections.Counter(), collections.Counter()
for line in open(sys.argv[1]):
    stack, _, count = line.rstrip().rpartition(" ")
    n, frames = int(count), stack.split(";")
    total += n
    if frames[-1].endswith("_[k]"):
        own[kernel_part(frames)] += n
    else:
        owner = next((c for c in map(crate, reversed(frames)) if c), "other")
        own["user: " + owner] += n
    for name, needle in parts.items():
        if any(needle in frame for frame in frames):
            inclusive[name] += n
total = max(total, 1)
kernel = sum(n for k, n in own.items() if k.startswith("kernel"))
print(f"{total / 1e6:,.0f} ms of the server's CPU sampled, {kernel / total:.1%} in the kernel. Self time:")
for name, n in sorted(own.items(), key=lambda item: -item[1])[:16]:
    print(f"  {n / total:6.1%}  {name}")
print("Inclusive:")
for name in parts:
    print(f"  {inclusive[name] / total:6.1%}  {name}")
EOF
