"""Calls that retry safely: one `Idempotency-Key` per logical operation, reused on every attempt.

The server executes a keyed request at most once, so the one thing a client must get right is to
send the *same* key (and body) again when it does not know whether an attempt happened: a lost
connection, a timeout, an answer whose `retry` is `same_key`. Every error body says what to do in
its `retry` member, a property of its code:

- `same_key`: retry with the same key and body, after `Retry-After` when the answer has one;
- `new_key`: the key is spent and nothing was executed: a new attempt is a new operation
  (`KeySpent`);
- `no`, or a value this client does not know: the answer is final (`Refused`).

A code this client does not know yet is handled by its `retry` like any other.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx

from raptor_client.errors import UnexpectedStatus
from raptor_client.types import Response

T = TypeVar("T")

#: Statuses a gateway between the client and the server answers when the server's answer (if any)
#: did not come through; retried with the same key when the body is not the server's problem.
GATEWAY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Problem:
    """An error answer of the API (`application/problem+json`), as far as this client reads it."""

    status: int
    code: str
    retry: str
    message: str
    retry_after: float | None = None
    body: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, status: int, content: bytes, headers: Any = None) -> Problem | None:
        """The problem in an answer, or None when the body is not one (a gateway's page)."""
        try:
            body = json.loads(content)
        except ValueError:
            return None
        if not isinstance(body, dict) or not isinstance(body.get("error"), str):
            return None
        retry_after: float | None = None
        header = headers.get("retry-after") if headers is not None else None
        if header is not None:
            try:
                retry_after = max(0.0, float(header))
            except ValueError:
                retry_after = None
        return cls(
            status=status,
            code=body["error"],
            retry=str(body.get("retry", "no")),
            message=str(body.get("message", "")),
            retry_after=retry_after,
            body=body,
        )


class RaptorError(Exception):
    """An operation that did not succeed; `problem` is the server's answer when there was one."""

    def __init__(self, message: str, problem: Problem | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.problem = problem
        self.key = key


class KeySpent(RaptorError):
    """`retry: new_key`: this key will never execute; trying again is a new operation."""


class Refused(RaptorError):
    """`retry: no` (or a value this client does not know): the answer is final."""


class GaveUp(RaptorError):
    """The deadline passed while the outcome was still unknown: the operation may or may not
    have happened. Retrying later with `key` (the same key) finds out safely."""

    def __init__(
        self,
        message: str,
        problem: Problem | None = None,
        key: str | None = None,
        cause: BaseException | None = None,
        attempts: int = 0,
    ) -> None:
        super().__init__(message, problem, key)
        self.cause = cause
        self.attempts = attempts


@dataclass
class Backoff:
    """When to try again: `Retry-After` when the server sent one (plus up to `base` of jitter),
    else a random wait up to `base * 2**attempt`, at most `cap` ("full jitter")."""

    base: float = 0.1
    cap: float = 5.0
    rand: Callable[[], float] = random.random

    def delay(self, attempt: int, retry_after: float | None) -> float:
        jitter: float = self.rand()
        if retry_after is not None:
            return retry_after + jitter * self.base
        return jitter * min(self.cap, self.base * 2.0**attempt)


class _Attempts:
    """The decision shared by `retrying` and `aretrying`: what one attempt's outcome means."""

    def __init__(
        self, expect: type[T], key: str | None, deadline: float, backoff: Backoff | None, clock: Callable[[], float]
    ) -> None:
        self.expect: type[Any] = expect
        self.key = key or str(uuid.uuid4())
        self.clock = clock
        self.ends = clock() + deadline
        self.backoff = backoff or Backoff()
        self.attempt = 0

    def answered(self, response: Response[Any]) -> tuple[bool, Any]:
        """(True, value) when done; (False, Problem | None) when the same key should be retried;
        raises when the answer is final."""
        status = int(response.status_code)
        if 200 <= status < 300:
            if not isinstance(response.parsed, self.expect):
                raise TypeError(
                    f"a {status} answer parsed as {type(response.parsed).__name__}, expected {self.expect.__name__}"
                )
            return True, response.parsed
        return False, self.refused(status, response.content, response.headers)

    def refused(self, status: int, content: bytes, headers: Any) -> Problem | None:
        problem = Problem.read(status, content, headers)
        if problem is None:
            if status in GATEWAY_STATUSES:
                return None
            raise Refused(f"{status} without a problem body", None, self.key)
        if problem.retry == "same_key":
            return problem
        if problem.retry == "new_key":
            raise KeySpent(f"{problem.code}: {problem.message}", problem, self.key)
        raise Refused(f"{problem.code}: {problem.message}", problem, self.key)

    def failed(self, error: Exception) -> Problem | None:
        """A call that raised: a transport error (or a body that was not JSON) is retried with
        the same key; an undeclared status is judged as an answer; anything else propagates."""
        if isinstance(error, UnexpectedStatus):
            return self.refused(error.status_code, error.content, None)
        if isinstance(error, (httpx.TransportError, json.JSONDecodeError)):
            return None
        raise error

    def wait(self, problem: Problem | None, cause: BaseException | None) -> float:
        """How long to sleep before the next attempt; raises `GaveUp` past the deadline."""
        delay = self.backoff.delay(self.attempt, problem.retry_after if problem else None)
        self.attempt += 1
        if self.clock() + delay > self.ends:
            what = f"{problem.code}" if problem else repr(cause)
            raise GaveUp(
                f"no final answer before the deadline after {self.attempt} attempts (last: {what}); "
                f"retry later with key {self.key}",
                problem,
                self.key,
                cause,
                self.attempt,
            )
        return delay


def retrying(
    call: Callable[[str], Response[Any]],
    expect: type[T],
    *,
    key: str | None = None,
    deadline: float = 30.0,
    backoff: Backoff | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Runs one logical operation: `call(key)` (a generated `sync_detailed` call that sends
    `key` as its `Idempotency-Key`) until it succeeds, with the same key on every attempt.

    Returns the parsed success body, of type `expect`. Raises `KeySpent`, `Refused` or `GaveUp`
    (after `deadline` seconds); an exception that is not the transport's propagates.
    Safe reads (GET) can go through it too: the key is then simply not sent.
    """
    attempts = _Attempts(expect, key, deadline, backoff, clock)
    while True:
        cause: BaseException | None = None
        try:
            done, value = attempts.answered(call(attempts.key))
        except (KeySpent, Refused, TypeError):
            raise
        except Exception as error:  # noqa: BLE001 - classified by `failed`
            done, value, cause = False, attempts.failed(error), error
        if done:
            return value  # type: ignore[no-any-return]
        sleep(attempts.wait(value, cause))


async def aretrying(
    call: Callable[[str], Awaitable[Response[Any]]],
    expect: type[T],
    *,
    key: str | None = None,
    deadline: float = 30.0,
    backoff: Backoff | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """`retrying` for the generated `asyncio_detailed` calls."""
    attempts = _Attempts(expect, key, deadline, backoff, clock)
    while True:
        cause: BaseException | None = None
        try:
            done, value = attempts.answered(await call(attempts.key))
        except (KeySpent, Refused, TypeError):
            raise
        except Exception as error:  # noqa: BLE001 - classified by `failed`
            done, value, cause = False, attempts.failed(error), error
        if done:
            return value  # type: ignore[no-any-return]
        await asyncio.sleep(attempts.wait(value, cause))
