from enum import StrEnum


class OrderListStatus(StrEnum):
    ALL = "all"
    CLOSED = "closed"
    OPEN = "open"

    def __str__(self) -> str:
        return str(self.value)
