from enum import StrEnum


class ListOrdersResponse401Error(StrEnum):
    UNAUTHENTICATED = "unauthenticated"

    def __str__(self) -> str:
        return str(self.value)
