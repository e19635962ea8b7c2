from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PortalSessionResponse")


@_attrs_define
class PortalSessionResponse:
    """`201` of `POST /api/billing/portal-sessions`.

    Attributes:
        url (str): Where to send the user.
        idempotency_replayed (bool | Unset): Present (`true`) only on a replay of a stored answer.
    """

    url: str
    idempotency_replayed: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        url = self.url

        idempotency_replayed = self.idempotency_replayed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "url": url,
            }
        )
        if idempotency_replayed is not UNSET:
            field_dict["idempotency_replayed"] = idempotency_replayed

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        url = d.pop("url")

        idempotency_replayed = d.pop("idempotency_replayed", UNSET)

        portal_session_response = cls(
            url=url,
            idempotency_replayed=idempotency_replayed,
        )

        portal_session_response.additional_properties = d
        return portal_session_response

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
