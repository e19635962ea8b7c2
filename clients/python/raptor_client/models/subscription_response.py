from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="SubscriptionResponse")


@_attrs_define
class SubscriptionResponse:
    """Our mirror of one Stripe subscription.

    Attributes:
        cancel_at_period_end (bool): The subscription ends when the period does.
        canceled_at (datetime.datetime | None): When it was canceled (RFC 3339).
        current_period_end (datetime.datetime | None): End of the paid period (RFC 3339).
        price_id (None | str): The subscribed price.
        source_at (datetime.datetime): Stripe time of the state this mirror holds (RFC 3339): older events never
            overwrite it.
        status (str): Stripe's status (`active`, `trialing`, `past_due`, `canceled`, …).
        stripe_customer_id (str): `cus_…`.
        stripe_subscription_id (str): `sub_…`.
        updated_at (datetime.datetime): Last change of the mirror row (RFC 3339).
        user_id (int | None): Our user, when known.
        idempotency_replayed (bool | Unset): Present (`true`) only on a replay of a stored answer.
    """

    cancel_at_period_end: bool
    canceled_at: datetime.datetime | None
    current_period_end: datetime.datetime | None
    price_id: None | str
    source_at: datetime.datetime
    status: str
    stripe_customer_id: str
    stripe_subscription_id: str
    updated_at: datetime.datetime
    user_id: int | None
    idempotency_replayed: bool | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cancel_at_period_end = self.cancel_at_period_end

        canceled_at: None | str
        if isinstance(self.canceled_at, datetime.datetime):
            canceled_at = self.canceled_at.isoformat()
        else:
            canceled_at = self.canceled_at

        current_period_end: None | str
        if isinstance(self.current_period_end, datetime.datetime):
            current_period_end = self.current_period_end.isoformat()
        else:
            current_period_end = self.current_period_end

        price_id: None | str
        price_id = self.price_id

        source_at = self.source_at.isoformat()

        status = self.status

        stripe_customer_id = self.stripe_customer_id

        stripe_subscription_id = self.stripe_subscription_id

        updated_at = self.updated_at.isoformat()

        user_id: int | None
        user_id = self.user_id

        idempotency_replayed = self.idempotency_replayed

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cancel_at_period_end": cancel_at_period_end,
                "canceled_at": canceled_at,
                "current_period_end": current_period_end,
                "price_id": price_id,
                "source_at": source_at,
                "status": status,
                "stripe_customer_id": stripe_customer_id,
                "stripe_subscription_id": stripe_subscription_id,
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
        cancel_at_period_end = d.pop("cancel_at_period_end")

        def _parse_canceled_at(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                canceled_at_type_0 = datetime.datetime.fromisoformat(data)

                return canceled_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        canceled_at = _parse_canceled_at(d.pop("canceled_at"))

        def _parse_current_period_end(data: object) -> datetime.datetime | None:
            if data is None:
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                current_period_end_type_0 = datetime.datetime.fromisoformat(data)

                return current_period_end_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None, data)

        current_period_end = _parse_current_period_end(d.pop("current_period_end"))

        def _parse_price_id(data: object) -> None | str:
            if data is None:
                return data
            return cast(None | str, data)

        price_id = _parse_price_id(d.pop("price_id"))

        source_at = datetime.datetime.fromisoformat(d.pop("source_at"))

        status = d.pop("status")

        stripe_customer_id = d.pop("stripe_customer_id")

        stripe_subscription_id = d.pop("stripe_subscription_id")

        updated_at = datetime.datetime.fromisoformat(d.pop("updated_at"))

        def _parse_user_id(data: object) -> int | None:
            if data is None:
                return data
            return cast(int | None, data)

        user_id = _parse_user_id(d.pop("user_id"))

        idempotency_replayed = d.pop("idempotency_replayed", UNSET)

        subscription_response = cls(
            cancel_at_period_end=cancel_at_period_end,
            canceled_at=canceled_at,
            current_period_end=current_period_end,
            price_id=price_id,
            source_at=source_at,
            status=status,
            stripe_customer_id=stripe_customer_id,
            stripe_subscription_id=stripe_subscription_id,
            updated_at=updated_at,
            user_id=user_id,
            idempotency_replayed=idempotency_replayed,
        )

        subscription_response.additional_properties = d
        return subscription_response

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
