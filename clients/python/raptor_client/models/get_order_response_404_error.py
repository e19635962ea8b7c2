from enum import StrEnum


class GetOrderResponse404Error(StrEnum):
    NOT_FOUND = "not_found"

    def __str__(self) -> str:
        return str(self.value)
