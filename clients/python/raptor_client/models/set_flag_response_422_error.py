from enum import StrEnum


class SetFlagResponse422Error(StrEnum):
    INVALID_BODY = "invalid_body"

    def __str__(self) -> str:
        return str(self.value)
