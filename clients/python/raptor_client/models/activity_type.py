from enum import StrEnum


class ActivityType(StrEnum):
    CANCEL = "cancel"
    EXPIRY = "expiry"
    FILL = "fill"
    RESET = "reset"
    SETTLEMENT = "settlement"

    def __str__(self) -> str:
        return str(self.value)
