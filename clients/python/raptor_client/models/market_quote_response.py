from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="MarketQuoteResponse")


@_attrs_define
class MarketQuoteResponse:
    """A symbol's current quote (`GET /api/trading/quotes/{symbol}`).

    Attributes:
        ask (str): Ask. Example: 190.10.
        bid (str): Bid. Example: 189.90.
        sequence (int): The quote event's sequence number (grows with every update of the symbol).
        symbol (str): Symbol.
        updated_at (datetime.datetime): When an operator last set it.
    """

    ask: str
    bid: str
    sequence: int
    symbol: str
    updated_at: datetime.datetime
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ask = self.ask

        bid = self.bid

        sequence = self.sequence

        symbol = self.symbol

        updated_at = self.updated_at.isoformat()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ask": ask,
                "bid": bid,
                "sequence": sequence,
                "symbol": symbol,
                "updated_at": updated_at,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ask = d.pop("ask")

        bid = d.pop("bid")

        sequence = d.pop("sequence")

        symbol = d.pop("symbol")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        market_quote_response = cls(
            ask=ask,
            bid=bid,
            sequence=sequence,
            symbol=symbol,
            updated_at=updated_at,
        )

        market_quote_response.additional_properties = d
        return market_quote_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
