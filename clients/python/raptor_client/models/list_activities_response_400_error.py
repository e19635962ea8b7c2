from enum import StrEnum


class ListActivitiesResponse400Error(StrEnum):
    INVALID_QUERY = "invalid_query"

    def __str__(self) -> str:
        return str(self.value)
