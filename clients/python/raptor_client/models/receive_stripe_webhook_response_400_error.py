from enum import StrEnum


class ReceiveStripeWebhookResponse400Error(StrEnum):
    INVALID_PAYLOAD = "invalid_payload"
    INVALID_SIGNATURE = "invalid_signature"

    def __str__(self) -> str:
        return str(self.value)
