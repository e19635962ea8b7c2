from enum import StrEnum


class Currency(StrEnum):
    USD = "USD"

    def __str__(self) -> str:
        return str(self.value)
