from enum import StrEnum


class GetOrderResponse431Error(StrEnum):
    REQUEST_HEADERS_TOO_LARGE = "request_headers_too_large"

    def __str__(self) -> str:
        return str(self.value)
