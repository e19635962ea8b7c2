from enum import StrEnum


class SyncSubscriptionMirrorResponse422Error(StrEnum):
    INVALID_BODY = "invalid_body"
    INVALID_SUBSCRIPTION = "invalid_subscription"

    def __str__(self) -> str:
        return str(self.value)
