from enum import StrEnum


class RollPositionResponse401Error(StrEnum):
    UNAUTHENTICATED = "unauthenticated"

    def __str__(self) -> str:
        return str(self.value)
