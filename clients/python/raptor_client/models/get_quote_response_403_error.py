from enum import StrEnum


class GetQuoteResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"

    def __str__(self) -> str:
        return str(self.value)
