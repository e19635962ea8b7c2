from enum import StrEnum


class OrderPurpose(StrEnum):
    CLOSE = "close"
    ORDER = "order"
    ROLL = "roll"

    def __str__(self) -> str:
        return str(self.value)
