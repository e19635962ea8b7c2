from enum import StrEnum


class LogoutResponse503Error(StrEnum):
    DATABASE_BUSY = "database_busy"
    DATABASE_UNAVAILABLE = "database_unavailable"
    REQUEST_TIMEOUT = "request_timeout"
    TOO_MANY_CONNECTIONS = "too_many_connections"

    def __str__(self) -> str:
        return str(self.value)
