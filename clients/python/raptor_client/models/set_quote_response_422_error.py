from enum import StrEnum


class SetQuoteResponse422Error(StrEnum):
    INVALID_BODY = "invalid_body"
    INVALID_QUOTE = "invalid_quote"
    INVALID_SYMBOL = "invalid_symbol"

    def __str__(self) -> str:
        return str(self.value)
