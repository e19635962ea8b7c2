from enum import StrEnum


class Retry(StrEnum):
    NEW_KEY = "new_key"
    NO = "no"
    SAME_KEY = "same_key"

    def __str__(self) -> str:
        return str(self.value)
