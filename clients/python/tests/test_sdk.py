"""The hand-written layer (`raptor_sdk`) and the generated models' tolerance, against a local HTTP
server that answers what each test scripts: a dropped connection, a `same_key` answer with
`Retry-After`, a spent key, a final refusal, pages, the answers of a newer server whose document
adds an order status, an activity type and an error code, and the trade-updates stream: messages
split across chunks, heartbeats, dropped and ended connections resumed with `Last-Event-ID`,
`Retry-After`, `410 stream_history_gone`, a silent connection.

    python -m unittest discover -s tests   # from clients/python, in the client's virtualenv
"""

from __future__ import annotations

import asyncio
import copy
import json
import select
import socket
import threading
import time
import unittest
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

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
    TradeEvent,
    TradeUpdate,
)
from raptor_sdk import (
    Backoff,
    EventStreamParser,
    GaveUp,
    HistoryGone,
    KeySpent,
    Message,
    Reconnect,
    Refused,
    TradeUpdates,
    atrade_updates,
    pages,
    retrying,
    trade_updates,
)

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


# ---- The trade-updates stream ------------------------------------------------------------------


def trade_update(n: int, event: str = "fill", **extra: Any) -> dict[str, Any]:
    """The document's example of a trade update as event `n` of type `event`. Each carries
    `position_qty`, a member this client may not have been generated with: it must come through."""
    body = example("/api/trading/stream", "get", "200")
    return {**body, "id": str(n), "event": event, "position_qty": str(n), **extra}


def sse(update: dict[str, Any], eol: str = "\n") -> str:
    """One message as the server writes it (`eol`: the other line ends a server may use)."""
    data = json.dumps(update, ensure_ascii=False)
    return f"id: {update['id']}{eol}event: {update['event']}{eol}data: {data}{eol}{eol}"


def unfinished(update: dict[str, Any]) -> str:
    """The message cut off before its blank line, as a connection that breaks mid-message leaves
    it. It must never be yielded."""
    return sse(update)[:-1]


@dataclass(frozen=True)
class Pause:
    seconds: float


#: After its steps a stream connection is held open, silent, until the client closes it; END ends
#: the answer cleanly (the last chunk), DROP closes the connection mid-answer.
END = "end"
Step = str | bytes | Pause
Reply = tuple[int, Any, dict[str, str]] | list[Step] | str


@dataclass
class StreamStub:
    """A server answering the nth request to the stream with `route(headers, n)`: a scripted
    answer, DROP (no answer), or the steps of an event stream, each written as its own chunk."""

    route: Callable[[dict[str, str], int], Reply]
    requests: list[dict[str, str]] = field(default_factory=list)
    closed: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.close_connection = True
                stub.requests.append(dict(self.headers))
                reply = stub.route(dict(self.headers), len(stub.requests) - 1)
                if reply == DROP:
                    return
                if isinstance(reply, tuple):
                    status, payload, headers = reply
                    data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
                    self.send_response(status)
                    self.send_header("content-type", "application/problem+json" if status >= 400 else "text/html")
                    self.send_header("content-length", str(len(data)))
                    self.send_header("connection", "close")
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                    return
                assert isinstance(reply, list)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                # One answer per connection, said up front: the client must not send its next
                # request on a connection this handler closes when the answer ends.
                self.send_header("connection", "close")
                self.end_headers()
                self.wfile.flush()
                try:
                    for step in reply:
                        if isinstance(step, Pause):
                            time.sleep(step.seconds)
                        elif step == DROP:
                            # Mid-answer: the last chunk never comes.
                            self.connection.shutdown(socket.SHUT_RDWR)
                            return
                        elif step == END:
                            self.wfile.write(b"0\r\n\r\n")
                            self.wfile.flush()
                            return
                        else:
                            data = step.encode() if isinstance(step, str) else step
                            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                            self.wfile.flush()
                            time.sleep(0.005)
                    self.hold()
                except OSError:
                    stub.closed += 1

            def hold(self) -> None:
                """Silent until the client closes the connection, or for at most 5 s: then the
                connection is dropped, so a client that never notices a silent connection fails
                a test's assertions instead of hanging it."""
                ends = time.monotonic() + 5.0
                while not stub.stop.is_set():
                    readable, _, _ = select.select([self.connection], [], [], 0.02)
                    if readable and not self.connection.recv(1, socket.MSG_PEEK):
                        stub.closed += 1
                        return
                    if time.monotonic() > ends:
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return

        return Handler

    @contextmanager
    def serving(self) -> Iterator[AuthenticatedClient]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        thread.start()
        try:
            yield AuthenticatedClient(base_url=f"http://127.0.0.1:{server.server_address[1]}", token="rpt_test")
        finally:
            self.stop.set()
            server.shutdown()
            server.server_close()

    def last_event_ids(self) -> list[str | None]:
        return [r.get("Last-Event-ID") for r in self.requests]


def scripted(*replies: Reply) -> Callable[[dict[str, str], int], Reply]:
    """The replies in order; the last one again for any further request."""
    return lambda _headers, n: replies[min(n, len(replies) - 1)]


def resuming(first: list[Step]) -> Callable[[dict[str, str], int], Reply]:
    """The server's resume rule over updates 1..5: after `Last-Event-ID` when the request has one,
    else from "now" (update 4: what happened while no stream was open is in the lists). The first
    connection is `first`."""

    def route(headers: dict[str, str], n: int) -> Reply:
        if n == 0:
            return first
        after = int(headers.get("Last-Event-ID", "3"))
        return [sse(trade_update(i)) for i in range(after + 1, 6)]

    return route


class StreamSleeps(Sleeps):
    """Waits recorded, not slept; a loop that would reconnect without end fails at its 50th wait
    instead of spinning."""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if len(self.asked) >= 50:
            raise AssertionError("50 reconnections: the iterator never stops")

    async def asleep(self, seconds: float) -> None:
        self.sleep(seconds)


def half_jitter() -> Backoff:
    return Backoff(base=0.1, cap=5.0, rand=lambda: 0.5)


def until(updates: TradeUpdates, last_id: str) -> list[TradeUpdate]:
    """The updates up to the one with `last_id` (then the iterator is closed). A test waits for
    the last update its stub sends, so one that goes missing fails an assertion, not a timeout."""
    seen: list[TradeUpdate] = []
    with updates:
        for update in updates:
            seen.append(update)
            if update.id == last_id:
                break
    return seen


def ids(updates: list[TradeUpdate]) -> list[str]:
    return [u.id for u in updates]


class Parser(unittest.TestCase):
    def test_the_same_messages_whichever_way_the_text_is_cut(self) -> None:
        # LF, CRLF and CR line ends, comments (heartbeats), data on two lines, a field without a
        # space after its colon, an id carried over to a message without one, `retry`, an unknown
        # field, a message without data (not dispatched) and an unfinished one at the end.
        text = (
            "\ufeff: heartbeat\n\n"
            'id: 1\r\nevent: new\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
            'id: 2\revent: fill\rdata: {"b":\rdata: 2}\r\r'
            "retry: 2500\nfoo: bar\ndata:x\n\n"
            "id: 9\nevent: nothing\n\n"
            ": another heartbeat\n"
            "id: 3\ndata: cut"
        )
        expected = [
            Message("1", "new", '{"a":\n1}'),
            Message("2", "fill", '{"b":\n2}'),
            Message("2", "message", "x"),
        ]
        whole = EventStreamParser()
        self.assertEqual(whole.feed(text), expected)
        self.assertEqual(whole.retry, 2.5)
        self.assertEqual(whole.last_event_id, "9", "an id without data moves the position; an unfinished one does not")
        for cut in range(len(text) + 1):
            parser = EventStreamParser()
            self.assertEqual(parser.feed(text[:cut]) + parser.feed(text[cut:]), expected, f"cut at {cut}")
            self.assertEqual(parser.last_event_id, "9")
        one_by_one = EventStreamParser()
        self.assertEqual([m for c in text for m in one_by_one.feed(c)], expected)


class Stream(unittest.TestCase):
    def test_messages_split_across_chunks_heartbeats_and_multibyte_text(self) -> None:
        one, two, three = trade_update(1, "new"), trade_update(2, reason="größe ✓"), trade_update(3, "added_later")
        first = sse(one, "\r\n")
        split = first.index("data: ") + 20
        second = sse(two).encode()
        check = second.index("✓".encode())
        stub = StreamStub(
            scripted(
                [
                    ": connected\n\n",
                    first[:split],
                    first[split:-3],  # ends between the "\r" and the "\n"
                    first[-3:],
                    ": heartbeat\n\n",
                    second[: check + 1],  # ends inside the three bytes of "✓"
                    second[check + 1 :],
                    sse(three)[:4],
                    sse(three)[4:],
                ]
            )
        )
        reconnects: list[Reconnect] = []
        with stub.serving() as client:
            updates = trade_updates(client, on_reconnect=reconnects.append, sleep=StreamSleeps().sleep)
            self.assertIsNone(updates.last_event_id)
            seen = until(updates, "3")
            for _ in range(100):
                if stub.closed:
                    break
                time.sleep(0.01)
            self.assertEqual(stub.closed, 1, "closing the iterator closed the connection")
        self.assertEqual(ids(seen), ["1", "2", "3"])
        self.assertIsInstance(seen[0], TradeUpdate)
        self.assertEqual(seen[0].event, TradeEvent.NEW)
        self.assertEqual(seen[0].to_dict()["position_qty"], "1", "a member this client was not generated with is kept")
        self.assertEqual(seen[1].reason, "größe ✓")
        self.assertEqual(seen[2].event, "added_later")
        self.assertFalse(seen[2].event.is_known(), "a type added later comes through, unknown")
        self.assertEqual(updates.last_event_id, "3")
        self.assertEqual(len(stub.requests), 1, "heartbeats and split messages made no reconnection")
        self.assertEqual(reconnects, [])
        request = stub.requests[0]
        self.assertNotIn("Last-Event-ID", request, "the first connection starts from now")
        self.assertEqual(request["Accept"], "text/event-stream")
        self.assertEqual(request["Authorization"], "Bearer rpt_test")

    def test_a_dropped_connection_resumes_with_last_event_id_every_update_once(self) -> None:
        stub = StreamStub(resuming([sse(trade_update(1)), sse(trade_update(2)), unfinished(trade_update(3)), DROP]))
        sleeps = StreamSleeps()
        reconnects: list[Reconnect] = []
        with stub.serving() as client:
            updates = trade_updates(client, backoff=half_jitter(), on_reconnect=reconnects.append, sleep=sleeps.sleep)
            seen = until(updates, "5")
        self.assertEqual(ids(seen), ["1", "2", "3", "4", "5"], "every update, once, in order")
        self.assertEqual(stub.last_event_ids(), [None, "2"], "the reconnection resumes after the last whole message")
        self.assertEqual(updates.last_event_id, "5")
        self.assertEqual([r.failures for r in reconnects], [0])
        self.assertIsInstance(reconnects[0].cause, httpx.TransportError)
        self.assertEqual(sleeps.asked, [0.05], "a random wait under 0.1 s")

    def test_a_stream_the_server_ends_is_resumed_with_last_event_id(self) -> None:
        stub = StreamStub(resuming([sse(trade_update(1)), sse(trade_update(2)), unfinished(trade_update(3)), END]))
        reconnects: list[Reconnect] = []
        with stub.serving() as client:
            seen = until(trade_updates(client, on_reconnect=reconnects.append, sleep=StreamSleeps().sleep), "5")
        self.assertEqual(ids(seen), ["1", "2", "3", "4", "5"], "every update, once, in order")
        self.assertEqual(stub.last_event_ids(), [None, "2"])
        self.assertEqual([(r.problem, r.cause) for r in reconnects], [(None, None)], "no error: the stream ended")

        # A connection that marks its position with an `id:` alone, before any update, and ends.
        marked = StreamStub(resuming(["id: 2\n\n", END]))
        with marked.serving() as client:
            from_mark = until(trade_updates(client, sleep=StreamSleeps().sleep), "5")
        self.assertEqual(ids(from_mark), ["3", "4", "5"], "resumed after the marked position, not from now")
        self.assertEqual(marked.last_event_ids(), [None, "2"])

    def test_503_and_429_are_waited_out_with_the_stored_id(self) -> None:
        stub = StreamStub(
            scripted(
                (503, problem("too_many_connections", "same_key"), {"retry-after": "1"}),
                (429, problem("rate_limited", "same_key", 429), {"retry-after": "2"}),
                (502, "<html>bad gateway</html>", {}),
                [sse(trade_update(8)), DROP],
                [sse(trade_update(9))],
            )
        )
        sleeps = StreamSleeps()
        reconnects: list[Reconnect] = []
        with stub.serving() as client:
            updates = trade_updates(
                client,
                "7",
                backoff=half_jitter(),
                max_attempts=4,
                on_reconnect=reconnects.append,
                sleep=sleeps.sleep,
            )
            self.assertEqual(updates.last_event_id, "7")
            seen = until(updates, "9")
        self.assertEqual(ids(seen), ["8", "9"])
        self.assertEqual(stub.last_event_ids(), ["7", "7", "7", "7", "8"], "each attempt resumes after the last id")
        # Retry-After plus 0.5 x 0.1 s; then the backoff, 0.5 x 0.1 s x 2**2; a connection that
        # delivered starts the backoff (and max_attempts' count) over: 0.5 x 0.1 s.
        self.assertEqual(sleeps.asked, [1.05, 2.05, 0.2, 0.05])
        self.assertEqual(
            [(r.failures, r.problem.code if r.problem else None) for r in reconnects],
            [(1, "too_many_connections"), (2, "rate_limited"), (3, None), (0, None)],
        )

    def test_410_raises_history_gone_and_401_refused_neither_retried_500_new_key_is(self) -> None:
        gone = StreamStub(scripted((410, problem("stream_history_gone", "no", 410), {})))
        sleeps = StreamSleeps()
        with gone.serving() as client, self.assertRaises(HistoryGone) as raised:
            next(trade_updates(client, "42", sleep=sleeps.sleep))
        self.assertIsInstance(raised.exception, Refused, "a refusal: retrying does not help")
        self.assertEqual(raised.exception.last_event_id, "42")
        assert raised.exception.problem is not None
        self.assertEqual(raised.exception.problem.status, 410)
        self.assertEqual(len(gone.requests), 1, "not retried")
        self.assertEqual(sleeps.asked, [])

        unauthenticated = StreamStub(scripted((401, problem("unauthenticated", "no", 401), {})))
        with unauthenticated.serving() as client, self.assertRaises(Refused) as refused:
            next(trade_updates(client, sleep=sleeps.sleep))
        self.assertNotIsInstance(refused.exception, HistoryGone)
        assert refused.exception.problem is not None
        self.assertEqual(refused.exception.problem.code, "unauthenticated")
        self.assertEqual(len(unauthenticated.requests), 1, "not retried")
        self.assertEqual(sleeps.asked, [])

        # `retry: new_key` (an internal error) is tried again: a read has no key to spend.
        internal = StreamStub(scripted((500, problem("internal", "new_key", 500), {}), [sse(trade_update(1))]))
        with internal.serving() as client:
            self.assertEqual(ids(until(trade_updates(client, sleep=sleeps.sleep), "1")), ["1"])
        self.assertEqual(len(internal.requests), 2)

    def test_a_silent_connection_is_replaced_and_heartbeats_keep_one_alive(self) -> None:
        heartbeats: list[Step] = [s for _ in range(6) for s in (Pause(0.1), ": heartbeat\n\n")]

        def route(headers: dict[str, str], n: int) -> Reply:
            if n == 0:
                return [sse(trade_update(1)), *heartbeats, sse(trade_update(2))]
            return [sse(trade_update(int(headers["Last-Event-ID"]) + 1))]

        stub = StreamStub(route)
        reconnects: list[Reconnect] = []
        with stub.serving() as client:
            seen = until(
                trade_updates(client, idle_timeout=0.3, on_reconnect=reconnects.append, sleep=StreamSleeps().sleep),
                "3",
            )
        self.assertEqual(ids(seen), ["1", "2", "3"])
        self.assertEqual(
            stub.last_event_ids(),
            [None, "2"],
            "0.6 s of heartbeats 0.1 s apart kept the first connection; 0.3 s of nothing ended it",
        )
        self.assertIsInstance(reconnects[0].cause, httpx.ReadTimeout)

    def test_max_attempts_and_deadline_give_up(self) -> None:
        stub = StreamStub(scripted(DROP))
        sleeps = StreamSleeps()
        with stub.serving() as client, self.assertRaises(GaveUp) as raised:
            next(trade_updates(client, max_attempts=3, backoff=no_jitter(), sleep=sleeps.sleep))
        self.assertEqual(raised.exception.attempts, 3)
        self.assertEqual(len(stub.requests), 3)
        self.assertIsInstance(raised.exception.cause, httpx.TransportError)
        self.assertEqual(sleeps.asked, [0.1, 0.2], "doubling backoff between attempts")

        timed = StreamSleeps()
        with stub.serving() as client, self.assertRaises(GaveUp):
            next(trade_updates(client, deadline=1.0, backoff=no_jitter(), sleep=timed.sleep, clock=timed.clock))
        self.assertLessEqual(sum(timed.asked), 1.0, "never sleeps past the deadline")


class AsyncStream(unittest.IsolatedAsyncioTestCase):
    async def until(self, client: AuthenticatedClient, last_id: str, **options: Any) -> list[TradeUpdate]:
        seen: list[TradeUpdate] = []
        async with atrade_updates(client, **options) as updates:
            async for update in updates:
                seen.append(update)
                if update.id == last_id:
                    break
        return seen

    async def test_leaving_async_with_closes_the_connection(self) -> None:
        stub = StreamStub(scripted([sse(trade_update(1))]))
        with stub.serving() as client:
            async with atrade_updates(client, sleep=StreamSleeps().asleep) as updates:
                self.assertEqual((await anext(updates)).id, "1")
                self.assertEqual(updates.last_event_id, "1")
            # `updates` is still referenced here: only the exit of `async with` can have closed it.
            for _ in range(100):
                if stub.closed:
                    break
                await asyncio.sleep(0.01)
            self.assertEqual(stub.closed, 1, "leaving `async with` closed the connection")

    async def test_a_dropped_connection_resumes_with_last_event_id(self) -> None:
        stub = StreamStub(resuming([sse(trade_update(1)), sse(trade_update(2)), unfinished(trade_update(3)), DROP]))
        sleeps = StreamSleeps()
        with stub.serving() as client:
            seen = await self.until(client, "5", backoff=half_jitter(), sleep=sleeps.asleep)
        self.assertEqual(ids(seen), ["1", "2", "3", "4", "5"], "every update, once, in order")
        self.assertEqual(stub.last_event_ids(), [None, "2"])
        self.assertEqual(sleeps.asked, [0.05])

    async def test_a_stream_the_server_ends_is_resumed_with_last_event_id(self) -> None:
        first = sse(trade_update(1, reason="✓")).encode()
        check = first.index("✓".encode())
        # The first message arrives in two chunks cut inside the three bytes of "✓".
        stub = StreamStub(
            resuming([first[: check + 2], first[check + 2 :], sse(trade_update(2)), unfinished(trade_update(3)), END])
        )
        reconnects: list[Reconnect] = []
        with stub.serving() as client:
            seen = await self.until(client, "5", on_reconnect=reconnects.append, sleep=StreamSleeps().asleep)
        self.assertEqual(ids(seen), ["1", "2", "3", "4", "5"], "every update, once, in order")
        self.assertEqual(seen[0].reason, "✓")
        self.assertEqual(stub.last_event_ids(), [None, "2"])
        self.assertEqual([(r.problem, r.cause) for r in reconnects], [(None, None)], "no error: the stream ended")

    async def test_503_with_retry_after_then_the_stream_and_410(self) -> None:
        stub = StreamStub(
            scripted(
                (503, problem("too_many_connections", "same_key"), {"retry-after": "1"}),
                [sse(trade_update(8))],
            )
        )
        sleeps = StreamSleeps()
        with stub.serving() as client:
            seen = await self.until(client, "8", last_event_id="7", backoff=half_jitter(), sleep=sleeps.asleep)
        self.assertEqual(ids(seen), ["8"])
        self.assertEqual(stub.last_event_ids(), ["7", "7"])
        self.assertEqual(sleeps.asked, [1.05])

        gone = StreamStub(scripted((410, problem("stream_history_gone", "no", 410), {})))
        with gone.serving() as client, self.assertRaises(HistoryGone):
            await self.until(client, "8", last_event_id="7", sleep=sleeps.asleep)
        self.assertEqual(len(gone.requests), 1, "not retried")


if __name__ == "__main__":
    unittest.main()
