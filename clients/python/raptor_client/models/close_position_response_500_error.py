from enum import StrEnum


class ClosePositionResponse500Error(StrEnum):
    INTERNAL = "internal"

    def __str__(self) -> str:
        return str(self.value)
