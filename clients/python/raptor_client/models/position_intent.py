from enum import StrEnum


class PositionIntent(StrEnum):
    BUY_TO_CLOSE = "buy_to_close"
    BUY_TO_OPEN = "buy_to_open"
    SELL_TO_CLOSE = "sell_to_close"
    SELL_TO_OPEN = "sell_to_open"

    def __str__(self) -> str:
        return str(self.value)
