from enum import StrEnum


class ListActivitiesResponse500Error(StrEnum):
    INTERNAL = "internal"

    def __str__(self) -> str:
        return str(self.value)
