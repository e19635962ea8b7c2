from enum import StrEnum


class ActivityType(StrEnum):
    CANCEL = "cancel"
    EXPIRY = "expiry"
    FILL = "fill"
    ORDER_EXPIRY = "order_expiry"
    RESET = "reset"
    SETTLEMENT = "settlement"

    def __str__(self) -> str:
        return str(self.value)
