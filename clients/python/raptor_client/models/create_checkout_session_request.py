from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define

T = TypeVar("T", bound="CreateCheckoutSessionRequest")


@_attrs_define
class CreateCheckoutSessionRequest:
    """`POST /api/billing/checkout-sessions`.

    Attributes:
        cancel_url (str): Where Stripe sends the user when they go back (an absolute http or https URL, at most
            2048 characters). Example: https://app.example.com/billing.
        price_id (str): The Stripe price to subscribe to. Example: price_1PremiumMonthly.
        success_url (str): Where Stripe sends the user after paying (an absolute http or https URL, at most 2048
            characters). Example: https://app.example.com/billing/success.
    """

    cancel_url: str
    price_id: str
    success_url: str

    def to_dict(self) -> dict[str, Any]:
        cancel_url = self.cancel_url

        price_id = self.price_id

        success_url = self.success_url

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "cancel_url": cancel_url,
                "price_id": price_id,
                "success_url": success_url,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        cancel_url = d.pop("cancel_url")

        price_id = d.pop("price_id")

        success_url = d.pop("success_url")

        create_checkout_session_request = cls(
            cancel_url=cancel_url,
            price_id=price_id,
            success_url=success_url,
        )

        return create_checkout_session_request
