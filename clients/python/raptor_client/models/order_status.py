from enum import StrEnum


class OrderStatus(StrEnum):
    CANCELED = "canceled"
    EXPIRED = "expired"
    FILLED = "filled"
    NEW = "new"

    def __str__(self) -> str:
        return str(self.value)
