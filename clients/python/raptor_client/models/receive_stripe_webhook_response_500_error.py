from enum import StrEnum


class ReceiveStripeWebhookResponse500Error(StrEnum):
    INTERNAL = "internal"

    def __str__(self) -> str:
        return str(self.value)
