from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RollRequest")


@_attrs_define
class RollRequest:
    """`POST /api/trading/positions/{symbol}/roll`: buy-to-close `{symbol}` and sell-to-open
    `to_symbol` as one all-or-none order.

        Attributes:
            qty (str): Contracts to roll. Example: 1.
            to_symbol (str): The new short call. Example: XYZ270115C00067500.
            limit_price (None | str | Unset): Net limit per unit (negative = credit); market when absent. Example: -0.80.
    """

    qty: str
    to_symbol: str
    limit_price: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        qty = self.qty

        to_symbol = self.to_symbol

        limit_price: None | str | Unset
        if isinstance(self.limit_price, Unset):
            limit_price = UNSET
        else:
            limit_price = self.limit_price

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "qty": qty,
                "to_symbol": to_symbol,
            }
        )
        if limit_price is not UNSET:
            field_dict["limit_price"] = limit_price

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        qty = d.pop("qty")

        to_symbol = d.pop("to_symbol")

        def _parse_limit_price(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        limit_price = _parse_limit_price(d.pop("limit_price", UNSET))

        roll_request = cls(
            qty=qty,
            to_symbol=to_symbol,
            limit_price=limit_price,
        )

        return roll_request
