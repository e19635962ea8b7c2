from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ClosePositionRequest")


@_attrs_define
class ClosePositionRequest:
    """`POST /api/trading/positions/{symbol}/close`: `{}` closes everything.

    Attributes:
        qty (None | str | Unset): Partial close.
    """

    qty: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        qty: None | str | Unset
        if isinstance(self.qty, Unset):
            qty = UNSET
        else:
            qty = self.qty

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if qty is not UNSET:
            field_dict["qty"] = qty

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_qty(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        qty = _parse_qty(d.pop("qty", UNSET))

        close_position_request = cls(
            qty=qty,
        )

        return close_position_request
