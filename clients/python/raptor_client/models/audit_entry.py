from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.audit_entry_context import AuditEntryContext


T = TypeVar("T", bound="AuditEntry")


@_attrs_define
class AuditEntry:
    """One row of a user's audit trail.

    Attributes:
        action (str): What happened (`order.filled`, `session.created`, `user.shown`, …). Example: order.filled.
        context (AuditEntryContext): Its details, as recorded.
        created_at (datetime.datetime): When it was written.
        id (int): The row's id (increasing).
        request_id (None | str | Unset): The server id of the request that wrote it (none for background work and the
            command
            line).
    """

    action: str
    context: AuditEntryContext
    created_at: datetime.datetime
    id: int
    request_id: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        action = self.action

        context = self.context.to_dict()

        created_at = self.created_at.isoformat()

        id = self.id

        request_id: None | str | Unset
        if isinstance(self.request_id, Unset):
            request_id = UNSET
        else:
            request_id = self.request_id

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "action": action,
                "context": context,
                "created_at": created_at,
                "id": id,
            }
        )
        if request_id is not UNSET:
            field_dict["request_id"] = request_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.audit_entry_context import AuditEntryContext  # noqa: PLC0415

        d = dict(src_dict)
        action = d.pop("action")

        context = AuditEntryContext.from_dict(d.pop("context"))

        created_at = datetime.datetime.fromisoformat(d.pop("created_at"))

        id = d.pop("id")

        def _parse_request_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        request_id = _parse_request_id(d.pop("request_id", UNSET))

        audit_entry = cls(
            action=action,
            context=context,
            created_at=created_at,
            id=id,
            request_id=request_id,
        )

        audit_entry.additional_properties = d
        return audit_entry

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
