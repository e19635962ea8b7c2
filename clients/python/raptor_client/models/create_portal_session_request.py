from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="CreatePortalSessionRequest")


@_attrs_define
class CreatePortalSessionRequest:
    """`POST /api/billing/portal-sessions`.

    Attributes:
        return_url (str): Where the portal sends the user back (an absolute http or https URL, at most 2048
            characters). Example: https://app.example.com/settings.
    """

    return_url: str

    def to_dict(self) -> dict[str, Any]:
        return_url = self.return_url

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "return_url": return_url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        return_url = d.pop("return_url")

        create_portal_session_request = cls(
            return_url=return_url,
        )

        return create_portal_session_request
