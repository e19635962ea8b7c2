#!/usr/bin/env python3
"""An HTTP proxy that loses the first answer of every request: the fault the clients' retry
layers exist for.

Each request is forwarded to the upstream server in full and its answer read; the first time a
request is seen (same method, target, Authorization, Idempotency-Key and body), that answer is
thrown away and the client's connection reset, so the client sees a transport error although
the server executed the request. The same request sent again is answered normally. The journeys
of `make client-e2e` place orders through it and then count them: a client that retries with a
new key, or does not retry, fails.

    scripts/dropping-proxy.py --upstream http://127.0.0.1:8080 --port-file /tmp/port

`GET /__proxy/stats` (answered by the proxy itself) gives {"dropped": n, "forwarded": n}.
Standard library only; HTTP/1.1 with Content-Length bodies (what the clients send).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from urllib.parse import urlsplit

STATS = {"dropped": 0, "forwarded": 0}
SEEN: set[str] = set()


def log(text: str) -> None:
    print(f"dropping-proxy: {text}", file=sys.stderr, flush=True)


async def read_request(reader: asyncio.StreamReader) -> tuple[str, str, list[tuple[str, str]], bytes] | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if line]
    length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
    body = await reader.readexactly(length) if length else b""
    return method, target, headers, body  # type: ignore[return-value]


def header(headers: list[tuple[str, str]], name: str) -> str:
    return next((v for k, v in headers if k.lower() == name), "")


async def forward(upstream: tuple[str, int], method: str, target: str, headers: list[tuple[str, str]], body: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*upstream)
    kept = [(k, v) for k, v in headers if k.lower() not in ("connection", "keep-alive", "host")]
    lines = [f"{method} {target} HTTP/1.1", f"host: {upstream[0]}:{upstream[1]}", "connection: close"]
    lines += [f"{k}: {v}" for k, v in kept]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


async def serve(upstream: tuple[str, int], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # One request per connection: every answer says `connection: close`.
    try:
        request = await read_request(reader)
        if request is None:
            return
        method, target, headers, body = request
        if target == "/__proxy/stats":
            payload = json.dumps(STATS).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                + f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            return
        identity = hashlib.sha256(
            "\0".join(
                [method, target, header(headers, "authorization"), header(headers, "idempotency-key")]
            ).encode()
            + b"\0"
            + body
        ).hexdigest()
        answer = await forward(upstream, method, target, headers, body)
        status = answer.split(b"\r\n", 1)[0].decode("latin-1", "replace")
        if identity not in SEEN:
            SEEN.add(identity)
            STATS["dropped"] += 1
            log(f"{method} {target}: dropped the answer ({status})")
            writer.transport.abort()
            return
        STATS["forwarded"] += 1
        writer.write(answer)
        await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError) as error:
        log(f"connection lost: {error!r}")
    finally:
        if not writer.transport.is_closing():
            writer.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="the server, e.g. http://127.0.0.1:8080")
    parser.add_argument("--port-file", required=True, help="where the listening port is written")
    args = parser.parse_args()
    url = urlsplit(args.upstream)
    upstream = (url.hostname or "127.0.0.1", url.port or 80)
    server = await asyncio.start_server(lambda r, w: serve(upstream, r, w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    with open(args.port_file, "w") as file:
        file.write(f"{port}\n")
    log(f"listening on 127.0.0.1:{port}, forwarding to {upstream[0]}:{upstream[1]}")
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
