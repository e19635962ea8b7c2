from enum import StrEnum


class ResetAccountResponse422Error(StrEnum):
    DUPLICATE_RESET = "duplicate_reset"
    IDEMPOTENCY_KEY_BODY_MISMATCH = "idempotency_key_body_mismatch"
    INVALID_BODY = "invalid_body"

    def __str__(self) -> str:
        return str(self.value)
