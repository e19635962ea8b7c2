"""Paged lists as one iterator: follows `next_cursor` until the last page."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from raptor_client.types import UNSET, Unset

ItemT_co = TypeVar("ItemT_co", covariant=True)
ItemT = TypeVar("ItemT")


class Page(Protocol[ItemT_co]):
    """What every paged list answers (`OrderListResponse`, `ActivityListResponse`, ...)."""

    @property
    def data(self) -> Sequence[ItemT_co]: ...

    @property
    def has_more(self) -> bool: ...

    @property
    def next_cursor(self) -> str | None | Unset: ...


def _next(page: Page[object]) -> str | None:
    cursor = page.next_cursor
    if not page.has_more or isinstance(cursor, Unset) or cursor is None:
        return None
    return cursor


def pages(fetch: Callable[[str | Unset], Page[ItemT]]) -> Iterator[ItemT]:
    """Every item of a paged list, in the list's order: `fetch(cursor)` gets one page (UNSET
    for the first), typically a generated call wrapped in `retrying`."""
    cursor: str | Unset = UNSET
    while True:
        page = fetch(cursor)
        yield from page.data
        following = _next(page)
        if following is None:
            return
        cursor = following


async def apages(fetch: Callable[[str | Unset], Awaitable[Page[ItemT]]]) -> AsyncIterator[ItemT]:
    """`pages` for async calls."""
    cursor: str | Unset = UNSET
    while True:
        page = await fetch(cursor)
        for item in page.data:
            yield item
        following = _next(page)
        if following is None:
            return
        cursor = following
