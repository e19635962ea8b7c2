from enum import StrEnum


class GetOrderByClientOrderIdResponse500Error(StrEnum):
    INTERNAL = "internal"

    def __str__(self) -> str:
        return str(self.value)
