from enum import StrEnum


class OrderType(StrEnum):
    LIMIT = "limit"
    MARKET = "market"

    def __str__(self) -> str:
        return str(self.value)
