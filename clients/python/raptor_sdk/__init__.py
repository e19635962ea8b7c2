"""The hand-written layer over the generated `raptor_client`: calls that retry with one
`Idempotency-Key` per operation (`retrying`, `aretrying`) and paged lists as iterators
(`pages`, `apages`).

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

__all__ = [
    "Backoff",
    "GaveUp",
    "KeySpent",
    "Page",
    "Problem",
    "RaptorError",
    "Refused",
    "apages",
    "aretrying",
    "pages",
    "retrying",
]
