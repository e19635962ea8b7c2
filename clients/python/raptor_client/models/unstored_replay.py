from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="UnstoredReplay")


@_attrs_define
class UnstoredReplay:
    """A replay of an answer whose body was not stored (the portal's URL is a credential).

    Attributes:
        body_stored (bool): Always `false`: ask again with a new key. Example: False.
        idempotency_replayed (bool): Always `true`. Example: True.
    """

    body_stored: bool
    idempotency_replayed: bool
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        body_stored = self.body_stored

        idempotency_replayed = self.idempotency_replayed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "body_stored": body_stored,
                "idempotency_replayed": idempotency_replayed,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        body_stored = d.pop("body_stored")

        idempotency_replayed = d.pop("idempotency_replayed")

        unstored_replay = cls(
            body_stored=body_stored,
            idempotency_replayed=idempotency_replayed,
        )

        unstored_replay.additional_properties = d
        return unstored_replay

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
