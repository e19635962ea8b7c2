from enum import StrEnum


class SetFlagResponse400Error(StrEnum):
    INVALID_BODY = "invalid_body"
    INVALID_JSON = "invalid_json"

    def __str__(self) -> str:
        return str(self.value)
