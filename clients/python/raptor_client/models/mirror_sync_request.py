from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="MirrorSyncRequest")


@_attrs_define
class MirrorSyncRequest:
    """`POST /api/billing/mirror-sync`: one subscription's state, as an operator or a service read it
    from Stripe. Upserted by `stripe_subscription_id`.

        Attributes:
            status (str): One of Stripe's statuses: `incomplete`, `incomplete_expired`, `trialing`, `active`,
                `past_due`, `canceled`, `unpaid`, `paused`. Example: active.
            stripe_customer_id (str): `cus_…`. Example: cus_R4t5Y6.
            stripe_subscription_id (str): `sub_…`. Example: sub_1Q2w3E.
            cancel_at_period_end (bool | Unset): Cancels when the period ends.
            canceled_at (datetime.datetime | None | Unset): When it was canceled (RFC 3339).
            current_period_end (datetime.datetime | None | Unset): End of the paid period (RFC 3339).
            price_id (None | str | Unset): The subscribed price.
            user_id (int | None | Unset): Our user; when absent, resolved from `billing_customers` by the customer id.
    """

    status: str
    stripe_customer_id: str
    stripe_subscription_id: str
    cancel_at_period_end: bool | Unset = UNSET
    canceled_at: datetime.datetime | None | Unset = UNSET
    current_period_end: datetime.datetime | None | Unset = UNSET
    price_id: None | str | Unset = UNSET
    user_id: int | None | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        status = self.status

        stripe_customer_id = self.stripe_customer_id

        stripe_subscription_id = self.stripe_subscription_id

        cancel_at_period_end = self.cancel_at_period_end

        canceled_at: None | str | Unset
        if isinstance(self.canceled_at, Unset):
            canceled_at = UNSET
        elif isinstance(self.canceled_at, datetime.datetime):
            canceled_at = self.canceled_at.isoformat()
        else:
            canceled_at = self.canceled_at

        current_period_end: None | str | Unset
        if isinstance(self.current_period_end, Unset):
            current_period_end = UNSET
        elif isinstance(self.current_period_end, datetime.datetime):
            current_period_end = self.current_period_end.isoformat()
        else:
            current_period_end = self.current_period_end

        price_id: None | str | Unset
        if isinstance(self.price_id, Unset):
            price_id = UNSET
        else:
            price_id = self.price_id

        user_id: int | None | Unset
        if isinstance(self.user_id, Unset):
            user_id = UNSET
        else:
            user_id = self.user_id

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "status": status,
                "stripe_customer_id": stripe_customer_id,
                "stripe_subscription_id": stripe_subscription_id,
            }
        )
        if cancel_at_period_end is not UNSET:
            field_dict["cancel_at_period_end"] = cancel_at_period_end
        if canceled_at is not UNSET:
            field_dict["canceled_at"] = canceled_at
        if current_period_end is not UNSET:
            field_dict["current_period_end"] = current_period_end
        if price_id is not UNSET:
            field_dict["price_id"] = price_id
        if user_id is not UNSET:
            field_dict["user_id"] = user_id

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        status = d.pop("status")

        stripe_customer_id = d.pop("stripe_customer_id")

        stripe_subscription_id = d.pop("stripe_subscription_id")

        cancel_at_period_end = d.pop("cancel_at_period_end", UNSET)

        def _parse_canceled_at(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                canceled_at_type_0 = datetime.datetime.fromisoformat(data)

                return canceled_at_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        canceled_at = _parse_canceled_at(d.pop("canceled_at", UNSET))

        def _parse_current_period_end(data: object) -> datetime.datetime | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                current_period_end_type_0 = datetime.datetime.fromisoformat(data)

                return current_period_end_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(datetime.datetime | None | Unset, data)

        current_period_end = _parse_current_period_end(
            d.pop("current_period_end", UNSET)
        )

        def _parse_price_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        price_id = _parse_price_id(d.pop("price_id", UNSET))

        def _parse_user_id(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        user_id = _parse_user_id(d.pop("user_id", UNSET))

        mirror_sync_request = cls(
            status=status,
            stripe_customer_id=stripe_customer_id,
            stripe_subscription_id=stripe_subscription_id,
            cancel_at_period_end=cancel_at_period_end,
            canceled_at=canceled_at,
            current_period_end=current_period_end,
            price_id=price_id,
            user_id=user_id,
        )

        return mirror_sync_request
