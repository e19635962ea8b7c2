from enum import StrEnum


class GetMetricsResponse503Error(StrEnum):
    TOO_MANY_CONNECTIONS = "too_many_connections"

    def __str__(self) -> str:
        return str(self.value)
