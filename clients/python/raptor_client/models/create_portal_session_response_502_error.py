from enum import StrEnum


class CreatePortalSessionResponse502Error(StrEnum):
    STRIPE_UNAVAILABLE = "stripe_unavailable"

    def __str__(self) -> str:
        return str(self.value)
