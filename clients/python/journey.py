"""A short app journey through the generated Python client against a real Raptor server.

Sign-up over HTTP (register, the emailed token, verify), a quote set by an operator, a keyed
market order and its replay (bare and quoted keys name the same key), a malformed key refused,
resting orders, the order history paged two at a time, the account's cash worked out to the
cent; then three orders placed with `raptor_sdk.retrying` through a proxy that drops the first
answer of every request (scripts/dropping-proxy.py): each operation makes exactly one order.
`scripts/python-client.sh e2e` (part of `make client-e2e`) runs it:

    RAPTOR_URL=http://127.0.0.1:PORT RAPTOR_PROXY_URL=http://127.0.0.1:PORT2 \
    RAPTOR_BIN=target/debug/raptor \
    RAPTOR_SERVER_LOG=target/checks/client-e2e-python-server.log python journey.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from decimal import Decimal
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar

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
    VerifyRequest,
)
from raptor_client.types import UNSET, Response
from raptor_sdk import pages, retrying

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
    step("done")


if __name__ == "__main__":
    main()
