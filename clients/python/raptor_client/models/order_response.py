from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast
from uuid import UUID

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.order_class import OrderClass
from ..models.order_purpose import OrderPurpose
from ..models.order_status import OrderStatus
from ..models.order_type import OrderType
from ..models.position_intent import PositionIntent
from ..models.side import Side
from ..models.time_in_force import TimeInForce
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.leg_response import LegResponse


T = TypeVar("T", bound="OrderResponse")


@_attrs_define
class OrderResponse:
    """An order.

    Attributes:
        canceled_at (datetime.datetime | None): Canceled.
        client_order_id (str): Client order id.
        created_at (datetime.datetime): Created.
        fees (str): Fees charged.
        filled_at (datetime.datetime | None): Filled.
        filled_avg_price (None | str): Average fill price (net per unit for mleg).
        filled_qty (str): Filled quantity.
        id (UUID): Order id.
        legs (list[LegResponse]): Legs (every order has at least one).
        limit_price (None | str): Limit.
        order_class (OrderClass): `simple` or `mleg` (2-4 legs, all or none).
        purpose (OrderPurpose): What placed the order: `POST /orders`, a roll or a close.
        qty (str): Quantity.
        status (OrderStatus): An order's status: `new` (open, resting), `filled`, `canceled`, `expired`.
        symbol (None | str): Simple orders: symbol.
        time_in_force (TimeInForce): `day` or `gtc`.
        type_ (OrderType): `market` or `limit`.
        updated_at (datetime.datetime): Updated.
        idempotency_replayed (bool | Unset): Present (`true`) only on a replay of a stored answer.
        position_intent (PositionIntent | Unset): Opening or closing, long or short.
        side (Side | Unset): `buy` or `sell`.
    """

    canceled_at: datetime.datetime | None
    client_order_id: str
    created_at: datetime.datetime
    fees: str
    filled_at: datetime.datetime | None
    filled_avg_price: None | str
    filled_qty: str
    id: UUID
    legs: list[LegResponse]
    limit_price: None | str
    order_class: OrderClass
    purpose: OrderPurpose
    qty: str
    status: OrderStatus
    symbol: None | str
    time_in_force: TimeInForce
    type_: OrderType
    updated_at: datetime.datetime
    idempotency_replayed: bool | Unset = UNSET
    position_intent: PositionIntent | Unset = UNSET
    side: Side | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        canceled_at: None | str
        if isinstance(self.canceled_at, datetime.datetime):
            canceled_at = self.canceled_at.isoformat()
        else:
            canceled_at = self.canceled_at

        client_order_id = self.client_order_id

        created_at = self.created_at.isoformat()

        fees = self.fees

        filled_at: None | str
        if isinstance(self.filled_at, datetime.datetime):
            filled_at = self.filled_at.isoformat()
        else:
            filled_at = self.filled_at

        filled_avg_price: None | str
        filled_avg_price = self.filled_avg_price

        filled_qty = self.filled_qty

        id = str(self.id)

        legs = []
        for legs_item_data in self.legs:
            legs_item = legs_item_data.to_dict()
            legs.append(legs_item)

        limit_price: None | str
        limit_price = self.limit_price

        order_class = self.order_class.value

        purpose = self.purpose.value

        qty = self.qty

        status = self.status.value

        symbol: None | str
        symbol = self.symbol

        time_in_force = self.time_in_force.value

        type_ = self.type_.value

        updated_at = self.updated_at.isoformat()

        idempotency_replayed = self.idempotency_replayed

        position_intent: str | Unset = UNSET
        if not isinstance(self.position_intent, Unset):
            position_intent = self.position_intent.value

        side: str | Unset = UNSET
        if not isinstance(self.side, Unset):
            side = self.side.value

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "canceled_at": canceled_at,
                "client_order_id": client_order_id,
                "created_at": created_at,
                "fees": fees,
                "filled_at": filled_at,
                "filled_avg_price": filled_avg_price,
                "filled_qty": filled_qty,
                "id": id,
                "legs": legs,
                "limit_price": limit_price,
                "order_class": order_class,
                "purpose": purpose,
                "qty": qty,
                "status": status,
                "symbol": symbol,
                "time_in_force": time_in_force,
                "type": type_,
                "updated_at": updated_at,
            }
        )
        if idempotency_replayed is not UNSET:
            field_dict["idempotency_replayed"] = idempotency_replayed
        if position_intent is not UNSET:
            field_dict["position_intent"] = position_intent
        if side is not UNSET:
            field_dict["side"] = side

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.leg_response import LegResponse  # noqa: PLC0415

        d = dict(src_dict)

        def _parse_canceled_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                canceled_at_type_0 = datetime.datetime.fromisoformat(data)

                return canceled_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        canceled_at = _parse_canceled_at(d.pop("canceled_at"))

        client_order_id = d.pop("client_order_id")

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        fees = d.pop("fees")

        def _parse_filled_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                filled_at_type_0 = datetime.datetime.fromisoformat(data)

                return filled_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        filled_at = _parse_filled_at(d.pop("filled_at"))

        def _parse_filled_avg_price(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        filled_avg_price = _parse_filled_avg_price(d.pop("filled_avg_price"))

        filled_qty = d.pop("filled_qty")

        id = UUID(d.pop("id"))

        legs = []
        _legs = d.pop("legs")
        for legs_item_data in _legs:
            legs_item = LegResponse.from_dict(legs_item_data)

            legs.append(legs_item)

        def _parse_limit_price(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        limit_price = _parse_limit_price(d.pop("limit_price"))

        order_class = OrderClass(d.pop("order_class"))

        purpose = OrderPurpose(d.pop("purpose"))

        qty = d.pop("qty")

        status = OrderStatus(d.pop("status"))

        def _parse_symbol(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        symbol = _parse_symbol(d.pop("symbol"))

        time_in_force = TimeInForce(d.pop("time_in_force"))

        type_ = OrderType(d.pop("type"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        idempotency_replayed = d.pop("idempotency_replayed", UNSET)

        _position_intent = d.pop("position_intent", UNSET)
        position_intent: PositionIntent | Unset
        if isinstance(_position_intent, Unset):
            position_intent = UNSET
        else:
            position_intent = PositionIntent(_position_intent)

        _side = d.pop("side", UNSET)
        side: Side | Unset
        if isinstance(_side, Unset):
            side = UNSET
        else:
            side = Side(_side)

        order_response = cls(
            canceled_at=canceled_at,
            client_order_id=client_order_id,
            created_at=created_at,
            fees=fees,
            filled_at=filled_at,
            filled_avg_price=filled_avg_price,
            filled_qty=filled_qty,
            id=id,
            legs=legs,
            limit_price=limit_price,
            order_class=order_class,
            purpose=purpose,
            qty=qty,
            status=status,
            symbol=symbol,
            time_in_force=time_in_force,
            type_=type_,
            updated_at=updated_at,
            idempotency_replayed=idempotency_replayed,
            position_intent=position_intent,
            side=side,
        )

        order_response.additional_properties = d
        return order_response

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
