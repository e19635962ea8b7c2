from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.create_portal_session_response_504_error import (
    CreatePortalSessionResponse504Error,
)
from ..models.order_status import OrderStatus
from ..models.retry import Retry
from ..types import UNSET, Unset

T = TypeVar("T", bound="CreatePortalSessionResponse504")


@_attrs_define
class CreatePortalSessionResponse504:
    """
    Attributes:
        detail (str): Same as `message`.
        error (CreatePortalSessionResponse504Error): Every error code; `/docs/errors#<code>` explains each (the
            malformed-key sentence's section is `idempotency_key_invalid`).
        message (str): Human-readable explanation.
        retry (Retry): What a client should do about an error (every error body's `retry` member, a property of its
            code): `same_key`, retry with the same `Idempotency-Key` and body, after `Retry-After` when
            present; `new_key`, the key is spent and nothing was executed, so trying again is a new
            operation with a new key; `no`, retrying does not change the answer.
        status (int): The HTTP status. Example: 403.
        title (str): The HTTP status's reason phrase. Example: Forbidden.
        type_ (str): Where the code is explained: `/docs/errors#<code>`. Example:
            /docs/errors#insufficient_buying_power.
        available (str | Unset): `insufficient_qty`: the quantity the position has.
        buying_power (str | Unset): `insufficient_buying_power`: the account's buying power.
        cost_basis (str | Unset): `insufficient_buying_power`: what the order would reserve.
        idempotency_replayed (bool | Unset): Present (`true`) only on a replay of a stored answer.
        instance (str | Unset): This occurrence: `urn:request:<x-request-id>`. Example:
            urn:request:5f0c2c3e-3c41-4a0e-9a51-7a7c1d1f6a11.
        order_status (OrderStatus | Unset): An order's status: `new` (open, resting), `filled`, `canceled`, `expired`.
        requested (str | Unset): `insufficient_qty`: the quantity the order asked for.
        retry_after_ms (int | Unset): `idempotency_in_flight`: milliseconds until the first attempt may be taken over.
        symbol (str | Unset): `insufficient_qty`, `quote_unavailable`, `contract_expired`, `uncovered_short_option`:
            the symbol concerned.
    """

    detail: str
    error: CreatePortalSessionResponse504Error
    message: str
    retry: Retry
    status: int
    title: str
    type_: str
    available: str | Unset = UNSET
    buying_power: str | Unset = UNSET
    cost_basis: str | Unset = UNSET
    idempotency_replayed: bool | Unset = UNSET
    instance: str | Unset = UNSET
    order_status: OrderStatus | Unset = UNSET
    requested: str | Unset = UNSET
    retry_after_ms: int | Unset = UNSET
    symbol: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        detail = self.detail

        error = self.error.value

        message = self.message

        retry = self.retry.value

        status = self.status

        title = self.title

        type_ = self.type_

        available = self.available

        buying_power = self.buying_power

        cost_basis = self.cost_basis

        idempotency_replayed = self.idempotency_replayed

        instance = self.instance

        order_status: str | Unset = UNSET
        if not isinstance(self.order_status, Unset):
            order_status = self.order_status.value

        requested = self.requested

        retry_after_ms = self.retry_after_ms

        symbol = self.symbol

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "detail": detail,
                "error": error,
                "message": message,
                "retry": retry,
                "status": status,
                "title": title,
                "type": type_,
            }
        )
        if available is not UNSET:
            field_dict["available"] = available
        if buying_power is not UNSET:
            field_dict["buying_power"] = buying_power
        if cost_basis is not UNSET:
            field_dict["cost_basis"] = cost_basis
        if idempotency_replayed is not UNSET:
            field_dict["idempotency_replayed"] = idempotency_replayed
        if instance is not UNSET:
            field_dict["instance"] = instance
        if order_status is not UNSET:
            field_dict["order_status"] = order_status
        if requested is not UNSET:
            field_dict["requested"] = requested
        if retry_after_ms is not UNSET:
            field_dict["retry_after_ms"] = retry_after_ms
        if symbol is not UNSET:
            field_dict["symbol"] = symbol

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        detail = d.pop("detail")

        error = CreatePortalSessionResponse504Error(d.pop("error"))

        message = d.pop("message")

        retry = Retry(d.pop("retry"))

        status = d.pop("status")

        title = d.pop("title")

        type_ = d.pop("type")

        available = d.pop("available", UNSET)

        buying_power = d.pop("buying_power", UNSET)

        cost_basis = d.pop("cost_basis", UNSET)

        idempotency_replayed = d.pop("idempotency_replayed", UNSET)

        instance = d.pop("instance", UNSET)

        _order_status = d.pop("order_status", UNSET)
        order_status: OrderStatus | Unset
        if isinstance(_order_status, Unset):
            order_status = UNSET
        else:
            order_status = OrderStatus(_order_status)

        requested = d.pop("requested", UNSET)

        retry_after_ms = d.pop("retry_after_ms", UNSET)

        symbol = d.pop("symbol", UNSET)

        create_portal_session_response_504 = cls(
            detail=detail,
            error=error,
            message=message,
            retry=retry,
            status=status,
            title=title,
            type_=type_,
            available=available,
            buying_power=buying_power,
            cost_basis=cost_basis,
            idempotency_replayed=idempotency_replayed,
            instance=instance,
            order_status=order_status,
            requested=requested,
            retry_after_ms=retry_after_ms,
            symbol=symbol,
        )

        create_portal_session_response_504.additional_properties = d
        return create_portal_session_response_504

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
