from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.readiness_checks import ReadinessChecks


T = TypeVar("T", bound="HealthResponse")


@_attrs_define
class HealthResponse:
    """Liveness/readiness answer.

    Attributes:
        status (str): `ok`, `unavailable` or `draining`.
        checks (None | ReadinessChecks | Unset):
    """

    status: str
    checks: None | ReadinessChecks | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.readiness_checks import ReadinessChecks  # noqa: PLC0415

        status = self.status

        checks: dict[str, Any] | None | Unset
        if isinstance(self.checks, Unset):
            checks = UNSET
        elif isinstance(self.checks, ReadinessChecks):
            checks = self.checks.to_dict()
        else:
            checks = self.checks

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "status": status,
            }
        )
        if checks is not UNSET:
            field_dict["checks"] = checks

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.readiness_checks import ReadinessChecks  # noqa: PLC0415

        d = dict(src_dict)
        status = d.pop("status")

        def _parse_checks(data: object) -> None | ReadinessChecks | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                checks_type_1 = ReadinessChecks.from_dict(data)

                return checks_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ReadinessChecks | Unset, data)

        checks = _parse_checks(d.pop("checks", UNSET))

        health_response = cls(
            status=status,
            checks=checks,
        )

        health_response.additional_properties = d
        return health_response

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
