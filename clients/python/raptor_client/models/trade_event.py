from enum import StrEnum


class TradeEvent(StrEnum):
    CANCELED = "canceled"
    EXPIRED = "expired"
    FILL = "fill"
    NEW = "new"
    PARTIAL_FILL = "partial_fill"
    REJECTED = "rejected"
    SETTLED = "settled"

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def _missing_(cls, value: object) -> "TradeEvent | None":
        # A value a newer server sends (a new status, type or code is an additive change):
        # kept as it came, not refused, so a deployed app keeps working. `is_known()` tells.
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = "UNKNOWN"
        member._value_ = value
        return member

    def is_known(self) -> bool:
        """Whether this value is one this client was generated with."""
        return self._value_ in type(self)._value2member_map_
