from enum import StrEnum


class ResetAccountResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"
    LIVE_TRADING_UNAVAILABLE = "live_trading_unavailable"

    def __str__(self) -> str:
        return str(self.value)
