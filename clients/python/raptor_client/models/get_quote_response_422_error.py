from enum import StrEnum


class GetQuoteResponse422Error(StrEnum):
    QUOTE_UNAVAILABLE = "quote_unavailable"

    def __str__(self) -> str:
        return str(self.value)
