from enum import StrEnum


class JoinWaitlistResponse500Error(StrEnum):
    INTERNAL = "internal"

    def __str__(self) -> str:
        return str(self.value)
