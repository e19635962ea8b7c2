from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.trade_event import TradeEvent
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.order_response import OrderResponse


T = TypeVar("T", bound="TradeUpdate")


@_attrs_define
class TradeUpdate:
    """One trade update: the `data` of an SSE message whose `event` is its `event` and whose `id`
    is its `id`.

        Attributes:
            event (TradeEvent): What a trade update is.
            id (str): The event's id, increasing: send the last one seen back as `Last-Event-ID` to resume. Example: 4211.
            occurred_at (datetime.datetime): When it happened (the change's commit).
            order (None | OrderResponse | Unset):
            position_qty (None | str | Unset): The signed quantity of `symbol`'s position right after the event (negative
                when short,
                `0` when flat): a fill's first leg, a settlement (always `0`). Example: 10.
            price (None | str | Unset): A fill's price (the net price per unit of a multi-leg order), a settlement's price.
                Example: 190.10.
            qty (None | str | Unset): A fill's quantity (its first leg's), a settlement's contracts. Example: 10.
            reason (None | str | Unset): Why: a rejection's or evaluation's code, a cancel's or expiry's reason, a
                settlement's
                outcome (`cash`, `worthless`).
            symbol (None | str | Unset): The symbol concerned (a settlement's contract, a fill's first leg).
    """

    event: TradeEvent
    id: str
    occurred_at: datetime.datetime
    order: None | OrderResponse | Unset = UNSET
    position_qty: None | str | Unset = UNSET
    price: None | str | Unset = UNSET
    qty: None | str | Unset = UNSET
    reason: None | str | Unset = UNSET
    symbol: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.order_response import OrderResponse  # noqa: PLC0415

        event = self.event.value

        id = self.id

        occurred_at = self.occurred_at.isoformat()

        order: dict[str, Any] | None | Unset
        if isinstance(self.order, Unset):
            order = UNSET
        elif isinstance(self.order, OrderResponse):
            order = self.order.to_dict()
        else:
            order = self.order

        position_qty: None | str | Unset
        if isinstance(self.position_qty, Unset):
            position_qty = UNSET
        else:
            position_qty = self.position_qty

        price: None | str | Unset
        if isinstance(self.price, Unset):
            price = UNSET
        else:
            price = self.price

        qty: None | str | Unset
        if isinstance(self.qty, Unset):
            qty = UNSET
        else:
            qty = self.qty

        reason: None | str | Unset
        if isinstance(self.reason, Unset):
            reason = UNSET
        else:
            reason = self.reason

        symbol: None | str | Unset
        if isinstance(self.symbol, Unset):
            symbol = UNSET
        else:
            symbol = self.symbol

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "event": event,
                "id": id,
                "occurred_at": occurred_at,
            }
        )
        if order is not UNSET:
            field_dict["order"] = order
        if position_qty is not UNSET:
            field_dict["position_qty"] = position_qty
        if price is not UNSET:
            field_dict["price"] = price
        if qty is not UNSET:
            field_dict["qty"] = qty
        if reason is not UNSET:
            field_dict["reason"] = reason
        if symbol is not UNSET:
            field_dict["symbol"] = symbol

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.order_response import OrderResponse  # noqa: PLC0415

        d = dict(src_dict)
        event = TradeEvent(d.pop("event"))

        id = d.pop("id")

        occurred_at = datetime.datetime.fromisoformat(d.pop("occurred_at"))

        def _parse_order(data: object) -> None | OrderResponse | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                order_type_1 = OrderResponse.from_dict(data)

                return order_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OrderResponse | Unset, data)

        order = _parse_order(d.pop("order", UNSET))

        def _parse_position_qty(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        position_qty = _parse_position_qty(d.pop("position_qty", UNSET))

        def _parse_price(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        price = _parse_price(d.pop("price", UNSET))

        def _parse_qty(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        qty = _parse_qty(d.pop("qty", UNSET))

        def _parse_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        reason = _parse_reason(d.pop("reason", UNSET))

        def _parse_symbol(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        symbol = _parse_symbol(d.pop("symbol", UNSET))

        trade_update = cls(
            event=event,
            id=id,
            occurred_at=occurred_at,
            order=order,
            position_qty=position_qty,
            price=price,
            qty=qty,
            reason=reason,
            symbol=symbol,
        )

        trade_update.additional_properties = d
        return trade_update

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
