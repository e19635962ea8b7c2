from enum import StrEnum


class CreateOrderResponse404Error(StrEnum):
    QUOTE_UNAVAILABLE = "quote_unavailable"

    def __str__(self) -> str:
        return str(self.value)
