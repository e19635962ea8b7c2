from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="SetQuoteRequest")


@_attrs_define
class SetQuoteRequest:
    """`PUT /api/admin/quotes/{symbol}`.

    Attributes:
        ask (str): Ask (no minus sign, not even on zero). Example: 1.25.
        bid (str): Bid (no minus sign, not even on zero). Example: 1.20.
    """

    ask: str
    bid: str

    def to_dict(self) -> dict[str, Any]:
        ask = self.ask

        bid = self.bid

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "ask": ask,
                "bid": bid,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ask = d.pop("ask")

        bid = d.pop("bid")

        set_quote_request = cls(
            ask=ask,
            bid=bid,
        )

        return set_quote_request
