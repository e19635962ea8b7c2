"""The hand-written layer (`raptor_sdk`) and the generated models' tolerance, against a local HTTP
server that answers what each test scripts: a dropped connection, a `same_key` answer with
`Retry-After`, a spent key, a final refusal, pages, and the answers of a newer server whose
document adds an order status, an activity type and an error code.

    python -m unittest discover -s tests   # from clients/python, in the client's virtualenv
"""

from __future__ import annotations

import copy
import json
import threading
import unittest
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from raptor_client import AuthenticatedClient
from raptor_client.api.trading import create_order, get_order, list_activities, list_orders
from raptor_client.models import (
    ActivityListResponse,
    ActivityType,
    CreateOrderRequest,
    ErrorBody,
    ErrorCode,
    OrderListResponse,
    OrderResponse,
    OrderStatus,
    OrderType,
    Side,
)
from raptor_sdk import Backoff, GaveUp, KeySpent, Refused, pages, retrying

DOCUMENT = json.loads((Path(__file__).resolve().parents[3] / "openapi" / "openapi.json").read_text())
MARKET = CreateOrderRequest(symbol="AAPL", qty="1", side=Side.BUY, type_=OrderType.MARKET)

#: What the stub answers: a status with a JSON body and headers, or DROP (no answer at all).
DROP = "drop"
Answer = tuple[int, Any, dict[str, str]] | str


def example(path: str, method: str, status: str, document: dict[str, Any] = DOCUMENT) -> Any:
    """The document's example of an operation's answer."""
    content = document["paths"][path][method]["responses"][status]["content"]
    return copy.deepcopy(next(iter(content.values()))["example"])


def problem(code: str, retry: str, status: int = 503) -> Any:
    return {
        "error": code,
        "message": code,
        "retry": retry,
        "type": f"/docs/errors#{code}",
        "title": "Error",
        "status": status,
        "detail": code,
    }


class Stub:
    """A server that answers scripted answers in order and records each request."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[dict[str, Any]] = []

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                stub.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                scripted = stub.answers.pop(0)
                if isinstance(scripted, str):
                    # The request arrived; its answer never leaves.
                    self.close_connection = True
                    return
                status, payload, headers = scripted
                data = json.dumps(payload).encode()
                self.send_response(status)
                media = "application/problem+json" if status >= 400 else "application/json"
                self.send_header("content-type", media)
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = answer

        return Handler

    @contextmanager
    def serving(self) -> Iterator[AuthenticatedClient]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield AuthenticatedClient(base_url=f"http://127.0.0.1:{server.server_address[1]}", token="rpt_test")
        finally:
            server.shutdown()
            server.server_close()

    def keys(self) -> list[str | None]:
        return [r["headers"].get("Idempotency-Key") for r in self.requests]


class Sleeps:
    """A sleep that records what it was asked and a clock it advances."""

    def __init__(self) -> None:
        self.asked: list[float] = []
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.asked.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def no_jitter() -> Backoff:
    return Backoff(base=0.1, cap=5.0, rand=lambda: 1.0)


def order(status: str = "filled") -> Any:
    body = example("/api/trading/orders", "post", "201")
    body["status"] = status
    return body


class Retrying(unittest.TestCase):
    def place(self, stub: Stub, sleeps: Sleeps, deadline: float = 30.0) -> OrderResponse:
        with stub.serving() as client:
            return retrying(
                lambda key: create_order.sync_detailed(client=client, body=MARKET, idempotency_key=key),
                OrderResponse,
                deadline=deadline,
                backoff=no_jitter(),
                sleep=sleeps.sleep,
                clock=sleeps.clock,
            )

    def test_the_same_key_goes_again_after_a_lost_answer_and_a_same_key_answer(self) -> None:
        stub = Stub([DROP, (503, problem("database_busy", "same_key"), {"retry-after": "2"}), (201, order(), {})])
        sleeps = Sleeps()
        placed = self.place(stub, sleeps)
        self.assertEqual(placed.status, OrderStatus.FILLED)
        keys = stub.keys()
        self.assertEqual(len(keys), 3)
        self.assertIsNotNone(keys[0])
        self.assertEqual(set(keys), {keys[0]}, "one key for the whole operation")
        uuid.UUID(str(keys[0]))
        # A lost answer: backoff (0.1 * 2**0 with the jitter at its top); then Retry-After's 2 s
        # plus at most `base` of jitter.
        self.assertEqual(sleeps.asked, [0.1, 2.1])

    def test_each_operation_has_its_own_key(self) -> None:
        stub = Stub([(201, order(), {}), (201, order(), {})])
        sleeps = Sleeps()
        self.place(stub, sleeps)
        self.place(stub, sleeps)
        self.assertEqual(len(set(stub.keys())), 2)

    def test_a_spent_key_is_a_typed_error_and_not_retried(self) -> None:
        stub = Stub([(409, problem("idempotency_previous_failed", "new_key", 409), {})])
        with self.assertRaises(KeySpent) as raised:
            self.place(stub, Sleeps())
        assert raised.exception.problem is not None
        self.assertEqual(raised.exception.problem.code, "idempotency_previous_failed")
        self.assertEqual(raised.exception.key, stub.keys()[0])
        self.assertEqual(len(stub.requests), 1)

    def test_a_final_answer_and_an_unknown_retry_value_are_refusals(self) -> None:
        for retry in ("no", "ask_again_tomorrow"):
            stub = Stub([(403, problem("insufficient_buying_power", retry, 403), {})])
            with self.assertRaises(Refused) as raised:
                self.place(stub, Sleeps())
            assert raised.exception.problem is not None
            self.assertEqual(raised.exception.problem.status, 403)
            self.assertEqual(len(stub.requests), 1, retry)

    def test_the_deadline_ends_the_retries_with_the_key_to_try_later(self) -> None:
        busy = (503, problem("idempotency_in_flight", "same_key"), {"retry-after": "1"})
        stub = Stub([busy] * 10)
        sleeps = Sleeps()
        with self.assertRaises(GaveUp) as raised:
            self.place(stub, sleeps, deadline=3.0)
        self.assertEqual(raised.exception.key, stub.keys()[0])
        self.assertLessEqual(sum(sleeps.asked), 3.0, "never sleeps past the deadline")
        self.assertEqual(len(stub.requests), 3)

    def test_a_gateway_page_is_retried_with_the_same_key(self) -> None:
        stub = Stub([(502, "bad gateway", {}), (201, order(), {})])
        self.place(stub, Sleeps())
        self.assertEqual(len(set(stub.keys())), 1)
        self.assertEqual(len(stub.requests), 2)


class Pages(unittest.TestCase):
    def test_every_item_once_across_pages(self) -> None:
        first, second, third = (example("/api/trading/orders", "get", "200") for _ in range(3))
        template = first["data"][0]
        for page, ids, cursor in ((first, "ab", "c1"), (second, "cd", "c2"), (third, "e", None)):
            page["data"] = [{**template, "id": str(uuid.uuid5(uuid.NAMESPACE_OID, i))} for i in ids]
            page["has_more"] = cursor is not None
            page["next_cursor"] = cursor
        stub = Stub([(200, first, {}), (200, second, {}), (200, third, {})])
        with stub.serving() as client:
            seen = [
                str(o.id)
                for o in pages(
                    lambda cursor: retrying(
                        lambda _key: list_orders.sync_detailed(client=client, limit=2, cursor=cursor),
                        OrderListResponse,
                    )
                )
            ]
        self.assertEqual(seen, [str(uuid.uuid5(uuid.NAMESPACE_OID, i)) for i in "abcde"])
        self.assertEqual(
            [r["path"] for r in stub.requests][1:],
            ["/api/trading/orders?limit=2&cursor=c1", "/api/trading/orders?limit=2&cursor=c2"],
        )


class NewerServer(unittest.TestCase):
    """The client generated from today's document against a server whose document adds an order
    status, an activity type and an error code (additive changes, docs/api.md)."""

    def setUp(self) -> None:
        self.newer = copy.deepcopy(DOCUMENT)
        schemas = self.newer["components"]["schemas"]
        for schema, value in (
            ("OrderStatus", "held"),
            ("ActivityType", "dividend"),
            ("ErrorCode", "market_closed_for_lunch"),
        ):
            self.assertNotIn(value, DOCUMENT["components"]["schemas"][schema]["enum"])
            schemas[schema]["enum"].append(value)

    def test_a_new_order_status_and_activity_type_are_kept_not_refused(self) -> None:
        held = example("/api/trading/orders/{id}", "get", "200", self.newer)
        held["status"] = "held"
        self.assertIn(held["status"], self.newer["components"]["schemas"]["OrderStatus"]["enum"])
        feed = example("/api/trading/activities", "get", "200", self.newer)
        feed["data"][0]["type"] = "dividend"
        self.assertIn("dividend", self.newer["components"]["schemas"]["ActivityType"]["enum"])
        stub = Stub([(200, held, {}), (200, feed, {})])
        with stub.serving() as client:
            got = retrying(lambda _key: get_order.sync_detailed(held["id"], client=client), OrderResponse)
            activities = list(
                pages(
                    lambda cursor: retrying(
                        lambda _key: list_activities.sync_detailed(client=client, cursor=cursor), ActivityListResponse
                    )
                )
            )
        self.assertEqual(got.status, "held")
        self.assertFalse(got.status.is_known())
        self.assertTrue(OrderStatus.FILLED.is_known())
        self.assertEqual(got.to_dict()["status"], "held", "written back as it came")
        self.assertEqual([a.type_ for a in activities], ["dividend"])
        self.assertIsInstance(activities[0].type_, ActivityType)

    def test_a_new_error_code_is_handled_by_its_retry(self) -> None:
        code = "market_closed_for_lunch"
        self.assertIn(code, self.newer["components"]["schemas"]["ErrorCode"]["enum"])
        stub = Stub([(503, problem(code, "same_key"), {}), (201, order(), {})])
        self.assertEqual(Retrying().place(stub, Sleeps()).status, OrderStatus.FILLED)
        self.assertEqual(len(set(stub.keys())), 1)

        stub = Stub([(403, problem(code, "no", 403), {})])
        with stub.serving() as client:
            answer = create_order.sync_detailed(client=client, body=MARKET, idempotency_key=str(uuid.uuid4()))
        self.assertIsInstance(answer.parsed, ErrorBody)
        assert isinstance(answer.parsed, ErrorBody)
        self.assertEqual(answer.parsed.error, code)
        self.assertIsInstance(answer.parsed.error, ErrorCode)
        stub = Stub([(403, problem(code, "no", 403), {})])
        with self.assertRaises(Refused) as raised:
            Retrying().place(stub, Sleeps())
        assert raised.exception.problem is not None
        self.assertEqual(raised.exception.problem.code, code)


if __name__ == "__main__":
    unittest.main()
