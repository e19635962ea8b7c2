from enum import StrEnum


class CreatePortalSessionResponse503Error(StrEnum):
    BILLING_BUSY = "billing_busy"
    BILLING_NOT_CONFIGURED = "billing_not_configured"
    DATABASE_BUSY = "database_busy"
    DATABASE_UNAVAILABLE = "database_unavailable"
    IDEMPOTENCY_STORE_UNAVAILABLE = "idempotency_store_unavailable"
    REQUEST_TIMEOUT = "request_timeout"
    STRIPE_UNAVAILABLE = "stripe_unavailable"
    TOO_MANY_CONNECTIONS = "too_many_connections"

    def __str__(self) -> str:
        return str(self.value)
