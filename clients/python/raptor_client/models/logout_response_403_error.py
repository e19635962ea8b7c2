from enum import StrEnum


class LogoutResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"

    def __str__(self) -> str:
        return str(self.value)
