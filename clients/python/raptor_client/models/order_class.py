from enum import StrEnum


class OrderClass(StrEnum):
    MLEG = "mleg"
    SIMPLE = "simple"

    def __str__(self) -> str:
        return str(self.value)
