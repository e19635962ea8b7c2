"""The hand-written layer over the generated `raptor_client`: calls that retry with one
`Idempotency-Key` per operation (`retrying`, `aretrying`), paged lists as iterators
(`pages`, `apages`) and the trade-updates stream as iterators that resume with `Last-Event-ID`
(`trade_updates`, `atrade_updates`).

    from raptor_sdk import retrying
    order = retrying(
        lambda key: create_order.sync_detailed(client=client, body=body, idempotency_key=key),
        OrderResponse,
    )
"""

from .pages import Page, apages, pages
from .retrying import (
    Backoff,
    GaveUp,
    KeySpent,
    Problem,
    RaptorError,
    Refused,
    aretrying,
    retrying,
)
from .stream import (
    AsyncTradeUpdates,
    EventStreamParser,
    HistoryGone,
    Message,
    Reconnect,
    TradeUpdates,
    atrade_updates,
    trade_updates,
)

__all__ = [
    "AsyncTradeUpdates",
    "Backoff",
    "EventStreamParser",
    "GaveUp",
    "HistoryGone",
    "KeySpent",
    "Message",
    "Page",
    "Problem",
    "RaptorError",
    "Reconnect",
    "Refused",
    "TradeUpdates",
    "apages",
    "aretrying",
    "atrade_updates",
    "pages",
    "retrying",
    "trade_updates",
]
