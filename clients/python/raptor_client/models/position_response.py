from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.position_side import PositionSide

T = TypeVar("T", bound="PositionResponse")


@_attrs_define
class PositionResponse:
    """A position.

    Attributes:
        avg_entry_price (str): Weighted average entry price.
        qty (str): Signed quantity (negative when short).
        realized_pnl (str): Cumulative realized P&L on this symbol.
        side (PositionSide): A position's side: `long` (qty > 0) or `short` (qty < 0).
        symbol (str): Symbol.
    """

    avg_entry_price: str
    qty: str
    realized_pnl: str
    side: PositionSide
    symbol: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        avg_entry_price = self.avg_entry_price

        qty = self.qty

        realized_pnl = self.realized_pnl

        side = self.side.value

        symbol = self.symbol

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "avg_entry_price": avg_entry_price,
                "qty": qty,
                "realized_pnl": realized_pnl,
                "side": side,
                "symbol": symbol,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        avg_entry_price = d.pop("avg_entry_price")

        qty = d.pop("qty")

        realized_pnl = d.pop("realized_pnl")

        side = PositionSide(d.pop("side"))

        symbol = d.pop("symbol")

        position_response = cls(
            avg_entry_price=avg_entry_price,
            qty=qty,
            realized_pnl=realized_pnl,
            side=side,
            symbol=symbol,
        )

        position_response.additional_properties = d
        return position_response

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
