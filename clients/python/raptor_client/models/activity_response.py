from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.activity_type import ActivityType
from ..models.side import Side

T = TypeVar("T", bound="ActivityResponse")


@_attrs_define
class ActivityResponse:
    """One entry of the activity feed.

    Attributes:
        cash_delta (str): What it did to cash, fees included (negative: paid).
        id (str): Unique in the feed.
        occurred_at (datetime.datetime): When.
        order_id (None | UUID): The order it belongs to (`null` for a reset).
        price (None | str): Fill price, or the canceled order's limit.
        qty (None | str): Quantity filled, or left open when canceled.
        side (None | Side):
        symbol (None | str): The symbol (`null` for a reset and a multi-leg order's cancel).
        type_ (ActivityType): What an activity records. Clients must accept values they do not know yet: new kinds are
            added without a new version of the API.
    """

    cash_delta: str
    id: str
    occurred_at: datetime.datetime
    order_id: None | UUID
    price: None | str
    qty: None | str
    side: None | Side
    symbol: None | str
    type_: ActivityType
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cash_delta = self.cash_delta

        id = self.id

        occurred_at = self.occurred_at.isoformat()

        order_id: None | str
        if isinstance(self.order_id, UUID):
            order_id = str(self.order_id)
        else:
            order_id = self.order_id

        price: None | str
        price = self.price

        qty: None | str
        qty = self.qty

        side: None | str
        if isinstance(self.side, Side):
            side = self.side.value
        else:
            side = self.side

        symbol: None | str
        symbol = self.symbol

        type_ = self.type_.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cash_delta": cash_delta,
                "id": id,
                "occurred_at": occurred_at,
                "order_id": order_id,
                "price": price,
                "qty": qty,
                "side": side,
                "symbol": symbol,
                "type": type_,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cash_delta = d.pop("cash_delta")

        id = d.pop("id")

        occurred_at = datetime.datetime.fromisoformat(d.pop("occurred_at"))

        def _parse_order_id(data: object) -> None | UUID:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                order_id_type_0 = UUID(data)

                return order_id_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | UUID, data)

        order_id = _parse_order_id(d.pop("order_id"))

        def _parse_price(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        price = _parse_price(d.pop("price"))

        def _parse_qty(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        qty = _parse_qty(d.pop("qty"))

        def _parse_side(data: object) -> None | Side:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                side_type_1 = Side(data)

                return side_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Side, data)

        side = _parse_side(d.pop("side"))

        def _parse_symbol(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        symbol = _parse_symbol(d.pop("symbol"))

        type_ = ActivityType(d.pop("type"))

        activity_response = cls(
            cash_delta=cash_delta,
            id=id,
            occurred_at=occurred_at,
            order_id=order_id,
            price=price,
            qty=qty,
            side=side,
            symbol=symbol,
            type_=type_,
        )

        activity_response.additional_properties = d
        return activity_response

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
