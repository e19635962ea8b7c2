-- Principals (users, bearer tokens), the audit log and run-time feature flags.

CREATE TABLE users (
    id               integer     GENERATED ALWAYS AS IDENTITY CONSTRAINT users_pkey PRIMARY KEY,
    email            text        NOT NULL,
    role             text        NOT NULL DEFAULT 'user'
                                 CONSTRAINT users_role_check CHECK (role IN ('user', 'operator')),
    display_name     text,
    time_zone        text,
    marketing_opt_in boolean     NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX uix_users_email_ci ON users (lower(email));

-- Bearer tokens. Only the SHA-256 of a token is stored; the token itself is shown once.
-- A session token belongs to a user; a service token has no user (idempotency scope NULL).
CREATE TABLE api_tokens (
    id           bigint      GENERATED ALWAYS AS IDENTITY CONSTRAINT api_tokens_pkey PRIMARY KEY,
    token_hash   bytea       NOT NULL CONSTRAINT uq_api_tokens_token_hash UNIQUE,
    kind         text        NOT NULL CONSTRAINT api_tokens_kind_check CHECK (kind IN ('session', 'service')),
    user_id      integer     CONSTRAINT api_tokens_user_id_fkey REFERENCES users (id) ON DELETE CASCADE,
    service_name text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz,
    CONSTRAINT api_tokens_principal_check CHECK (
        (kind = 'session' AND user_id IS NOT NULL AND service_name IS NULL)
        OR (kind = 'service' AND user_id IS NULL AND service_name IS NOT NULL)
    )
);
CREATE INDEX idx_api_tokens_user ON api_tokens (user_id) WHERE user_id IS NOT NULL;

-- Append-only record of every state change. No foreign key on user_id: the log must accept rows
-- for principals without a user, and GDPR erasure deletes a user's rows explicitly.
CREATE TABLE audit_log (
    id         bigint      GENERATED ALWAYS AS IDENTITY CONSTRAINT audit_log_pkey PRIMARY KEY,
    user_id    integer,
    action     text        NOT NULL,
    context    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    request_id text,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_audit_log_user ON audit_log (user_id, id) WHERE user_id IS NOT NULL;
CREATE INDEX idx_audit_log_action ON audit_log (action, id);

-- Run-time overrides of environment flags (e.g. FLAG_IDEMPOTENCY_MIDDLEWARE). A missing row means
-- "use the environment default".
CREATE TABLE feature_flags (
    name       text        CONSTRAINT feature_flags_pkey PRIMARY KEY,
    enabled    boolean     NOT NULL,
    updated_by integer,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The paper trading account created with every user.
CREATE TABLE paper_accounts (
    user_id      integer       CONSTRAINT paper_accounts_pkey PRIMARY KEY
                               CONSTRAINT paper_accounts_user_id_fkey REFERENCES users (id) ON DELETE CASCADE,
    mode         text          NOT NULL DEFAULT 'paper'
                               CONSTRAINT paper_accounts_mode_check CHECK (mode IN ('paper', 'live')),
    cash         numeric(20,2) NOT NULL CONSTRAINT paper_accounts_cash_check CHECK (cash >= 0),
    realized_pnl numeric(20,2) NOT NULL DEFAULT 0,
    created_at   timestamptz   NOT NULL DEFAULT now(),
    updated_at   timestamptz   NOT NULL DEFAULT now()
);
