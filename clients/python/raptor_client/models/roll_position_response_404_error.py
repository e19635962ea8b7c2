from enum import StrEnum


class RollPositionResponse404Error(StrEnum):
    NOT_FOUND = "not_found"
    QUOTE_UNAVAILABLE = "quote_unavailable"

    def __str__(self) -> str:
        return str(self.value)
