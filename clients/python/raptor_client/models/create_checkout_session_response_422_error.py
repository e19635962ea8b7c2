from enum import StrEnum


class CreateCheckoutSessionResponse422Error(StrEnum):
    BILLING_REQUEST_REJECTED = "billing_request_rejected"
    IDEMPOTENCY_KEY_BODY_MISMATCH = "idempotency_key_body_mismatch"
    INVALID_BILLING_REQUEST = "invalid_billing_request"
    INVALID_BODY = "invalid_body"

    def __str__(self) -> str:
        return str(self.value)
