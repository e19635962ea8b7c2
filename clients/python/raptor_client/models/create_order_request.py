from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.order_class import OrderClass
from ..models.order_type import OrderType
from ..models.position_intent import PositionIntent
from ..models.side import Side
from ..models.time_in_force import TimeInForce
from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.leg_request import LegRequest


T = TypeVar("T", bound="CreateOrderRequest")


@_attrs_define
class CreateOrderRequest:
    """`POST /api/trading/orders`.

    Attributes:
        qty (str): Shares or contracts (simple) or strategy units (mleg). Example: 1.
        type_ (OrderType): `market` or `limit`.
        client_order_id (None | str | Unset): Unique per account; derived from the account and the Idempotency-Key when
            absent.
        legs (list[LegRequest] | None | Unset): Multi-leg orders: 2-4 legs (fewer or more is `422 invalid_order`; a
            simple order sends
            none).
        limit_price (None | str | Unset): Limit orders: per share (simple) or net per unit, positive = debit (mleg).
            Example: 1.25.
        order_class (OrderClass | Unset): `simple` or `mleg` (2-4 legs, all or none).
        position_intent (PositionIntent | Unset): Opening or closing, long or short.
        side (Side | Unset): `buy` or `sell`.
        symbol (None | str | Unset): Simple orders: the equity or OCC option symbol. Example: AAPL260918C00065000.
        time_in_force (TimeInForce | Unset): `day` or `gtc`.
    """

    qty: str
    type_: OrderType
    client_order_id: None | str | Unset = UNSET
    legs: list[LegRequest] | None | Unset = UNSET
    limit_price: None | str | Unset = UNSET
    order_class: OrderClass | Unset = UNSET
    position_intent: PositionIntent | Unset = UNSET
    side: Side | Unset = UNSET
    symbol: None | str | Unset = UNSET
    time_in_force: TimeInForce | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        qty = self.qty

        type_ = self.type_.value

        client_order_id: None | str | Unset
        if isinstance(self.client_order_id, Unset):
            client_order_id = UNSET
        else:
            client_order_id = self.client_order_id

        legs: list[dict[str, Any]] | None | Unset
        if isinstance(self.legs, Unset):
            legs = UNSET
        elif isinstance(self.legs, list):
            legs = []
            for legs_type_0_item_data in self.legs:
                legs_type_0_item = legs_type_0_item_data.to_dict()
                legs.append(legs_type_0_item)

        else:
            legs = self.legs

        limit_price: None | str | Unset
        if isinstance(self.limit_price, Unset):
            limit_price = UNSET
        else:
            limit_price = self.limit_price

        order_class: str | Unset = UNSET
        if not isinstance(self.order_class, Unset):
            order_class = self.order_class.value

        position_intent: str | Unset = UNSET
        if not isinstance(self.position_intent, Unset):
            position_intent = self.position_intent.value

        side: str | Unset = UNSET
        if not isinstance(self.side, Unset):
            side = self.side.value

        symbol: None | str | Unset
        if isinstance(self.symbol, Unset):
            symbol = UNSET
        else:
            symbol = self.symbol

        time_in_force: str | Unset = UNSET
        if not isinstance(self.time_in_force, Unset):
            time_in_force = self.time_in_force.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "qty": qty,
                "type": type_,
            }
        )
        if client_order_id is not UNSET:
            field_dict["client_order_id"] = client_order_id
        if legs is not UNSET:
            field_dict["legs"] = legs
        if limit_price is not UNSET:
            field_dict["limit_price"] = limit_price
        if order_class is not UNSET:
            field_dict["order_class"] = order_class
        if position_intent is not UNSET:
            field_dict["position_intent"] = position_intent
        if side is not UNSET:
            field_dict["side"] = side
        if symbol is not UNSET:
            field_dict["symbol"] = symbol
        if time_in_force is not UNSET:
            field_dict["time_in_force"] = time_in_force

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.leg_request import LegRequest  # noqa: PLC0415

        d = dict(src_dict)
        qty = d.pop("qty")

        type_ = OrderType(d.pop("type"))

        def _parse_client_order_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        client_order_id = _parse_client_order_id(d.pop("client_order_id", UNSET))

        def _parse_legs(data: object) -> list[LegRequest] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                legs_type_0 = []
                _legs_type_0 = data
                for legs_type_0_item_data in _legs_type_0:
                    legs_type_0_item = LegRequest.from_dict(legs_type_0_item_data)

                    legs_type_0.append(legs_type_0_item)

                return legs_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[LegRequest] | None | Unset, data)

        legs = _parse_legs(d.pop("legs", UNSET))

        def _parse_limit_price(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        limit_price = _parse_limit_price(d.pop("limit_price", UNSET))

        _order_class = d.pop("order_class", UNSET)
        order_class: OrderClass | Unset
        if isinstance(_order_class, Unset):
            order_class = UNSET
        else:
            order_class = OrderClass(_order_class)

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

        def _parse_symbol(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        symbol = _parse_symbol(d.pop("symbol", UNSET))

        _time_in_force = d.pop("time_in_force", UNSET)
        time_in_force: TimeInForce | Unset
        if isinstance(_time_in_force, Unset):
            time_in_force = UNSET
        else:
            time_in_force = TimeInForce(_time_in_force)

        create_order_request = cls(
            qty=qty,
            type_=type_,
            client_order_id=client_order_id,
            legs=legs,
            limit_price=limit_price,
            order_class=order_class,
            position_intent=position_intent,
            side=side,
            symbol=symbol,
            time_in_force=time_in_force,
        )

        return create_order_request
