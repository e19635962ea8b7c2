from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.account_export_account_item import AccountExportAccountItem
    from ..models.account_export_audit_log_item import AccountExportAuditLogItem
    from ..models.account_export_billing_customer_type_0 import (
        AccountExportBillingCustomerType0,
    )
    from ..models.account_export_billing_subscriptions_item import (
        AccountExportBillingSubscriptionsItem,
    )
    from ..models.account_export_email_outbox_item import AccountExportEmailOutboxItem
    from ..models.account_export_fills_item import AccountExportFillsItem
    from ..models.account_export_idempotency_keys_item import (
        AccountExportIdempotencyKeysItem,
    )
    from ..models.account_export_order_legs_item import AccountExportOrderLegsItem
    from ..models.account_export_orders_item import AccountExportOrdersItem
    from ..models.account_export_positions_item import AccountExportPositionsItem
    from ..models.account_export_profile import AccountExportProfile
    from ..models.account_export_sessions_item import AccountExportSessionsItem
    from ..models.account_export_sign_in_links_item import AccountExportSignInLinksItem
    from ..models.account_export_user import AccountExportUser
    from ..models.account_export_waitlist_item import AccountExportWaitlistItem


T = TypeVar("T", bound="AccountExport")


@_attrs_define
class AccountExport:
    """`200` of `GET /api/account/export`: everything stored about the caller, by table (the rows
    as stored; secrets such as token hashes are left out). Documentation type: the handler
    builds the same members.

        Attributes:
            account (list[AccountExportAccountItem]): The paper account.
            audit_log (list[AccountExportAuditLogItem]): The caller's audit rows.
            billing_customer (AccountExportBillingCustomerType0 | None): The Stripe customer link, if any.
            billing_subscriptions (list[AccountExportBillingSubscriptionsItem]): The subscription mirror.
            email_outbox (list[AccountExportEmailOutboxItem]): Messages queued for the caller's address.
            fills (list[AccountExportFillsItem]): Every fill.
            idempotency_keys (list[AccountExportIdempotencyKeysItem]): Idempotency keys with their stored requests and
                answers.
            order_legs (list[AccountExportOrderLegsItem]): Every order leg.
            orders (list[AccountExportOrdersItem]): Every order, oldest first.
            positions (list[AccountExportPositionsItem]): Every position.
            profile (AccountExportProfile): The profile.
            sessions (list[AccountExportSessionsItem]): Sessions (without their token hashes).
            sign_in_links (list[AccountExportSignInLinksItem]): Sign-in links (without their token hashes).
            user (AccountExportUser): The user row.
            waitlist (list[AccountExportWaitlistItem]): Waitlist rows for the caller's address.
    """

    account: list[AccountExportAccountItem]
    audit_log: list[AccountExportAuditLogItem]
    billing_customer: AccountExportBillingCustomerType0 | None
    billing_subscriptions: list[AccountExportBillingSubscriptionsItem]
    email_outbox: list[AccountExportEmailOutboxItem]
    fills: list[AccountExportFillsItem]
    idempotency_keys: list[AccountExportIdempotencyKeysItem]
    order_legs: list[AccountExportOrderLegsItem]
    orders: list[AccountExportOrdersItem]
    positions: list[AccountExportPositionsItem]
    profile: AccountExportProfile
    sessions: list[AccountExportSessionsItem]
    sign_in_links: list[AccountExportSignInLinksItem]
    user: AccountExportUser
    waitlist: list[AccountExportWaitlistItem]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.account_export_billing_customer_type_0 import (
            AccountExportBillingCustomerType0,  # noqa: PLC0415
        )

        account = []
        for account_item_data in self.account:
            account_item = account_item_data.to_dict()
            account.append(account_item)

        audit_log = []
        for audit_log_item_data in self.audit_log:
            audit_log_item = audit_log_item_data.to_dict()
            audit_log.append(audit_log_item)

        billing_customer: dict[str, Any] | None
        if isinstance(self.billing_customer, AccountExportBillingCustomerType0):
            billing_customer = self.billing_customer.to_dict()
        else:
            billing_customer = self.billing_customer

        billing_subscriptions = []
        for billing_subscriptions_item_data in self.billing_subscriptions:
            billing_subscriptions_item = billing_subscriptions_item_data.to_dict()
            billing_subscriptions.append(billing_subscriptions_item)

        email_outbox = []
        for email_outbox_item_data in self.email_outbox:
            email_outbox_item = email_outbox_item_data.to_dict()
            email_outbox.append(email_outbox_item)

        fills = []
        for fills_item_data in self.fills:
            fills_item = fills_item_data.to_dict()
            fills.append(fills_item)

        idempotency_keys = []
        for idempotency_keys_item_data in self.idempotency_keys:
            idempotency_keys_item = idempotency_keys_item_data.to_dict()
            idempotency_keys.append(idempotency_keys_item)

        order_legs = []
        for order_legs_item_data in self.order_legs:
            order_legs_item = order_legs_item_data.to_dict()
            order_legs.append(order_legs_item)

        orders = []
        for orders_item_data in self.orders:
            orders_item = orders_item_data.to_dict()
            orders.append(orders_item)

        positions = []
        for positions_item_data in self.positions:
            positions_item = positions_item_data.to_dict()
            positions.append(positions_item)

        profile = self.profile.to_dict()

        sessions = []
        for sessions_item_data in self.sessions:
            sessions_item = sessions_item_data.to_dict()
            sessions.append(sessions_item)

        sign_in_links = []
        for sign_in_links_item_data in self.sign_in_links:
            sign_in_links_item = sign_in_links_item_data.to_dict()
            sign_in_links.append(sign_in_links_item)

        user = self.user.to_dict()

        waitlist = []
        for waitlist_item_data in self.waitlist:
            waitlist_item = waitlist_item_data.to_dict()
            waitlist.append(waitlist_item)

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "account": account,
                "audit_log": audit_log,
                "billing_customer": billing_customer,
                "billing_subscriptions": billing_subscriptions,
                "email_outbox": email_outbox,
                "fills": fills,
                "idempotency_keys": idempotency_keys,
                "order_legs": order_legs,
                "orders": orders,
                "positions": positions,
                "profile": profile,
                "sessions": sessions,
                "sign_in_links": sign_in_links,
                "user": user,
                "waitlist": waitlist,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.account_export_account_item import AccountExportAccountItem  # noqa: PLC0415
        from ..models.account_export_audit_log_item import AccountExportAuditLogItem  # noqa: PLC0415
        from ..models.account_export_billing_customer_type_0 import (
            AccountExportBillingCustomerType0,  # noqa: PLC0415
        )
        from ..models.account_export_billing_subscriptions_item import (
            AccountExportBillingSubscriptionsItem,  # noqa: PLC0415
        )
        from ..models.account_export_email_outbox_item import (
            AccountExportEmailOutboxItem,  # noqa: PLC0415
        )
        from ..models.account_export_fills_item import AccountExportFillsItem  # noqa: PLC0415
        from ..models.account_export_idempotency_keys_item import (
            AccountExportIdempotencyKeysItem,  # noqa: PLC0415
        )
        from ..models.account_export_order_legs_item import AccountExportOrderLegsItem  # noqa: PLC0415
        from ..models.account_export_orders_item import AccountExportOrdersItem  # noqa: PLC0415
        from ..models.account_export_positions_item import AccountExportPositionsItem  # noqa: PLC0415
        from ..models.account_export_profile import AccountExportProfile  # noqa: PLC0415
        from ..models.account_export_sessions_item import AccountExportSessionsItem  # noqa: PLC0415
        from ..models.account_export_sign_in_links_item import (
            AccountExportSignInLinksItem,  # noqa: PLC0415
        )
        from ..models.account_export_user import AccountExportUser  # noqa: PLC0415
        from ..models.account_export_waitlist_item import AccountExportWaitlistItem  # noqa: PLC0415

        d = dict(src_dict)
        account = []
        _account = d.pop("account")
        for account_item_data in _account:
            account_item = AccountExportAccountItem.from_dict(account_item_data)

            account.append(account_item)

        audit_log = []
        _audit_log = d.pop("audit_log")
        for audit_log_item_data in _audit_log:
            audit_log_item = AccountExportAuditLogItem.from_dict(audit_log_item_data)

            audit_log.append(audit_log_item)

        def _parse_billing_customer(
            data: object,
        ) -> AccountExportBillingCustomerType0 | None:
            if data is None:
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                billing_customer_type_0 = AccountExportBillingCustomerType0.from_dict(
                    data
                )

                return billing_customer_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(AccountExportBillingCustomerType0 | None, data)

        billing_customer = _parse_billing_customer(d.pop("billing_customer"))

        billing_subscriptions = []
        _billing_subscriptions = d.pop("billing_subscriptions")
        for billing_subscriptions_item_data in _billing_subscriptions:
            billing_subscriptions_item = (
                AccountExportBillingSubscriptionsItem.from_dict(
                    billing_subscriptions_item_data
                )
            )

            billing_subscriptions.append(billing_subscriptions_item)

        email_outbox = []
        _email_outbox = d.pop("email_outbox")
        for email_outbox_item_data in _email_outbox:
            email_outbox_item = AccountExportEmailOutboxItem.from_dict(
                email_outbox_item_data
            )

            email_outbox.append(email_outbox_item)

        fills = []
        _fills = d.pop("fills")
        for fills_item_data in _fills:
            fills_item = AccountExportFillsItem.from_dict(fills_item_data)

            fills.append(fills_item)

        idempotency_keys = []
        _idempotency_keys = d.pop("idempotency_keys")
        for idempotency_keys_item_data in _idempotency_keys:
            idempotency_keys_item = AccountExportIdempotencyKeysItem.from_dict(
                idempotency_keys_item_data
            )

            idempotency_keys.append(idempotency_keys_item)

        order_legs = []
        _order_legs = d.pop("order_legs")
        for order_legs_item_data in _order_legs:
            order_legs_item = AccountExportOrderLegsItem.from_dict(order_legs_item_data)

            order_legs.append(order_legs_item)

        orders = []
        _orders = d.pop("orders")
        for orders_item_data in _orders:
            orders_item = AccountExportOrdersItem.from_dict(orders_item_data)

            orders.append(orders_item)

        positions = []
        _positions = d.pop("positions")
        for positions_item_data in _positions:
            positions_item = AccountExportPositionsItem.from_dict(positions_item_data)

            positions.append(positions_item)

        profile = AccountExportProfile.from_dict(d.pop("profile"))

        sessions = []
        _sessions = d.pop("sessions")
        for sessions_item_data in _sessions:
            sessions_item = AccountExportSessionsItem.from_dict(sessions_item_data)

            sessions.append(sessions_item)

        sign_in_links = []
        _sign_in_links = d.pop("sign_in_links")
        for sign_in_links_item_data in _sign_in_links:
            sign_in_links_item = AccountExportSignInLinksItem.from_dict(
                sign_in_links_item_data
            )

            sign_in_links.append(sign_in_links_item)

        user = AccountExportUser.from_dict(d.pop("user"))

        waitlist = []
        _waitlist = d.pop("waitlist")
        for waitlist_item_data in _waitlist:
            waitlist_item = AccountExportWaitlistItem.from_dict(waitlist_item_data)

            waitlist.append(waitlist_item)

        account_export = cls(
            account=account,
            audit_log=audit_log,
            billing_customer=billing_customer,
            billing_subscriptions=billing_subscriptions,
            email_outbox=email_outbox,
            fills=fills,
            idempotency_keys=idempotency_keys,
            order_legs=order_legs,
            orders=orders,
            positions=positions,
            profile=profile,
            sessions=sessions,
            sign_in_links=sign_in_links,
            user=user,
            waitlist=waitlist,
        )

        account_export.additional_properties = d
        return account_export

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
