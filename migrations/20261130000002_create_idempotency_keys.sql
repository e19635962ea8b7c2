-- ADR-0138 idempotency store, as decided in CONTRACT.md section 4.
-- Differences from the ADR: the unique constraint is NULLS NOT DISTINCT (two service calls with
-- scope_user_id NULL and one key must conflict), `attempt` fences completion to the claiming
-- attempt, `response_headers` keeps the replayed Content-Type and Location.

CREATE TABLE idempotency_keys (
    id               bigserial   CONSTRAINT idempotency_keys_pkey PRIMARY KEY,
    idem_key         text        NOT NULL,
    scope_user_id    integer     CONSTRAINT idempotency_keys_scope_user_id_fkey
                                 REFERENCES users (id) ON DELETE CASCADE,
    scope_endpoint   text        NOT NULL,
    request_hash     text        NOT NULL,
    response_code    smallint,
    response_body    jsonb,
    response_headers jsonb,
    status           text        NOT NULL DEFAULT 'in_flight'
                                 CONSTRAINT idempotency_keys_status_check
                                 CHECK (status IN ('in_flight', 'completed', 'failed')),
    attempt          uuid        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    locked_at        timestamptz NOT NULL DEFAULT now(),
    completed_at     timestamptz,
    expires_at       timestamptz NOT NULL,
    CONSTRAINT uq_idem_key_user_endpoint
        UNIQUE NULLS NOT DISTINCT (idem_key, scope_user_id, scope_endpoint)
);

CREATE INDEX idx_idem_keys_expires
    ON idempotency_keys (expires_at)
    WHERE status IN ('completed', 'failed');

CREATE INDEX idx_idem_keys_user
    ON idempotency_keys (scope_user_id)
    WHERE scope_user_id IS NOT NULL;
