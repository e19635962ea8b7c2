from enum import StrEnum


class CancelOrderResponse400Error(StrEnum):
    INVALID_PATH = "invalid_path"

    def __str__(self) -> str:
        return str(self.value)
