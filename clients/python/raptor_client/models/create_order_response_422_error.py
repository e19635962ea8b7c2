from enum import StrEnum


class CreateOrderResponse422Error(StrEnum):
    CONTRACT_EXPIRED = "contract_expired"
    DUPLICATE_CLIENT_ORDER_ID = "duplicate_client_order_id"
    IDEMPOTENCY_KEY_BODY_MISMATCH = "idempotency_key_body_mismatch"
    INVALID_BODY = "invalid_body"
    INVALID_ORDER = "invalid_order"
    INVALID_SYMBOL = "invalid_symbol"
    QUOTE_UNAVAILABLE = "quote_unavailable"
    TOO_MANY_OPEN_ORDERS = "too_many_open_orders"

    def __str__(self) -> str:
        return str(self.value)
