from enum import StrEnum


class GetPositionResponse403Error(StrEnum):
    FORBIDDEN = "forbidden"

    def __str__(self) -> str:
        return str(self.value)
