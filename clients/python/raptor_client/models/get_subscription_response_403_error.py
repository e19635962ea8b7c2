from enum import StrEnum


class GetSubscriptionResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"

    def __str__(self) -> str:
        return str(self.value)
