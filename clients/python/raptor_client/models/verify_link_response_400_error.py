from enum import StrEnum


class VerifyLinkResponse400Error(StrEnum):
    INVALID_BODY = "invalid_body"
    INVALID_JSON = "invalid_json"
    INVALID_TOKEN = "invalid_token"

    def __str__(self) -> str:
        return str(self.value)
