from enum import StrEnum


class UpdateProfileResponse422Error(StrEnum):
    IDEMPOTENCY_KEY_BODY_MISMATCH = "idempotency_key_body_mismatch"
    INVALID_BODY = "invalid_body"
    INVALID_DISPLAY_NAME = "invalid_display_name"
    INVALID_MARKETING_OPT_IN = "invalid_marketing_opt_in"
    INVALID_TIME_ZONE = "invalid_time_zone"

    def __str__(self) -> str:
        return str(self.value)
