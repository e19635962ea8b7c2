from enum import StrEnum


class EraseAccountResponse409Error(StrEnum):
    SUBSCRIPTION_ACTIVE = "subscription_active"

    def __str__(self) -> str:
        return str(self.value)
