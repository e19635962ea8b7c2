from enum import StrEnum


class TimeInForce(StrEnum):
    DAY = "day"
    GTC = "gtc"

    def __str__(self) -> str:
        return str(self.value)
