from enum import StrEnum


class RollPositionResponse409Error(StrEnum):
    IDEMPOTENCY_IN_FLIGHT = "idempotency_in_flight"
    IDEMPOTENCY_PREVIOUS_FAILED = "idempotency_previous_failed"

    def __str__(self) -> str:
        return str(self.value)
