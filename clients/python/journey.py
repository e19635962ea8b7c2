"""A short app journey through the generated Python client against a real Raptor server.

Sign-up over HTTP (register, the emailed token, verify), a quote set by an operator, a keyed
market order and its replay (bare and quoted keys name the same key), a malformed key refused,
resting orders, the order history paged two at a time, the account's cash worked out to the
cent; then three orders placed with `raptor_sdk.retrying` through a proxy that drops the first
answer of every request (scripts/dropping-proxy.py): each operation makes exactly one order; last,
the trade-updates stream (`raptor_sdk.trade_updates`) through a relay that cuts it after its first
message: a market order's `new` and `fill`, the second after a resume with `Last-Event-ID`, then
again from the first's id with `atrade_updates`, and `HistoryGone` for an id never sent.
`scripts/python-client.sh e2e` (part of `make client-e2e`) runs it:

    RAPTOR_URL=http://127.0.0.1:PORT RAPTOR_PROXY_URL=http://127.0.0.1:PORT2 \
    RAPTOR_BIN=target/debug/raptor \
    RAPTOR_SERVER_LOG=target/checks/client-e2e-python-server.log python journey.py
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import re
import socket
import subprocess
import threading
import time
import uuid
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

from raptor_client import AuthenticatedClient, Client
from raptor_client.api.admin import set_quote
from raptor_client.api.auth import register, verify_link
from raptor_client.api.trading import create_order, get_account, list_orders
from raptor_client.models import (
    AccountResponse,
    CreateOrderRequest,
    EmailRequest,
    ErrorBody,
    ErrorCode,
    OrderListResponse,
    OrderListStatus,
    OrderResponse,
    OrderStatus,
    OrderType,
    Retry,
    SessionResponse,
    SetQuoteRequest,
    Side,
    TimeInForce,
    TradeEvent,
    TradeUpdate,
    VerifyRequest,
)
from raptor_client.types import UNSET, Response
from raptor_sdk import HistoryGone, atrade_updates, pages, retrying, trade_updates

T = TypeVar("T")


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise SystemExit(f"journey: {name} is required")
    return value


def check(condition: bool, what: str) -> None:
    if not condition:
        raise AssertionError(f"check failed: {what}")


def step(text: str) -> None:
    print(f"journey: {text}", flush=True)


def expect(label: str, response: Response[Any], status: HTTPStatus, kind: type[T]) -> T:
    """The response has `status` and its body parsed as `kind` (the generated model)."""
    check(response.status_code == status, f"{label}: {response.status_code}, expected {status}: {response.content!r}")
    parsed = response.parsed
    if not isinstance(parsed, kind):
        raise AssertionError(f"{label}: parsed as {type(parsed).__name__}, expected {kind.__name__}")
    return parsed


def emailed_token(log: Path, email: str, timeout: float = 20.0) -> str:
    """The token of the newest sign-in link the server logged for `email` (no SMTP relay set:
    the relay logs each message's link instead of sending it)."""
    pattern = re.compile(r"token=(rpl_[A-Za-z0-9_-]+)")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in reversed(log.read_text(errors="replace").splitlines()):
            if email in line and (match := pattern.search(line)):
                return match.group(1)
        time.sleep(0.2)
    raise AssertionError(f"no sign-in link for {email} in {log}")


def cost(order: OrderResponse) -> Decimal:
    """Cash an order moved: filled quantity times average price, plus fees."""
    price = Decimal(order.filled_avg_price or "0")
    return Decimal(order.filled_qty) * price + Decimal(order.fees)


class CuttingRelay:
    """A TCP relay to the server that cuts the first event stream it carries right after the
    stream's first whole message, as a network that drops a connection mid-stream does; later
    connections pass untouched. It records each request's `Last-Event-ID`.

    The stream does not go through scripts/dropping-proxy.py: that proxy reads each answer to its
    end before passing it on or dropping it, and a stream's answer has no end, so nothing would
    ever come through. This relay drops the stream's connection instead, which is the failure a
    stream meets."""

    def __init__(self, base: str) -> None:
        url = urlsplit(base)
        self.upstream = (url.hostname or "127.0.0.1", url.port or 80)
        self.last_event_ids: list[str | None] = []
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            origin = socket.create_connection(self.upstream)
            self.sockets += [client, origin]
            cut = self.cuts == 0
            threading.Thread(target=self.requests, args=(client, origin), daemon=True).start()
            threading.Thread(target=self.answers, args=(origin, client, cut), daemon=True).start()

    def requests(self, client: socket.socket, origin: socket.socket) -> None:
        head = b""
        while chunk := self.receive(client):
            if b"\r\n\r\n" not in head:
                head += chunk
                if b"\r\n\r\n" in head:
                    found = re.search(rb"^last-event-id:[ \t]*(\S*)", head, re.I | re.M)
                    self.last_event_ids.append(found.group(1).decode() if found else None)
            origin.sendall(chunk)
        self.close(client, origin)

    def answers(self, origin: socket.socket, client: socket.socket, cut: bool) -> None:
        answer = b""
        while chunk := self.receive(origin):
            if not cut or self.cuts:
                client.sendall(chunk)
                continue
            sent = len(answer)
            answer += chunk
            # The first message ends at the first blank line after a data line (chunked framing
            # uses CRLF, the server's messages LF).
            data = answer.find(b"\ndata: ")
            end = -1 if data == -1 else answer.find(b"\n\n", data)
            if end == -1:
                client.sendall(chunk)
                continue
            client.sendall(answer[sent : end + 2])
            self.cuts += 1
            break
        self.close(client, origin)

    @staticmethod
    def receive(sock: socket.socket) -> bytes:
        try:
            return sock.recv(65536)
        except OSError:
            return b""

    @staticmethod
    def close(*sockets: socket.socket) -> None:
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def stop(self) -> None:
        self.close(*self.sockets)


def stream_journey(base: str, user: AuthenticatedClient, token: str, market: CreateOrderRequest) -> None:
    """A market order's `new` and `fill` from `trade_updates`, the stream cut after the first and
    resumed with `Last-Event-ID`; again from the first's id with `atrade_updates`; `HistoryGone`."""
    relay = CuttingRelay(base)
    cut = AuthenticatedClient(base_url=relay.url, token=token)
    client_order_id = f"stream-{uuid.uuid4()}"
    opened = threading.Event()
    received: queue.Queue[TradeUpdate | BaseException] = queue.Queue()
    updates = trade_updates(cut, on_connect=lambda _id: opened.set())

    def read() -> None:
        try:
            for update in updates:
                received.put(update)
                order = update.order
                if update.event == TradeEvent.FILL and isinstance(order, OrderResponse):
                    if order.client_order_id == client_order_id:
                        break
        except BaseException as error:  # handed to the journey's thread, which raises it
            received.put(error)
        finally:
            updates.close()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # A stream without Last-Event-ID starts with what happens after it opens: the order is
        # placed once the server has answered the stream's request.
        check(opened.wait(20), "the stream opened")
        body = CreateOrderRequest.from_dict({**market.to_dict(), "client_order_id": client_order_id})
        placed = expect(
            "streamed order",
            create_order.sync_detailed(client=user, body=body, idempotency_key=str(uuid.uuid4())),
            HTTPStatus.CREATED,
            OrderResponse,
        )
        seen: list[TradeUpdate] = []
        reader.join(30)
        check(not reader.is_alive(), f"the fill came within 30 s ({len(seen)} updates)")
        while not received.empty():
            item = received.get()
            if isinstance(item, BaseException):
                raise item
            seen.append(item)
        mine = [u for u in seen if isinstance(u.order, OrderResponse) and u.order.id == placed.id]
        check(
            [u.event for u in mine] == [TradeEvent.NEW, TradeEvent.FILL],
            f"the order's events: new, fill ({[(u.id, str(u.event)) for u in mine]}; all: {len(seen)})",
        )
        accepted, fill = mine
        check(int(fill.id) > int(accepted.id), f"ids increase ({accepted.id} < {fill.id})")
        # Compared as numbers: the event's price is the audit row's decimal, which may carry more
        # places than the order's money fields.
        check(
            Decimal(str(fill.price)) == Decimal("190.10") and Decimal(str(fill.qty)) == 1 and fill.symbol == "AAPL",
            f"the fill: 1 AAPL at 190.10 ({fill.qty} {fill.symbol} at {fill.price})",
        )
        check(relay.cuts == 1, "the relay cut the stream once")
        check(
            relay.last_event_ids == [None, accepted.id],
            f"the reconnection resumed after the first event (Last-Event-ID per connection: {relay.last_event_ids})",
        )
        check(updates.last_event_id == fill.id, f"last_event_id is the fill's ({updates.last_event_id})")
    finally:
        relay.stop()

    async def resume() -> TradeUpdate:
        async with atrade_updates(user, accepted.id) as again:
            return await asyncio.wait_for(anext(again), 30)

    first = asyncio.run(resume())
    check(
        first.id == fill.id and first.event == TradeEvent.FILL,
        f"a new iterator from the first event's id starts with the fill ({first.id}: {first.event})",
    )
    try:
        next(trade_updates(user, "999999999999"))
        raise AssertionError("an id never sent was accepted")
    except HistoryGone as gone:
        check(gone.problem is not None and gone.problem.code == "stream_history_gone", f"HistoryGone ({gone})")
    step(
        f"stream: {accepted.id} new, {fill.id} fill of {placed.id}; cut after the first, resumed with Last-Event-ID "
        f"{relay.last_event_ids[1]}; a new iterator from {accepted.id} began with {first.id}"
    )


def main() -> None:
    base = env("RAPTOR_URL")
    bin_ = env("RAPTOR_BIN")
    server_log = Path(env("RAPTOR_SERVER_LOG"))

    step("the served document is openapi/openapi.json (the client was generated from it)")
    served = httpx.get(f"{base}/openapi.json")
    on_disk = (Path(__file__).resolve().parent.parent.parent / "openapi" / "openapi.json").read_text()
    check(served.status_code == 200 and served.text == on_disk, "GET /openapi.json is the checked-in document")

    anonymous = Client(base_url=base, raise_on_unexpected_status=True)

    step("a token the server does not know: 401 unauthenticated")
    stranger = AuthenticatedClient(base_url=base, token="rpt_unknown", raise_on_unexpected_status=True)
    refused = expect(
        "GET /api/trading/account",
        get_account.sync_detailed(client=stranger),
        HTTPStatus.UNAUTHORIZED,
        ErrorBody,
    )
    check(refused.error == ErrorCode.UNAUTHENTICATED, f"code {refused.error}")
    check(refused.retry == Retry.NO, f"retry {refused.retry}")

    step("sign up: register, the emailed token, verify")
    email = f"py-journey-{uuid.uuid4()}@example.com"
    r_register = register.sync_detailed(client=anonymous, body=EmailRequest(email=email))
    check(r_register.status_code == HTTPStatus.ACCEPTED, f"register: {r_register.status_code}")
    link_token = emailed_token(server_log, email)
    session = expect(
        "verify",
        verify_link.sync_detailed(client=anonymous, body=VerifyRequest(token=link_token)),
        HTTPStatus.OK,
        SessionResponse,
    )
    check(session.token.startswith("rpt_"), "a session token")
    user = AuthenticatedClient(base_url=base, token=session.token, raise_on_unexpected_status=True)

    step("an operator (raptor users create --role operator) quotes AAPL 189.90 / 190.10")
    created = json.loads(
        subprocess.run(
            [bin_, "users", "create", "--email", f"py-operator-{uuid.uuid4()}@example.com", "--role", "operator"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    operator = AuthenticatedClient(base_url=base, token=created["token"], raise_on_unexpected_status=True)
    r_quote = set_quote.sync_detailed("AAPL", client=operator, body=SetQuoteRequest(bid="189.90", ask="190.10"))
    check(r_quote.status_code == HTTPStatus.OK, f"quote: {r_quote.status_code}")

    start = expect("account", get_account.sync_detailed(client=user), HTTPStatus.OK, AccountResponse)
    check(start.mode.value == "paper" and start.currency.value == "USD", "a USD paper account")

    def place(body: CreateOrderRequest, key: str) -> Response[Any]:
        # The header is typed `str`: both forms, bare and quoted, go through as they are.
        return create_order.sync_detailed(client=user, body=body, idempotency_key=key)

    market = CreateOrderRequest(symbol="AAPL", qty="1", side=Side.BUY, type_=OrderType.MARKET)

    step("a keyed market order, then its retry with the same key (a replay)")
    key = str(uuid.uuid4())
    first = place(market, key)
    order = expect("order", first, HTTPStatus.CREATED, OrderResponse)
    check(first.headers.get("idempotent-replayed") == "false", "a fresh answer")
    check(
        order.status == OrderStatus.FILLED and order.filled_avg_price == "190.10", f"filled at the ask ({order.status})"
    )
    again = place(market, key)
    replay = expect("replay", again, HTTPStatus.CREATED, OrderResponse)
    check(again.headers.get("idempotent-replayed") == "true", "Idempotent-Replayed: true")
    check(replay.idempotency_replayed is True, "idempotency_replayed in the body")
    check(replay.id == order.id and replay.status == order.status, "the same order")

    step("the quoted form of a key, then the bare form of the same UUID: one key")
    other = uuid.uuid4()
    quoted = expect("quoted key", place(market, f'"{other}"'), HTTPStatus.CREATED, OrderResponse)
    bare = place(market, str(other).upper())
    check(bare.headers.get("idempotent-replayed") == "true", "the bare upper-case form replays the quoted one")
    check(expect("bare key", bare, HTTPStatus.CREATED, OrderResponse).id == quoted.id, "the same order")

    step("a malformed key: 400 with the malformed-key code (a named enum member)")
    malformed = expect("malformed key", place(market, "not-a-uuid"), HTTPStatus.BAD_REQUEST, ErrorBody)
    check(malformed.error == ErrorCode.IDEMPOTENCY_KEY_INVALID, f"code {malformed.error}")
    check(malformed.retry == Retry.NO, f"retry {malformed.retry}")

    step("three resting limit orders (below the ask)")
    resting = [
        expect(
            f"limit {i}",
            place(
                CreateOrderRequest(
                    symbol="AAPL",
                    qty="1",
                    side=Side.BUY,
                    type_=OrderType.LIMIT,
                    limit_price=f"10{i}.00",
                    time_in_force=TimeInForce.GTC,
                ),
                str(uuid.uuid4()),
            ),
            HTTPStatus.CREATED,
            OrderResponse,
        )
        for i in range(3)
    ]
    check(all(o.status not in (OrderStatus.FILLED, OrderStatus.CANCELED) for o in resting), "they rest")

    step("the order history, two at a time, following next_cursor")
    seen: list[OrderResponse] = []
    cursor: str | None = None
    page_count = 0
    while True:
        page = expect(
            "orders page",
            list_orders.sync_detailed(
                client=user, status=OrderListStatus.ALL, limit=2, cursor=UNSET if cursor is None else cursor
            ),
            HTTPStatus.OK,
            OrderListResponse,
        )
        page_count += 1
        check(len(page.data) <= 2, "at most `limit` orders a page")
        seen.extend(page.data)
        if not page.has_more:
            check(page.next_cursor is None, "the last page has no cursor")
            break
        check(page.next_cursor is not None, "a page with more has a cursor")
        cursor = page.next_cursor
        check(page_count < 10, "the pages end")
    ids = [o.id for o in seen]
    expected = {order.id, quoted.id, *(o.id for o in resting)}
    check(
        len(ids) == len(set(ids)) and set(ids) == expected,
        f"every order once ({len(ids)} seen over {page_count} pages)",
    )
    check(page_count == 3, f"5 orders in pages of 2 ({page_count} pages)")
    check(all(a.created_at >= b.created_at for a, b in zip(seen, seen[1:], strict=False)), "newest first")

    step("the account: cash down by exactly the two fills")
    account = expect("account", get_account.sync_detailed(client=user), HTTPStatus.OK, AccountResponse)
    spent = cost(order) + cost(quoted)
    check(Decimal(start.cash) - Decimal(account.cash) == spent, f"cash {start.cash} -> {account.cash}, spent {spent}")
    check(Decimal(account.reserved_cash) > 0, "the resting orders reserve cash")

    step("through a proxy that drops the first answer of every request: three orders, each once")
    proxy = env("RAPTOR_PROXY_URL")
    flaky = AuthenticatedClient(base_url=proxy, token=session.token, raise_on_unexpected_status=True)

    def history(client: AuthenticatedClient) -> list[OrderResponse]:
        return list(
            pages(
                lambda cursor: retrying(
                    lambda _key: list_orders.sync_detailed(
                        client=client, status=OrderListStatus.ALL, limit=2, cursor=cursor
                    ),
                    OrderListResponse,
                )
            )
        )

    before = {o.id for o in history(user)}
    placed = [
        retrying(
            lambda key: create_order.sync_detailed(client=flaky, body=market, idempotency_key=key),
            OrderResponse,
        )
        for _ in range(3)
    ]
    check(
        all(o.idempotency_replayed is True for o in placed),
        "each answer that came through is the replay of an attempt whose answer was dropped",
    )
    new = [o for o in history(flaky) if o.id not in before]
    check(
        len(new) == 3 and {o.id for o in new} == {o.id for o in placed},
        f"three operations, three orders ({len(new)} new orders)",
    )
    stats = httpx.get(f"{proxy}/__proxy/stats").json()
    check(stats["dropped"] >= 3 + 4, f"the proxy dropped every first answer ({stats})")
    after = expect("account", get_account.sync_detailed(client=user), HTTPStatus.OK, AccountResponse)
    three = sum((cost(o) for o in placed), Decimal(0))
    check(
        Decimal(account.cash) - Decimal(after.cash) == three,
        f"cash {account.cash} -> {after.cash}, three fills {three}",
    )
    step(f"the proxy dropped {stats['dropped']} answers and passed {stats['forwarded']}; 0 duplicate orders")

    step("the trade-updates stream: a market order's new and fill, the stream cut after the first; then resumed")
    stream_journey(base, user, session.token, market)
    step("done")


if __name__ == "__main__":
    main()
