from enum import StrEnum


class CreateCheckoutSessionResponse504Error(StrEnum):
    STRIPE_TIMEOUT = "stripe_timeout"

    def __str__(self) -> str:
        return str(self.value)
