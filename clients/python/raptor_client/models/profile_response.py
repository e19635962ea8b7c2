from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="ProfileResponse")


@_attrs_define
class ProfileResponse:
    """The caller's profile.

    Attributes:
        display_name (None | str): Display name, if set.
        email (str): The sign-up address.
        marketing_opt_in (bool): Marketing email consent.
        time_zone (None | str): IANA time zone, if set.
        updated_at (datetime.datetime): Last change of the profile.
        user_id (int): `users.id`.
        idempotency_replayed (bool | Unset): Present (`true`) only on a replay of a stored answer.
    """

    display_name: None | str
    email: str
    marketing_opt_in: bool
    time_zone: None | str
    updated_at: datetime.datetime
    user_id: int
    idempotency_replayed: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        display_name: None | str
        display_name = self.display_name

        email = self.email

        marketing_opt_in = self.marketing_opt_in

        time_zone: None | str
        time_zone = self.time_zone

        updated_at = self.updated_at.isoformat()

        user_id = self.user_id

        idempotency_replayed = self.idempotency_replayed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "display_name": display_name,
                "email": email,
                "marketing_opt_in": marketing_opt_in,
                "time_zone": time_zone,
                "updated_at": updated_at,
                "user_id": user_id,
            }
        )
        if idempotency_replayed is not UNSET:
            field_dict["idempotency_replayed"] = idempotency_replayed

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)

        def _parse_display_name(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        display_name = _parse_display_name(d.pop("display_name"))

        email = d.pop("email")

        marketing_opt_in = d.pop("marketing_opt_in")

        def _parse_time_zone(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        time_zone = _parse_time_zone(d.pop("time_zone"))

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        user_id = d.pop("user_id")

        idempotency_replayed = d.pop("idempotency_replayed", UNSET)

        profile_response = cls(
            display_name=display_name,
            email=email,
            marketing_opt_in=marketing_opt_in,
            time_zone=time_zone,
            updated_at=updated_at,
            user_id=user_id,
            idempotency_replayed=idempotency_replayed,
        )

        profile_response.additional_properties = d
        return profile_response

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
