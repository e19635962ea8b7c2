from enum import StrEnum


class AccountMode(StrEnum):
    LIVE = "live"
    PAPER = "paper"

    def __str__(self) -> str:
        return str(self.value)
