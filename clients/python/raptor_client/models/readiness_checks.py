from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

T = TypeVar("T", bound="ReadinessChecks")


@_attrs_define
class ReadinessChecks:
    """What `/readyz` asked.

    Attributes:
        database (str): The business pool (`DATABASE_URL`): every request's transaction.
        idempotency_store (str): The idempotency store's pool (`IDEMPOTENCY_STORE_DATABASE_URL`, or the same database):
            the claim of every keyed request. A replica that cannot reach it is not ready: Tier 1
            routes would answer 503.
    """

    database: str
    idempotency_store: str
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        database = self.database

        idempotency_store = self.idempotency_store

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "database": database,
                "idempotency_store": idempotency_store,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        database = d.pop("database")

        idempotency_store = d.pop("idempotency_store")

        readiness_checks = cls(
            database=database,
            idempotency_store=idempotency_store,
        )

        readiness_checks.additional_properties = d
        return readiness_checks

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
