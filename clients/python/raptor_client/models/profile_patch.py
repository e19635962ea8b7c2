from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="ProfilePatch")


@_attrs_define
class ProfilePatch:
    """`PATCH /api/account/profile`: every field optional; `null` clears `display_name` and
    `time_zone`.

        Attributes:
            display_name (None | str | Unset): At most 64 characters after trimming, no control characters; `null` or blank
                clears it. Example: Ada.
            marketing_opt_in (bool | Unset): Marketing email consent.
            time_zone (None | str | Unset): An IANA time zone name (`America/New_York`); `null` clears it. Example:
                America/New_York.
    """

    display_name: None | str | Unset = UNSET
    marketing_opt_in: bool | Unset = UNSET
    time_zone: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        display_name: None | str | Unset
        if isinstance(self.display_name, Unset):
            display_name = UNSET
        else:
            display_name = self.display_name

        marketing_opt_in = self.marketing_opt_in

        time_zone: None | str | Unset
        if isinstance(self.time_zone, Unset):
            time_zone = UNSET
        else:
            time_zone = self.time_zone

        field_dict: dict[str, Any] = {}

        field_dict.update({})
        if display_name is not UNSET:
            field_dict["display_name"] = display_name
        if marketing_opt_in is not UNSET:
            field_dict["marketing_opt_in"] = marketing_opt_in
        if time_zone is not UNSET:
            field_dict["time_zone"] = time_zone

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_display_name(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        display_name = _parse_display_name(d.pop("display_name", UNSET))

        marketing_opt_in = d.pop("marketing_opt_in", UNSET)

        def _parse_time_zone(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        time_zone = _parse_time_zone(d.pop("time_zone", UNSET))

        profile_patch = cls(
            display_name=display_name,
            marketing_opt_in=marketing_opt_in,
            time_zone=time_zone,
        )

        return profile_patch
