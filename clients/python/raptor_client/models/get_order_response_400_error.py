from enum import StrEnum


class GetOrderResponse400Error(StrEnum):
    INVALID_PATH = "invalid_path"

    def __str__(self) -> str:
        return str(self.value)
