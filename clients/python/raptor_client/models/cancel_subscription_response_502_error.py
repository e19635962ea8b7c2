from enum import StrEnum


class CancelSubscriptionResponse502Error(StrEnum):
    STRIPE_UNAVAILABLE = "stripe_unavailable"

    def __str__(self) -> str:
        return str(self.value)
