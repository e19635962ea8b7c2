from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="QuoteResponse")


@_attrs_define
class QuoteResponse:
    """A quote and what it filled.

    Attributes:
        ask (str): Ask.
        bid (str): Bid.
        filled_order_ids (list[UUID]): Resting orders this request's sweep filled. Accounts it did not reach in time are
            swept
            right after, by the server's sweepers (`pending_accounts`).
        pending_accounts (int): Accounts with resting orders on the symbol still to be swept for this event (0 when the
            request swept them all).
        sequence (int): The quote event's sequence number (the fills it causes name it in their audit rows).
        symbol (str): Symbol.
    """

    ask: str
    bid: str
    filled_order_ids: list[UUID]
    pending_accounts: int
    sequence: int
    symbol: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        ask = self.ask

        bid = self.bid

        filled_order_ids = []
        for filled_order_ids_item_data in self.filled_order_ids:
            filled_order_ids_item = str(filled_order_ids_item_data)
            filled_order_ids.append(filled_order_ids_item)

        pending_accounts = self.pending_accounts

        sequence = self.sequence

        symbol = self.symbol

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "ask": ask,
                "bid": bid,
                "filled_order_ids": filled_order_ids,
                "pending_accounts": pending_accounts,
                "sequence": sequence,
                "symbol": symbol,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        ask = d.pop("ask")

        bid = d.pop("bid")

        filled_order_ids = []
        _filled_order_ids = d.pop("filled_order_ids")
        for filled_order_ids_item_data in _filled_order_ids:
            filled_order_ids_item = UUID(filled_order_ids_item_data)

            filled_order_ids.append(filled_order_ids_item)

        pending_accounts = d.pop("pending_accounts")

        sequence = d.pop("sequence")

        symbol = d.pop("symbol")

        quote_response = cls(
            ask=ask,
            bid=bid,
            filled_order_ids=filled_order_ids,
            pending_accounts=pending_accounts,
            sequence=sequence,
            symbol=symbol,
        )

        quote_response.additional_properties = d
        return quote_response

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
