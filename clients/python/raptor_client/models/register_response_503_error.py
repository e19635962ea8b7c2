from enum import StrEnum


class RegisterResponse503Error(StrEnum):
    REQUEST_TIMEOUT = "request_timeout"
    TOO_MANY_CONNECTIONS = "too_many_connections"

    def __str__(self) -> str:
        return str(self.value)
