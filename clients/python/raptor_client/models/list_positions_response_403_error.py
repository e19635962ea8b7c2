from enum import StrEnum


class ListPositionsResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"

    def __str__(self) -> str:
        return str(self.value)
