"""Contains all the data models used in inputs/outputs"""

from .accepted_response import AcceptedResponse
from .account_export import AccountExport
from .account_export_account_item import AccountExportAccountItem
from .account_export_audit_log_item import AccountExportAuditLogItem
from .account_export_billing_customer_type_0 import AccountExportBillingCustomerType0
from .account_export_billing_subscriptions_item import (
    AccountExportBillingSubscriptionsItem,
)
from .account_export_email_outbox_item import AccountExportEmailOutboxItem
from .account_export_fills_item import AccountExportFillsItem
from .account_export_idempotency_keys_item import AccountExportIdempotencyKeysItem
from .account_export_order_legs_item import AccountExportOrderLegsItem
from .account_export_orders_item import AccountExportOrdersItem
from .account_export_positions_item import AccountExportPositionsItem
from .account_export_profile import AccountExportProfile
from .account_export_sessions_item import AccountExportSessionsItem
from .account_export_sign_in_links_item import AccountExportSignInLinksItem
from .account_export_user import AccountExportUser
from .account_export_waitlist_item import AccountExportWaitlistItem
from .account_mode import AccountMode
from .account_response import AccountResponse
from .activity_list_response import ActivityListResponse
from .activity_response import ActivityResponse
from .activity_type import ActivityType
from .audit_entry import AuditEntry
from .audit_entry_context import AuditEntryContext
from .audit_list_response import AuditListResponse
from .cancel_subscription_request import CancelSubscriptionRequest
from .checkout_session_response import CheckoutSessionResponse
from .close_position_request import ClosePositionRequest
from .create_checkout_session_request import CreateCheckoutSessionRequest
from .create_order_request import CreateOrderRequest
from .create_portal_session_request import CreatePortalSessionRequest
from .currency import Currency
from .email_request import EmailRequest
from .erasure_response import ErasureResponse
from .error_body import ErrorBody
from .error_code import ErrorCode
from .flag_response import FlagResponse
from .health_response import HealthResponse
from .leg_request import LegRequest
from .leg_response import LegResponse
from .market_quote_response import MarketQuoteResponse
from .mirror_sync_request import MirrorSyncRequest
from .order_class import OrderClass
from .order_list_response import OrderListResponse
from .order_list_status import OrderListStatus
from .order_purpose import OrderPurpose
from .order_response import OrderResponse
from .order_status import OrderStatus
from .order_type import OrderType
from .portal_session_response import PortalSessionResponse
from .position_intent import PositionIntent
from .position_response import PositionResponse
from .position_side import PositionSide
from .profile_patch import ProfilePatch
from .profile_response import ProfileResponse
from .quote_response import QuoteResponse
from .readiness_checks import ReadinessChecks
from .receive_stripe_webhook_body import ReceiveStripeWebhookBody
from .reset_account_request import ResetAccountRequest
from .retry import Retry
from .roll_request import RollRequest
from .session_response import SessionResponse
from .set_flag_request import SetFlagRequest
from .set_quote_request import SetQuoteRequest
from .side import Side
from .subscription_response import SubscriptionResponse
from .time_in_force import TimeInForce
from .trade_event import TradeEvent
from .trade_update import TradeUpdate
from .unstored_replay import UnstoredReplay
from .verify_request import VerifyRequest
from .waitlist_signup_request import WaitlistSignupRequest
from .waitlist_signup_response import WaitlistSignupResponse
from .webhook_ack import WebhookAck

__all__ = (
    "AcceptedResponse",
    "AccountExport",
    "AccountExportAccountItem",
    "AccountExportAuditLogItem",
    "AccountExportBillingCustomerType0",
    "AccountExportBillingSubscriptionsItem",
    "AccountExportEmailOutboxItem",
    "AccountExportFillsItem",
    "AccountExportIdempotencyKeysItem",
    "AccountExportOrderLegsItem",
    "AccountExportOrdersItem",
    "AccountExportPositionsItem",
    "AccountExportProfile",
    "AccountExportSessionsItem",
    "AccountExportSignInLinksItem",
    "AccountExportUser",
    "AccountExportWaitlistItem",
    "AccountMode",
    "AccountResponse",
    "ActivityListResponse",
    "ActivityResponse",
    "ActivityType",
    "AuditEntry",
    "AuditEntryContext",
    "AuditListResponse",
    "CancelSubscriptionRequest",
    "CheckoutSessionResponse",
    "ClosePositionRequest",
    "CreateCheckoutSessionRequest",
    "CreateOrderRequest",
    "CreatePortalSessionRequest",
    "Currency",
    "EmailRequest",
    "ErasureResponse",
    "ErrorBody",
    "ErrorCode",
    "FlagResponse",
    "HealthResponse",
    "LegRequest",
    "LegResponse",
    "MarketQuoteResponse",
    "MirrorSyncRequest",
    "OrderClass",
    "OrderListResponse",
    "OrderListStatus",
    "OrderPurpose",
    "OrderResponse",
    "OrderStatus",
    "OrderType",
    "PortalSessionResponse",
    "PositionIntent",
    "PositionResponse",
    "PositionSide",
    "ProfilePatch",
    "ProfileResponse",
    "QuoteResponse",
    "ReadinessChecks",
    "ReceiveStripeWebhookBody",
    "ResetAccountRequest",
    "Retry",
    "RollRequest",
    "SessionResponse",
    "SetFlagRequest",
    "SetQuoteRequest",
    "Side",
    "SubscriptionResponse",
    "TimeInForce",
    "TradeEvent",
    "TradeUpdate",
    "UnstoredReplay",
    "VerifyRequest",
    "WaitlistSignupRequest",
    "WaitlistSignupResponse",
    "WebhookAck",
)
