from enum import StrEnum


class CreateCheckoutSessionResponse502Error(StrEnum):
    STRIPE_UNAVAILABLE = "stripe_unavailable"

    def __str__(self) -> str:
        return str(self.value)
