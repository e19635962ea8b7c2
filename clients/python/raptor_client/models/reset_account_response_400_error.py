from enum import StrEnum


class ResetAccountResponse400Error(StrEnum):
    IDEMPOTENCY_KEY_INVALID = "Idempotency-Key must be a UUID string"
    IDEMPOTENCY_KEY_REQUIRED = "idempotency_key_required"
    INVALID_BODY = "invalid_body"
    INVALID_JSON = "invalid_json"

    def __str__(self) -> str:
        return str(self.value)
