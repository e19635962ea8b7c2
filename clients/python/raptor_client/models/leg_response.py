from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.order_status import OrderStatus
from ..models.position_intent import PositionIntent
from ..models.side import Side

T = TypeVar("T", bound="LegResponse")


@_attrs_define
class LegResponse:
    """One leg of an order.

    Attributes:
        filled_avg_price (None | str): Fill price.
        filled_qty (str): Filled contracts.
        position_intent (PositionIntent): Opening or closing, long or short.
        qty (str): Contracts.
        ratio_qty (int): Ratio.
        side (Side): `buy` or `sell`.
        status (OrderStatus): An order's status: `new` (open, resting), `filled`, `canceled`, `expired`.
        symbol (str): Symbol.
    """

    filled_avg_price: None | str
    filled_qty: str
    position_intent: PositionIntent
    qty: str
    ratio_qty: int
    side: Side
    status: OrderStatus
    symbol: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        filled_avg_price: None | str
        filled_avg_price = self.filled_avg_price

        filled_qty = self.filled_qty

        position_intent = self.position_intent.value

        qty = self.qty

        ratio_qty = self.ratio_qty

        side = self.side.value

        status = self.status.value

        symbol = self.symbol

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "filled_avg_price": filled_avg_price,
                "filled_qty": filled_qty,
                "position_intent": position_intent,
                "qty": qty,
                "ratio_qty": ratio_qty,
                "side": side,
                "status": status,
                "symbol": symbol,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_filled_avg_price(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        filled_avg_price = _parse_filled_avg_price(d.pop("filled_avg_price"))

        filled_qty = d.pop("filled_qty")

        position_intent = PositionIntent(d.pop("position_intent"))

        qty = d.pop("qty")

        ratio_qty = d.pop("ratio_qty")

        side = Side(d.pop("side"))

        status = OrderStatus(d.pop("status"))

        symbol = d.pop("symbol")

        leg_response = cls(
            filled_avg_price=filled_avg_price,
            filled_qty=filled_qty,
            position_intent=position_intent,
            qty=qty,
            ratio_qty=ratio_qty,
            side=side,
            status=status,
            symbol=symbol,
        )

        leg_response.additional_properties = d
        return leg_response

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
