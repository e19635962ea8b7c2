from enum import StrEnum


class ClosePositionResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"
    INSUFFICIENT_BUYING_POWER = "insufficient_buying_power"
    INSUFFICIENT_QTY = "insufficient_qty"
    LIVE_TRADING_UNAVAILABLE = "live_trading_unavailable"
    UNCOVERED_SHORT_OPTION = "uncovered_short_option"

    def __str__(self) -> str:
        return str(self.value)
