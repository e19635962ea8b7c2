from enum import StrEnum


class ErrorCode(StrEnum):
    BAD_REQUEST = "bad_request"
    BILLING_BUSY = "billing_busy"
    BILLING_NOT_CONFIGURED = "billing_not_configured"
    BILLING_REQUEST_REJECTED = "billing_request_rejected"
    CONTRACT_EXPIRED = "contract_expired"
    DATABASE_BUSY = "database_busy"
    DATABASE_UNAVAILABLE = "database_unavailable"
    DUPLICATE_CLIENT_ORDER_ID = "duplicate_client_order_id"
    DUPLICATE_RESET = "duplicate_reset"
    FORBIDDEN = "forbidden"
    IDEMPOTENCY_IN_FLIGHT = "idempotency_in_flight"
    IDEMPOTENCY_KEY_BODY_MISMATCH = "idempotency_key_body_mismatch"
    IDEMPOTENCY_KEY_INVALID = "Idempotency-Key must be a UUID string"
    IDEMPOTENCY_KEY_REQUIRED = "idempotency_key_required"
    IDEMPOTENCY_PREVIOUS_FAILED = "idempotency_previous_failed"
    IDEMPOTENCY_STORE_UNAVAILABLE = "idempotency_store_unavailable"
    INSUFFICIENT_BUYING_POWER = "insufficient_buying_power"
    INSUFFICIENT_QTY = "insufficient_qty"
    INTERNAL = "internal"
    INVALID_BILLING_REQUEST = "invalid_billing_request"
    INVALID_BODY = "invalid_body"
    INVALID_DISPLAY_NAME = "invalid_display_name"
    INVALID_EMAIL = "invalid_email"
    INVALID_JSON = "invalid_json"
    INVALID_MARKETING_OPT_IN = "invalid_marketing_opt_in"
    INVALID_ORDER = "invalid_order"
    INVALID_PATH = "invalid_path"
    INVALID_PAYLOAD = "invalid_payload"
    INVALID_QUERY = "invalid_query"
    INVALID_QUOTE = "invalid_quote"
    INVALID_SIGNATURE = "invalid_signature"
    INVALID_SUBSCRIPTION = "invalid_subscription"
    INVALID_SYMBOL = "invalid_symbol"
    INVALID_TIME_ZONE = "invalid_time_zone"
    INVALID_TOKEN = "invalid_token"
    LIVE_TRADING_UNAVAILABLE = "live_trading_unavailable"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    NEW_ORDERS_DISABLED = "new_orders_disabled"
    NOT_FOUND = "not_found"
    ORDER_NOT_CANCELABLE = "order_not_cancelable"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    QUOTE_UNAVAILABLE = "quote_unavailable"
    RATE_LIMITED = "rate_limited"
    REQUEST_HEADERS_TOO_LARGE = "request_headers_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    STREAM_HISTORY_GONE = "stream_history_gone"
    STRIPE_TIMEOUT = "stripe_timeout"
    STRIPE_UNAVAILABLE = "stripe_unavailable"
    SUBSCRIPTION_ACTIVE = "subscription_active"
    TOO_MANY_CONNECTIONS = "too_many_connections"
    TOO_MANY_OPEN_ORDERS = "too_many_open_orders"
    UNAUTHENTICATED = "unauthenticated"
    UNCOVERED_SHORT_OPTION = "uncovered_short_option"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def _missing_(cls, value: object) -> "ErrorCode | None":
        # A value a newer server sends (a new status, type or code is an additive change):
        # kept as it came, not refused, so a deployed app keeps working. `is_known()` tells.
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = "UNKNOWN"
        member._value_ = value
        return member

    def is_known(self) -> bool:
        """Whether this value is one this client was generated with."""
        return self._value_ in type(self)._value2member_map_
