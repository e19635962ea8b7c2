from enum import StrEnum


class ClosePositionResponse401Error(StrEnum):
    UNAUTHENTICATED = "unauthenticated"

    def __str__(self) -> str:
        return str(self.value)
