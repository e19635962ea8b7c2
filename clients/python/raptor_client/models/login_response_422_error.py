from enum import StrEnum


class LoginResponse422Error(StrEnum):
    INVALID_BODY = "invalid_body"
    INVALID_EMAIL = "invalid_email"

    def __str__(self) -> str:
        return str(self.value)
