#!/usr/bin/env python3
"""The pod life cycle of deploy/kubernetes/deployment.yaml, on the real `raptor serve`.

Run by scripts/k8s-check.sh (`make k8s-check`), with the virtualenv's python (PyYAML), RAPTOR_BIN
(the built binary) and DATABASE_URL (a Postgres to make a throwaway database on). Everything the
kubelet would do is read from the manifests: the probes (path, initial delay, period, timeout,
failure and success thresholds), the preStop hook's sleep, terminationGracePeriodSeconds, and
the ConfigMap's settings, which the servers are started with.

1. Static: the grace period covers the worst case of a shutdown, term by term (the preStop hook,
   RAPTOR_SHUTDOWN_DRAIN_SECS, RAPTOR_HEADER_READ_TIMEOUT_SECS, RAPTOR_REQUEST_TIMEOUT_SECS,
   BACKGROUND_DRAIN read from crates/raptor-server/src/http.rs, the traces' last export); the
   probes use the routes they must; idle keep-alive outlasts a 60 s balancer idle timeout.
2. Start-up: the migration lock is held (what another pod or the migration Job does while it
   migrates), and pod A's `serve` starts: it waits for the lock, not listening. A kubelet is
   simulated against it as the kubelet works (the startup probe alone until it succeeds, then
   liveness and readiness, each on its period, a failure being a refused connection, a timeout
   or a status outside 200-399, a restart after failureThreshold failures in a row). The lock is
   held past the point where the liveness probe alone would have restarted the container (a
   second simulated kubelet, without the startup probe, shows when), then released: the pod
   must start, become ready, and never have been restarted.
3. Shutdown: pod B (the rest of the Deployment) starts on the same database. Clients place keyed
   orders through a simulated Service (new connections round-robin over the ready endpoints;
   kept-alive connections stay where they are, as through kube-proxy; a keyed request that found
   its reused connection closed is sent again on a new one, as Go's and other HTTP clients do).
   One client also starts an order whose body arrives slowly just before A stops accepting, so
   that it is still in flight for nearly the request timeout. Then A is deleted as the kubelet
   deletes a pod: liveness stops, A leaves the endpoints, the preStop hook's sleep, SIGTERM. A
   must exit 0 within terminationGracePeriodSeconds (else it is killed, as the kubelet would), the
   slow order and every other request must have been answered 2xx, and every order answered
   must be in the database exactly once.

Exit 1 when any check fails (each is printed); the servers' logs stay in target/checks/.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# opentelemetry_sdk's batch span processor waits this long for the last export at shutdown
# (docs/operations.md, "Traces").
TRACE_FLUSH_SECS = 5
# The idle timeout of the balancers the defaults must fit (AWS ALB, ingress-nginx upstreams).
BALANCER_IDLE_SECS = 60
# How long after the pod's deletion the test's Service stops sending new connections to it
# (the endpoint removal reaching kube-proxy); the preStop hook and the drain cover more.
ENDPOINT_PROPAGATION_SECS = 1.0
LOAD_CLIENTS = 6

FAILURES: list[str] = []
PASSED: list[str] = []
T_ORIGIN = time.monotonic()


def now() -> float:
    return time.monotonic() - T_ORIGIN


LOG_LOCK = threading.Lock()


def log(msg: str) -> None:
    with LOG_LOCK:
        print(f"k8s-lifecycle: [{now():7.2f}s] {msg}", file=sys.stderr, flush=True)


def check(ok: bool, what: str) -> bool:
    if ok:
        PASSED.append(what)
        log(f"ok: {what}")
    else:
        log(f"FAILED: {what}")
        FAILURES.append(what)
    return ok


# ---------------------------------------------------------------------------------------------
# The manifests


class Manifests:
    def __init__(self, deployment: Path, configmap: Path):
        docs = [d for d in yaml.safe_load_all(deployment.read_text()) if d]
        deploy = next(d for d in docs if d.get("kind") == "Deployment")
        pod = deploy["spec"]["template"]["spec"]
        self.container = next(c for c in pod["containers"] if c["name"] == "raptor")
        self.grace = int(pod.get("terminationGracePeriodSeconds", 30))
        self.probes = {
            kind: self.container.get(f"{kind}Probe")
            for kind in ("startup", "liveness", "readiness")
        }
        self.pre_stop = self._pre_stop_secs()
        cm = next(
            d
            for d in yaml.safe_load_all(configmap.read_text())
            if d and d.get("kind") == "ConfigMap"
        )
        self.config = {k: str(v) for k, v in (cm.get("data") or {}).items()}
        names = [
            ref["configMapRef"]["name"]
            for ref in self.container.get("envFrom", [])
            if "configMapRef" in ref
        ]
        if cm["metadata"]["name"] not in names:
            raise SystemExit(f"the Deployment does not read ConfigMap {cm['metadata']['name']}")

    def _pre_stop_secs(self) -> float:
        hook = (self.container.get("lifecycle") or {}).get("preStop") or {}
        if "sleep" in hook:
            return float(hook["sleep"]["seconds"])
        command = (hook.get("exec") or {}).get("command") or []
        if len(command) == 2 and command[0] in ("sleep", "/bin/sleep"):
            return float(command[1])
        if hook:
            raise SystemExit(f"preStop hook not understood (a sleep is expected): {hook}")
        return 0.0

    def setting(self, name: str, default: int) -> int:
        return int(self.config.get(name, default))


def probe_budget(spec: dict) -> float:
    """Seconds from the container's start to the probe's failureThreshold-th failure in a row
    when every probe fails (probes at initialDelaySeconds, then every periodSeconds)."""
    return spec.get("initialDelaySeconds", 0) + spec.get("periodSeconds", 10) * (
        spec.get("failureThreshold", 3) - 1
    )


def background_drain_secs() -> int:
    source = (ROOT / "crates/raptor-server/src/http.rs").read_text()
    found = re.search(r"BACKGROUND_DRAIN: Duration = Duration::from_secs\((\d+)\)", source)
    if not found:
        raise SystemExit("BACKGROUND_DRAIN not found in crates/raptor-server/src/http.rs")
    return int(found.group(1))


def static_checks(m: Manifests) -> None:
    drain = m.setting("RAPTOR_SHUTDOWN_DRAIN_SECS", 5)
    header = m.setting("RAPTOR_HEADER_READ_TIMEOUT_SECS", 10)
    keepalive = m.setting("RAPTOR_KEEPALIVE_TIMEOUT_SECS", 5)
    request = m.setting("RAPTOR_REQUEST_TIMEOUT_SECS", 30)
    background = background_drain_secs()
    worst = m.pre_stop + drain + header + request + background + TRACE_FLUSH_SECS
    log(
        f"worst-case shutdown: preStop {m.pre_stop:g} + drain {drain} + header read {header} + "
        f"request {request} + background {background} + traces {TRACE_FLUSH_SECS} = {worst:g} s; "
        f"terminationGracePeriodSeconds {m.grace}"
    )
    check(worst <= m.grace, f"the grace period ({m.grace} s) covers the worst case ({worst:g} s)")
    paths = {k: (v or {}).get("httpGet", {}).get("path") for k, v in m.probes.items()}
    check(
        paths == {"startup": "/healthz", "liveness": "/healthz", "readiness": "/readyz"},
        f"probe routes: startup and liveness on /healthz, readiness on /readyz ({paths})",
    )
    # The header read timeout does not end an idle connection (it times a request's head from
    # its first byte: tests/api/connection_edge.rs), so the keep-alive timeout alone does.
    idle = keepalive
    check(
        idle > BALANCER_IDLE_SECS,
        f"an idle keep-alive connection outlives a {BALANCER_IDLE_SECS} s balancer idle timeout "
        f"(the server closes it after {idle} s)",
    )


# ---------------------------------------------------------------------------------------------
# Processes and the database


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def psql(url: str, sql: str) -> str:
    return subprocess.run(
        ["psql", url, "-qXAt", "-v", "ON_ERROR_STOP=1", "-c", sql],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def sqlx_migration_lock_id(database: str) -> int:
    # sqlx-postgres' generate_lock_id: the advisory lock its migrator takes.
    return 0x3D32AD9E * zlib.crc32(database.encode())


class Pod:
    """One `raptor serve`, as a container runs it."""

    def __init__(self, name: str, binary: str, env: dict, logs: Path):
        self.name = name
        self.port = free_port()
        self.env = dict(env)
        self.env["RAPTOR_ADDR"] = f"127.0.0.1:{self.port}"
        if "RAPTOR_METRICS_ADDR" in self.env:
            self.env["RAPTOR_METRICS_ADDR"] = f"127.0.0.1:{free_port()}"
        self.log_path = logs / f"k8s-lifecycle-{name}.log"
        self.binary = binary
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0

    def start(self, cwd: str) -> None:
        self.log_file = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [self.binary, "serve"],
            env=self.env,
            cwd=cwd,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
        )
        self.started_at = now()
        log(f"pod {self.name}: raptor serve started on port {self.port} (log {self.log_path})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_text(self) -> str:
        self.log_file.flush()
        return self.log_path.read_text(errors="replace")


def http_probe(port: int, path: str, timeout: float) -> tuple[bool, str]:
    """An HTTP probe as the kubelet makes it: a new connection, success for 200-399."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(
            "GET",
            path,
            headers={"User-Agent": "kube-probe/1.37", "Accept": "*/*", "Connection": "close"},
        )
        response = conn.getresponse()
        response.read()
        return 200 <= response.status < 400, str(response.status)
    except (OSError, http.client.HTTPException) as err:
        return False, type(err).__name__
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------
# The kubelet


class Kubelet:
    """The kubelet's probe workers for one container (pkg/kubelet/prober/worker.go): one per probe,
    each probing on its own period from the container's start; liveness and readiness are
    skipped until the startup probe has succeeded; liveness and startup stop once the pod is being
    deleted; failureThreshold failures in a row of liveness or startup restart the container.
    `act=False` only records when it would have restarted it."""

    def __init__(self, label: str, pod: Pod, probes: dict, act: bool, quiet: bool = False):
        self.label = label
        self.pod = pod
        self.probes = {k: v for k, v in probes.items() if v}
        self.act = act
        self.quiet = quiet
        self.started = "startup" not in self.probes
        self.started_at: float | None = None if not self.started else pod.started_at
        self.ready = False
        self.ready_at: float | None = None
        self.deleting = threading.Event()
        self.stop = threading.Event()
        self.killed: tuple[float, str] | None = None
        self.events: list[tuple[float, str, bool, str]] = []
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self._worker, args=(kind,), daemon=True) for kind in self.probes
        ]

    def run(self) -> None:
        for t in self.threads:
            t.start()

    def _say(self, msg: str) -> None:
        if not self.quiet:
            log(f"kubelet{self.label}: {msg}")

    def _worker(self, kind: str) -> None:
        spec = self.probes[kind]
        period = spec.get("periodSeconds", 10)
        timeout = spec.get("timeoutSeconds", 1)
        failures = spec.get("failureThreshold", 3)
        successes = spec.get("successThreshold", 1)
        path = spec["httpGet"]["path"]
        start = self.pod.started_at
        tick = 0
        run_result, run_length = None, 0
        while not self.stop.is_set() and self.killed is None:
            due = start + spec.get("initialDelaySeconds", 0) + tick * period
            tick += 1
            if self.stop.wait(max(0.0, due - now())):
                return
            if self.killed is not None:
                return
            if kind in ("liveness", "startup") and self.deleting.is_set():
                return
            if kind == "startup" and self.started:
                return
            if kind != "startup" and not self.started:
                continue
            ok, detail = http_probe(self.pod.port, path, timeout)
            with self.lock:
                self.events.append((now(), kind, ok, detail))
                if ok == run_result:
                    run_length += 1
                else:
                    run_result, run_length = ok, 1
                if not ok and run_length == 1:
                    self._say(f"{kind} probe failed ({detail})")
                if ok and run_length >= successes:
                    if kind == "startup" and not self.started:
                        self.started, self.started_at = True, now()
                        self._say(f"startup probe succeeded: liveness and readiness begin")
                    if kind == "readiness" and not self.ready:
                        self.ready, self.ready_at = True, now()
                        self._say("ready (readiness probe succeeded)")
                if not ok and run_length >= failures:
                    if kind == "readiness":
                        if self.ready:
                            self._say(
                                f"not ready ({failures} readiness failures in a row: {detail})"
                            )
                        self.ready = False
                    elif self.killed is None:
                        self.killed = (now(), kind)
                        verb = "restarts" if self.act else "would restart"
                        self._say(f"{verb} the container: {failures} {kind} failures in a row")
                        if self.act and self.pod.alive():
                            self.pod.proc.kill()
                        return

    def first(self, kind: str, ok: bool, detail: str | None = None, after: float = 0.0):
        with self.lock:
            for t, k, o, d in self.events:
                if k == kind and o == ok and t >= after and (detail is None or d == detail):
                    return t
        return None


# ---------------------------------------------------------------------------------------------
# Clients


class Service:
    """The endpoints a new connection may go to (kube-proxy's view), round-robin."""

    def __init__(self, pods: list[Pod]):
        self.pods = list(pods)
        self.lock = threading.Lock()
        self.turn = 0

    def remove(self, pod: Pod) -> None:
        with self.lock:
            self.pods = [p for p in self.pods if p is not pod]

    def pick(self) -> Pod:
        with self.lock:
            self.turn += 1
            return self.pods[self.turn % len(self.pods)]


ORDER_PATH = "/api/trading/orders"


def order_body(side: str) -> bytes:
    return json.dumps({"symbol": "AAPL", "qty": "1", "side": side, "type": "market"}).encode()


class Client(threading.Thread):
    """Places keyed market orders back to back for one account (buy, sell, buy, ...).
    `keep_alive`: one connection for as long as the server keeps it (a client pool through
    kube-proxy); else a new connection per order."""

    def __init__(
        self, service: Service, token: str, keep_alive: bool, stop: threading.Event, first: Pod
    ):
        super().__init__(daemon=True)
        self.service, self.token, self.keep_alive, self.stop = service, token, keep_alive, stop
        self.first = first
        self.conn: http.client.HTTPConnection | None = None
        self.conn_pod: Pod | None = None
        self.conn_used = False
        self.answers: list[tuple[float, str, int, str]] = []  # (time, pod, status, key)
        self.errors: list[str] = []
        self.retries = 0

    def _connect(self) -> None:
        pod, self.first = self.first or self.service.pick(), None
        self.conn = http.client.HTTPConnection("127.0.0.1", pod.port, timeout=60)
        self.conn_pod, self.conn_used = pod, False

    def _drop(self) -> None:
        if self.conn:
            self.conn.close()
        self.conn = None

    def _send(self, key: str, body: bytes) -> tuple[int, Pod]:
        if self.conn is None:
            self._connect()
        headers = {
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "idempotency-key": key,
        }
        if not self.keep_alive:
            headers["connection"] = "close"
        pod = self.conn_pod
        self.conn.request("POST", ORDER_PATH, body=body, headers=headers)
        response = self.conn.getresponse()
        response.read()
        self.conn_used = True
        if response.will_close or not self.keep_alive:
            self._drop()
        return response.status, pod

    def run(self) -> None:
        side = "buy"
        while not self.stop.is_set():
            key = str(uuid.uuid4())
            body = order_body(side)
            try:
                try:
                    status, pod = self._send(key, body)
                except (
                    ConnectionResetError,
                    BrokenPipeError,
                    http.client.RemoteDisconnected,
                ) as err:
                    if not self.conn_used:
                        raise
                    # The server closed the kept-alive connection before reading this request
                    # (it stopped): a keyed request is sent again on a new connection.
                    self.retries += 1
                    self._drop()
                    status, pod = self._send(key, body)
                self.answers.append((now(), pod.name, status, key))
                if status // 100 != 2:
                    self.errors.append(f"{status} from pod {pod.name}")
                else:
                    side = "sell" if side == "buy" else "buy"
            except (OSError, http.client.HTTPException) as err:
                self.errors.append(f"{type(err).__name__}: {err}")
                self._drop()
                time.sleep(0.05)


def slow_order(pod: Pod, token: str, send_at: float, body_secs: float, result: dict) -> None:
    """On a connection to `pod` opened before its deletion (kept busy with GET /healthz; a new one
    when a draining answer closes it), an order sent at `send_at` whose body arrives over
    `body_secs`: in flight across the stop."""
    key = str(uuid.uuid4())
    result["key"] = key
    try:
        sock = socket.create_connection(("127.0.0.1", pod.port), timeout=120)
        reader = sock.makefile("rb")
        while now() < send_at - 2.5:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: raptor\r\n\r\n")
            status, close = read_response(reader)
            if status != 200:
                raise RuntimeError(f"GET /healthz answered {status}")
            if close:
                # Draining: the answer closed its connection, as HTTP clients honour; the
                # order goes on a new one (still before the listener closes).
                sock.close()
                sock = socket.create_connection(("127.0.0.1", pod.port), timeout=120)
                reader = sock.makefile("rb")
            time.sleep(min(2.0, max(0.0, send_at - 2.5 - now())))
        time.sleep(max(0.0, send_at - now()))
        body = order_body("buy")
        head = (
            f"POST {ORDER_PATH} HTTP/1.1\r\nhost: raptor\r\nauthorization: Bearer {token}\r\n"
            f"content-type: application/json\r\nidempotency-key: {key}\r\n"
            f"content-length: {len(body)}\r\n\r\n"
        ).encode()
        result["sent"] = now()
        sock.sendall(head)
        step = body_secs / (len(body) - 1)
        for i in range(len(body)):
            if i:
                time.sleep(step)
            sock.sendall(body[i : i + 1])
        result["complete"] = now()
        result["status"], _ = read_response(reader)
        result["answered"] = now()
        sock.close()
    except Exception as err:  # noqa: BLE001: any failure is the result
        result["error"] = f"{type(err).__name__}: {err}"
        result["answered"] = now()


def read_response(reader) -> tuple[int, bool]:
    """One answer: its status, and whether it closes its connection (`Connection: close`)."""
    line = reader.readline()
    if not line:
        raise ConnectionError("connection closed before an answer")
    status = int(line.split()[1])
    length = 0
    close = False
    while True:
        header = reader.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode().partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
        if name.strip().lower() == "connection" and value.strip().lower() == "close":
            close = True
    reader.read(length)
    return status, close


def wait_until(predicate, timeout: float, step: float = 0.1) -> bool:
    deadline = now() + timeout
    while now() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def cli(binary: str, env: dict, cwd: str, *args: str) -> dict:
    out = subprocess.run(
        [binary, *args], env=env, cwd=cwd, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)


# ---------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--deployment", type=Path, default=ROOT / "deploy/kubernetes/deployment.yaml"
    )
    parser.add_argument("--configmap", type=Path, default=ROOT / "deploy/kubernetes/configmap.yaml")
    args = parser.parse_args()
    binary = os.environ["RAPTOR_BIN"]
    admin_url = os.environ["DATABASE_URL"]
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    logs = target / "checks"
    logs.mkdir(parents=True, exist_ok=True)

    m = Manifests(args.deployment, args.configmap)
    log(f"manifests: {args.deployment}, {args.configmap}")
    static_checks(m)

    base = admin_url.split("?")[0].rsplit("/", 1)[0]
    database = f"raptor_k8s_lifecycle_{int(time.time())}_{os.getpid()}"
    db_url = f"{base}/{database}"
    psql(admin_url, f'create database "{database}"')
    # No .env is read from an empty working directory: the servers see the manifests' settings.
    workdir = tempfile.mkdtemp(prefix="k8s-lifecycle-")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RAPTOR_", "IDEMPOTENCY_", "OTEL_", "STRIPE_"))
    }
    env.update(m.config)
    env.update({"DATABASE_URL": db_url, "RAPTOR_ENV": "development", "RAPTOR_LOG_FORMAT": "json"})
    pods: list[Pod] = []
    holders: list[subprocess.Popen] = []
    try:
        lifecycle(m, binary, env, workdir, logs, database, db_url, admin_url, pods, holders)
    finally:
        for pod in pods:
            pod.stop()
        for holder in holders:
            if holder.poll() is None:
                holder.kill()
                holder.wait()
        try:
            psql(admin_url, f'drop database if exists "{database}" with (force)')
        except subprocess.CalledProcessError as err:
            log(f"could not drop database {database}: {err.stderr.strip()}")
    for f in FAILURES:
        log(f"failed: {f}")
    print(f"k8s-lifecycle: {len(PASSED)} passed, {len(FAILURES)} failed", file=sys.stderr)
    return 1 if FAILURES else 0


def lifecycle(m, binary, env, workdir, logs, database, db_url, admin_url, pods, holders) -> None:
    # --- 2. start-up while another migrator holds the lock ---------------------------------
    lock_id = sqlx_migration_lock_id(database)
    holder = subprocess.Popen(
        ["psql", db_url, "-qX"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    holders.append(holder)
    holder.stdin.write(f"select pg_advisory_lock({lock_id});\n")
    holder.stdin.flush()
    held_sql = (
        f"select count(*) from pg_locks l join pg_database d on d.oid = l.database "
        f"where d.datname = '{database}' and l.locktype = 'advisory' and l.granted"
    )
    if not wait_until(lambda: psql(admin_url, held_sql) == "1", 10):
        raise SystemExit("could not take the migration lock")
    log(f"the migration lock of {database} is held (another pod or the migration Job migrating)")

    a = Pod("a", binary, env, logs)
    pods.append(a)
    a.start(workdir)
    kubelet = Kubelet("", a, m.probes, act=True)
    without_startup = Kubelet(
        " without the startupProbe", a, {"liveness": m.probes["liveness"]}, act=False
    )
    kubelet.run()
    without_startup.run()

    waiting_sql = (
        f"select count(*) from pg_stat_activity where datname = '{database}' "
        f"and wait_event_type = 'Lock' and wait_event = 'advisory'"
    )
    check(
        wait_until(lambda: psql(admin_url, waiting_sql) == "1", 15),
        "pod a's serve waits for the migration lock (not listening yet)",
    )
    liveness_only = probe_budget(m.probes["liveness"])
    startup_budget = probe_budget(m.probes["startup"]) if m.probes["startup"] else 0
    hold = liveness_only + m.probes["liveness"].get("periodSeconds", 10)
    log(
        f"holding the lock {hold:g} s: the liveness probe alone would restart the container after "
        f"{liveness_only:g} s; the startup probe allows {startup_budget:g} s"
    )
    time.sleep(max(0.0, a.started_at + hold - now()))
    check(
        a.alive() and kubelet.killed is None,
        f"pod a is not restarted while it waits {hold:g} s to migrate",
    )
    if without_startup.killed:
        t, kind = without_startup.killed
        log(
            f"without the startupProbe the kubelet would have restarted it "
            f"{t - a.started_at:.1f} s "
            f"after it started ({kind}): the startup probe's budget is what keeps a migrating pod"
        )
    else:
        log("without the startupProbe the liveness probe alone would not have restarted it either")
    without_startup.stop.set()
    holder.stdin.close()
    holder.wait(timeout=10)
    released = now()
    log("lock released: the migrations run")
    ready = wait_until(
        lambda: kubelet.ready or kubelet.killed is not None or not a.alive(), startup_budget + 30
    )
    check(
        ready and kubelet.ready and kubelet.killed is None,
        "pod a migrates, passes its startup probe and becomes ready, never restarted"
        + (
            f" (started {kubelet.started_at - released:.1f} s after the lock was released, ready "
            f"{kubelet.ready_at - released:.1f} s after)"
            if kubelet.ready
            else ""
        ),
    )
    if not kubelet.ready:
        return

    # --- 3. shutdown under load -------------------------------------------------------------
    b = Pod("b", binary, env, logs)
    pods.append(b)
    b.start(workdir)
    if not check(wait_until(lambda: http_probe(b.port, "/readyz", 2)[0], 60), "pod b is ready"):
        return
    cli(binary, env, workdir, "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10")
    tokens = [
        cli(binary, env, workdir, "users", "create", "--email", f"k8s-{i}@example.com")["token"]
        for i in range(LOAD_CLIENTS + 1)
    ]
    service = Service([a, b])
    stop_load = threading.Event()
    # Kept-alive clients start on a, b, a, ...: some are on pod a when it stops.
    clients = [
        Client(service, tokens[i], keep_alive=i % 2 == 0, stop=stop_load, first=(a, b)[i // 2 % 2])
        for i in range(LOAD_CLIENTS)
    ]
    for c in clients:
        c.start()
    time.sleep(3)

    drain = m.setting("RAPTOR_SHUTDOWN_DRAIN_SECS", 5)
    request_timeout = m.setting("RAPTOR_REQUEST_TIMEOUT_SECS", 30)
    deleted = now() + 2.0
    listener_closes = deleted + m.pre_stop + drain
    slow: dict = {}
    slow_thread = threading.Thread(
        target=slow_order,
        args=(
            a,
            tokens[LOAD_CLIENTS],
            listener_closes - 2.0,
            max(1.0, request_timeout - 4.0),
            slow,
        ),
        daemon=True,
    )
    slow_thread.start()
    time.sleep(max(0.0, deleted - now()))

    log(
        f"pod a deleted: liveness stops, endpoints drop it in {ENDPOINT_PROPAGATION_SECS:g} s, "
        f"preStop sleeps {m.pre_stop:g} s"
    )
    kubelet.deleting.set()
    threading.Timer(ENDPOINT_PROPAGATION_SECS, service.remove, args=(a,)).start()
    time.sleep(max(0.0, deleted + m.pre_stop - now()))
    sigterm = now()
    a.proc.send_signal(signal.SIGTERM)
    log(f"SIGTERM to pod a ({sigterm - deleted:.1f} s after the deletion)")
    try:
        code = a.proc.wait(timeout=max(0.0, deleted + m.grace - now()))
        exited = now()
    except subprocess.TimeoutExpired:
        exited = now()
        log(f"the grace period ({m.grace} s) is over: SIGKILL, as the kubelet sends it")
        a.proc.kill()
        code = a.proc.wait()
    kubelet.stop.set()
    time.sleep(1)
    stop_load.set()
    for c in clients:
        c.join(timeout=30)
    slow_thread.join(timeout=request_timeout + 10)

    elapsed = exited - deleted
    check(code == 0, f"pod a exits with status 0 (status {code})")
    check(
        elapsed <= m.grace,
        f"pod a exits {elapsed:.1f} s after its deletion, within "
        f"terminationGracePeriodSeconds ({m.grace} s)",
    )
    draining = kubelet.first("readiness", False, "503", after=sigterm)
    if draining is not None:
        log(f"readiness probe saw 503 (draining) {draining - sigterm:.1f} s after SIGTERM")
    served = [(t, s) for c in clients for (t, p, s, _) in c.answers if p == "a" and t > sigterm]
    check(
        served,
        f"pod a answered {len(served)} orders between SIGTERM and its exit (load during the drain)",
    )
    answers = [x for c in clients for x in c.answers]
    errors = [e for c in clients for e in c.errors]
    retries = sum(c.retries for c in clients)
    on_a = sum(1 for x in answers if x[1] == "a")
    log(
        f"load: {len(answers)} orders answered ({on_a} by pod a, {len(answers) - on_a} by pod b), "
        f"{retries} sent again on a new connection after pod a closed a kept-alive one"
    )
    check(not errors, f"no order failed ({len(errors)} failures: {errors[:5]})")
    if "status" not in slow:
        check(False, f"the slow order in flight across the stop was answered ({slow.get('error')})")
    else:
        # The server cannot answer before the body is complete: the stop waited for it.
        check(
            slow.get("status") == 201
            and slow["complete"] > listener_closes
            and exited > slow["complete"],
            f"the slow order sent {slow['sent'] - deleted:.1f} s after the deletion (pod a stopped "
            f"accepting at {listener_closes - deleted:.1f} s), its body complete at "
            f"{slow['complete'] - deleted:.1f} s, was answered {slow.get('status')} before pod a "
            f"exited",
        )
    text = a.log_text()
    check("raptor stopped" in text, "pod a's log ends with 'raptor stopped'")
    check(
        "background work still running" not in text,
        "pod a left no background work (key releases, sign-in links) unfinished",
    )
    b.stop()
    keys = {x[3] for x in answers if x[2] // 100 == 2}
    if slow.get("status") == 201:
        keys.add(slow["key"])
    orders = int(psql(db_url, "select count(*) from paper_orders"))
    check(
        orders == len(keys),
        f"every order answered is in the database once ({orders} rows, {len(keys)} keys)",
    )


if __name__ == "__main__":
    sys.exit(main())
