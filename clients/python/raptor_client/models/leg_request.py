from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.position_intent import PositionIntent
from ..models.side import Side
from ..types import UNSET, Unset

T = TypeVar("T", bound="LegRequest")


@_attrs_define
class LegRequest:
    """One leg of a multi-leg order.

    Attributes:
        symbol (str): OCC option symbol.
        position_intent (PositionIntent | Unset): Opening or closing, long or short.
        ratio_qty (int | None | Unset): Contracts per strategy unit (default 1).
        side (Side | Unset): `buy` or `sell`.
    """

    symbol: str
    position_intent: PositionIntent | Unset = UNSET
    ratio_qty: int | None | Unset = UNSET
    side: Side | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        symbol = self.symbol

        position_intent: str | Unset = UNSET
        if not isinstance(self.position_intent, Unset):
            position_intent = self.position_intent.value

        ratio_qty: int | None | Unset
        if isinstance(self.ratio_qty, Unset):
            ratio_qty = UNSET
        else:
            ratio_qty = self.ratio_qty

        side: str | Unset = UNSET
        if not isinstance(self.side, Unset):
            side = self.side.value

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "symbol": symbol,
            }
        )
        if position_intent is not UNSET:
            field_dict["position_intent"] = position_intent
        if ratio_qty is not UNSET:
            field_dict["ratio_qty"] = ratio_qty
        if side is not UNSET:
            field_dict["side"] = side

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        symbol = d.pop("symbol")

        _position_intent = d.pop("position_intent", UNSET)
        position_intent: PositionIntent | Unset
        if isinstance(_position_intent, Unset):
            position_intent = UNSET
        else:
            position_intent = PositionIntent(_position_intent)

        def _parse_ratio_qty(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        ratio_qty = _parse_ratio_qty(d.pop("ratio_qty", UNSET))

        _side = d.pop("side", UNSET)
        side: Side | Unset
        if isinstance(_side, Unset):
            side = UNSET
        else:
            side = Side(_side)

        leg_request = cls(
            symbol=symbol,
            position_intent=position_intent,
            ratio_qty=ratio_qty,
            side=side,
        )

        return leg_request
