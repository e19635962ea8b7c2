from enum import StrEnum


class CreatePortalSessionResponse401Error(StrEnum):
    UNAUTHENTICATED = "unauthenticated"

    def __str__(self) -> str:
        return str(self.value)
