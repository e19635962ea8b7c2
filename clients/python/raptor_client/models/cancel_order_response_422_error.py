from enum import StrEnum


class CancelOrderResponse422Error(StrEnum):
    ORDER_NOT_CANCELABLE = "order_not_cancelable"

    def __str__(self) -> str:
        return str(self.value)
