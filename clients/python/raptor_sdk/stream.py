"""The trade-updates stream (`GET /api/trading/stream`, server-sent events) as iterators of typed
`TradeUpdate`s that survive dropped connections.

Every connection after the first sends `Last-Event-ID` with the id of the last update yielded, and
the server resumes right after it: no update is missed or yielded twice, whether the connection
broke, went silent, or the server ended it while shutting down. `last_event_id` is that id: an app
stores it with what it did with the update, and passes it back after a restart.

The generated `raptor_client.api.trading.stream_trade_updates` cannot read the stream (its answer
never ends); these iterators are what an app uses.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx

from raptor_client import AuthenticatedClient
from raptor_client.models import TradeUpdate

from .retrying import GATEWAY_STATUSES, Backoff, GaveUp, Problem, RaptorError, Refused

PATH = "/api/trading/stream"

#: Three of the server's 15 s heartbeats: a connection that receives nothing for this long is dead
#: (a proxy or a network that dropped it without a word) and is replaced.
IDLE_TIMEOUT = 45.0

_LINE_END = re.compile(r"\r\n|\r|\n")


class HistoryGone(Refused):
    """`410 stream_history_gone`: the server no longer keeps the event `last_event_id` names, so
    the stream cannot resume after it without a gap. Retrying does not help: read the orders and
    the activities again (what was missed is there), then open a stream without an id."""

    def __init__(self, message: str, problem: Problem, last_event_id: str | None) -> None:
        super().__init__(message, problem)
        self.last_event_id = last_event_id


@dataclass(frozen=True)
class Message:
    """One dispatched message of an event stream."""

    #: The stream's last event id when it was dispatched (its own `id:` or an earlier one).
    id: str | None
    #: Its `event:` field, `message` when it had none.
    event: str
    #: Its `data:` lines joined with a newline.
    data: str


class EventStreamParser:
    """The server-sent events format (the WHATWG HTML standard's event stream parsing), fed text as
    it arrives: lines end with `\\n`, `\\r\\n` or `\\r`, and a chunk may end anywhere, even between the
    two characters of one `\\r\\n`. A message is dispatched at the blank line that ends it, so one
    cut off by a dropped connection is never dispatched: it comes again after the resume. Comment
    lines (the server's heartbeats) and unknown fields are skipped."""

    def __init__(self) -> None:
        #: The reconnection time a `retry:` field asked for, in seconds.
        self.retry: float | None = None
        #: The stream's last event id as of the last blank line: moved by every whole message that
        #: had an `id:`, with data or without (an `id:` alone moves the position without an event).
        self.last_event_id: str | None = None
        self._line = ""
        self._after_carriage_return = False
        self._started = False
        self._id: str | None = None
        self._event = ""
        self._data: list[str] = []

    def feed(self, text: str) -> list[Message]:
        """The messages `text` completes."""
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        # A "\r" that ended the previous text ended a line; a "\n" right after it belongs to the
        # same line end, not to an empty line (which would dispatch a message early).
        if self._after_carriage_return and text.startswith("\n"):
            text = text[1:]
        self._after_carriage_return = False
        messages: list[Message] = []
        pending = self._line + text
        start = 0
        for match in _LINE_END.finditer(pending):
            self._field(pending[start : match.start()], messages)
            start = match.end()
            if match.group() == "\r" and start == len(pending):
                self._after_carriage_return = True
        self._line = pending[start:]
        return messages

    def _field(self, line: str, messages: list[Message]) -> None:
        if not line:
            self.last_event_id = self._id
            if self._data:
                messages.append(Message(self._id, self._event or "message", "\n".join(self._data)))
            self._data = []
            self._event = ""
            return
        if line.startswith(":"):
            return
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value) / 1000


@dataclass(frozen=True)
class Reconnect:
    """What `on_reconnect` is told before each reconnection's wait."""

    #: Connection attempts in a row that received nothing (0 after a stream that delivered and
    #: then ended).
    failures: int
    #: How long the iterator waits before connecting again, in seconds.
    delay: float
    #: The id the reconnection resumes after (`Last-Event-ID`).
    last_event_id: str | None
    #: The error answer, when the attempt had one.
    problem: Problem | None
    #: The transport error (a read timeout when the connection went silent), when there was one.
    cause: BaseException | None


def _update(message: Message) -> TradeUpdate:
    """A message's data as a TradeUpdate. One that is not is an error: the same message would come
    again after a reconnection, so retrying cannot help."""
    try:
        data = json.loads(message.data)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}")
        return TradeUpdate.from_dict(data)
    except (ValueError, TypeError, KeyError) as error:
        what = f"trade updates: a {message.event} message whose data is not a TradeUpdate"
        raise RaptorError(f"{what}: {error!r}") from error


class _Connections:
    """What sync and async iterators share: the request, what an answer means, the waits between
    connections and when to give up."""

    def __init__(
        self,
        last_event_id: str | None,
        idle_timeout: float,
        backoff: Backoff | None,
        max_attempts: int | None,
        deadline: float | None,
        on_connect: Callable[[str | None], None] | None,
        on_reconnect: Callable[[Reconnect], None] | None,
        clock: Callable[[], float],
    ) -> None:
        self.last_event_id = last_event_id
        self.timeout = httpx.Timeout(idle_timeout)
        self.backoff = backoff or Backoff()
        self.max_attempts = max_attempts
        self.deadline = deadline
        self.on_connect = on_connect
        self.on_reconnect = on_reconnect
        self.clock = clock
        # Attempts in a row that received nothing, and since when nothing has been received: what
        # the backoff, `max_attempts` and `deadline` go by.
        self.failures = 0
        self.lost_at = clock()
        self.problem: Problem | None = None
        self.cause: BaseException | None = None
        self.attempts = 0

    def headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if self.last_event_id is not None:
            headers["Last-Event-ID"] = self.last_event_id
        return headers

    def wait(self) -> float | None:
        """Before an attempt: None for the first, else the wait before it (told to
        `on_reconnect`); raises `GaveUp` when `max_attempts` or `deadline` is reached."""
        self.attempts += 1
        if self.attempts == 1:
            return None
        last = f"{self.problem.code}" if self.problem else repr(self.cause) if self.cause else "the stream ended"
        if self.max_attempts is not None and self.failures >= self.max_attempts:
            raise GaveUp(
                f"trade updates: {self.failures} connection attempts in a row received nothing (last: {last})",
                self.problem,
                None,
                self.cause,
                self.failures,
            )
        delay = self.backoff.delay(max(0, self.failures - 1), self.problem.retry_after if self.problem else None)
        if self.deadline is not None and self.clock() + delay - self.lost_at > self.deadline:
            raise GaveUp(
                f"trade updates: no connection delivered for {self.deadline} s (last: {last})",
                self.problem,
                None,
                self.cause,
                self.failures,
            )
        if self.on_reconnect is not None:
            self.on_reconnect(Reconnect(self.failures, delay, self.last_event_id, self.problem, self.cause))
        return delay

    def answered(self, response: httpx.Response, resume_after: str | None) -> bool:
        """True when `response` is the stream; False when it says to try again (kept for the
        wait); raises when it is final."""
        status = response.status_code
        if 200 <= status < 300:
            media = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "text/event-stream":
                raise Refused(f"trade updates: a {status} answer that is not an event stream ({media or 'no type'})")
            self.problem = None
            self.cause = None
            if self.on_connect is not None:
                self.on_connect(resume_after)
            return True
        problem = Problem.read(status, response.content, response.headers)
        if problem is None:
            if status in GATEWAY_STATUSES:
                self.problem = None
                self.cause = None
                return False
            raise Refused(f"trade updates: {status} without a problem body")
        if problem.code == "stream_history_gone":
            raise HistoryGone(
                f"{problem.code}: {problem.message}: read the orders and activities again, "
                "then open the stream without last_event_id",
                problem,
                resume_after,
            )
        # A read has no key to spend, so `new_key` (an internal error) is retried like `same_key`;
        # `no` and values this client does not know are final.
        if problem.retry not in ("same_key", "new_key"):
            raise Refused(f"{problem.code}: {problem.message}", problem)
        self.problem = problem
        self.cause = None
        return False

    def failed(self, error: httpx.TransportError) -> None:
        self.problem = None
        self.cause = error

    def ended(self, received: bool) -> None:
        if received:
            self.failures = 0
            self.lost_at = self.clock()
        else:
            self.failures += 1


class TradeUpdates:
    """The signed-in user's trade updates as they happen: an iterator of `TradeUpdate`s across
    dropped connections (see `trade_updates`). `last_event_id` is the id of the last update
    yielded. Close it (`close()`, or `with`) to close the connection when the app stops early."""

    def __init__(
        self,
        client: AuthenticatedClient,
        last_event_id: str | None = None,
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        backoff: Backoff | None = None,
        max_attempts: int | None = None,
        deadline: float | None = None,
        on_connect: Callable[[str | None], None] | None = None,
        on_reconnect: Callable[[Reconnect], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._state = _Connections(
            last_event_id, idle_timeout, backoff, max_attempts, deadline, on_connect, on_reconnect, clock
        )
        self._sleep = sleep
        self._generator = self._run()

    @property
    def last_event_id(self) -> str | None:
        """The id of the last update yielded (or the one given, before the first)."""
        return self._state.last_event_id

    def __iter__(self) -> TradeUpdates:
        return self

    def __next__(self) -> TradeUpdate:
        return next(self._generator)

    def close(self) -> None:
        """Closes the connection; the iteration ends."""
        self._generator.close()

    def __enter__(self) -> TradeUpdates:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _run(self) -> Generator[TradeUpdate, None, None]:
        state = self._state
        http = self._client.get_httpx_client()
        while True:
            delay = state.wait()
            if delay is not None:
                self._sleep(delay)
            received = False
            resume_after = state.last_event_id
            try:
                with http.stream("GET", PATH, headers=state.headers(), timeout=state.timeout) as response:
                    if not 200 <= response.status_code < 300:
                        response.read()
                    if state.answered(response, resume_after):
                        parser = EventStreamParser()
                        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                        for chunk in response.iter_bytes():
                            received = True
                            for message in parser.feed(decoder.decode(chunk)):
                                update = _update(message)
                                state.last_event_id = message.id or update.id
                                yield update
                            # A whole message without data (an `id:` alone) moves the position
                            # too, as it does an EventSource's: a server may mark where a stream
                            # starts that way.
                            state.last_event_id = parser.last_event_id or state.last_event_id
                        # The server ended the stream (its drain at shutdown): connect again.
            except httpx.TransportError as error:
                state.failed(error)
            state.ended(received)


class AsyncTradeUpdates:
    """`TradeUpdates` for asyncio: an async iterator (see `atrade_updates`). Close it (`aclose()`,
    or `async with`) to close the connection when the app stops early."""

    def __init__(
        self,
        client: AuthenticatedClient,
        last_event_id: str | None = None,
        *,
        idle_timeout: float = IDLE_TIMEOUT,
        backoff: Backoff | None = None,
        max_attempts: int | None = None,
        deadline: float | None = None,
        on_connect: Callable[[str | None], None] | None = None,
        on_reconnect: Callable[[Reconnect], None] | None = None,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._state = _Connections(
            last_event_id, idle_timeout, backoff, max_attempts, deadline, on_connect, on_reconnect, clock
        )
        self._sleep = sleep
        self._generator = self._run()

    @property
    def last_event_id(self) -> str | None:
        """The id of the last update yielded (or the one given, before the first)."""
        return self._state.last_event_id

    def __aiter__(self) -> AsyncTradeUpdates:
        return self

    async def __anext__(self) -> TradeUpdate:
        return await anext(self._generator)

    async def aclose(self) -> None:
        """Closes the connection; the iteration ends."""
        await self._generator.aclose()

    async def __aenter__(self) -> AsyncTradeUpdates:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self) -> AsyncGenerator[TradeUpdate, None]:
        state = self._state
        http = self._client.get_async_httpx_client()
        while True:
            delay = state.wait()
            if delay is not None:
                await self._sleep(delay)
            received = False
            resume_after = state.last_event_id
            try:
                async with http.stream("GET", PATH, headers=state.headers(), timeout=state.timeout) as response:
                    if not 200 <= response.status_code < 300:
                        await response.aread()
                    if state.answered(response, resume_after):
                        parser = EventStreamParser()
                        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                        async for chunk in response.aiter_bytes():
                            received = True
                            for message in parser.feed(decoder.decode(chunk)):
                                update = _update(message)
                                state.last_event_id = message.id or update.id
                                yield update
                            # A whole message without data (an `id:` alone) moves the position
                            # too, as it does an EventSource's: a server may mark where a stream
                            # starts that way.
                            state.last_event_id = parser.last_event_id or state.last_event_id
                        # The server ended the stream (its drain at shutdown): connect again.
            except httpx.TransportError as error:
                state.failed(error)
            state.ended(received)


def trade_updates(
    client: AuthenticatedClient,
    last_event_id: str | None = None,
    *,
    idle_timeout: float = IDLE_TIMEOUT,
    backoff: Backoff | None = None,
    max_attempts: int | None = None,
    deadline: float | None = None,
    on_connect: Callable[[str | None], None] | None = None,
    on_reconnect: Callable[[Reconnect], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> TradeUpdates:
    """The signed-in user's trade updates (`GET /api/trading/stream`) as they happen, resuming
    after `last_event_id` (an id the app stored; without it the stream starts with what happens
    next). Over the client's httpx client, so its token, base URL and transport are the client's.

    - a dropped connection, one that receives nothing for `idle_timeout` seconds, a stream the
      server ends: connects again after a short random wait, with `Last-Event-ID`;
    - `same_key` answers (`429 rate_limited`, `503 too_many_connections`, ...) and a gateway's
      502, 503 or 504: again after `Retry-After`, else the backoff (`Backoff`: a random wait
      doubling from 0.1 s to at most 5 s, as `retrying`);
    - `410 stream_history_gone`: raises `HistoryGone` (no retry);
    - another error answer (`401 unauthenticated`, ...): raises `Refused`;
    - `max_attempts` attempts in a row that received nothing, or `deadline` seconds without a
      connection that delivered: raises `GaveUp` (default: never).

    `on_connect(last_event_id)` is called when a connection is open: events that happen from then
    on will come. `on_reconnect(Reconnect)` before each reconnection's wait.
    """
    return TradeUpdates(
        client,
        last_event_id,
        idle_timeout=idle_timeout,
        backoff=backoff,
        max_attempts=max_attempts,
        deadline=deadline,
        on_connect=on_connect,
        on_reconnect=on_reconnect,
        sleep=sleep,
        clock=clock,
    )


def atrade_updates(
    client: AuthenticatedClient,
    last_event_id: str | None = None,
    *,
    idle_timeout: float = IDLE_TIMEOUT,
    backoff: Backoff | None = None,
    max_attempts: int | None = None,
    deadline: float | None = None,
    on_connect: Callable[[str | None], None] | None = None,
    on_reconnect: Callable[[Reconnect], None] | None = None,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncTradeUpdates:
    """`trade_updates` for asyncio, over the client's async httpx client."""
    return AsyncTradeUpdates(
        client,
        last_event_id,
        idle_timeout=idle_timeout,
        backoff=backoff,
        max_attempts=max_attempts,
        deadline=deadline,
        on_connect=on_connect,
        on_reconnect=on_reconnect,
        sleep=sleep,
        clock=clock,
    )
