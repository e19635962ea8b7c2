from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="CancelSubscriptionRequest")


@_attrs_define
class CancelSubscriptionRequest:
    """`POST /api/billing/subscription/cancel`: `{}` or no body."""

    def to_dict(self) -> dict[str, Any]:

        field_dict: dict[str, Any] = {}

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        cancel_subscription_request = cls()

        return cancel_subscription_request
