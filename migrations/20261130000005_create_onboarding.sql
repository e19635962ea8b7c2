-- Onboarding: email magic-link sign-up and login, the mailer's outbox, the waitlist.

-- Single-use links (sign-up verification and login). Only the SHA-256 of the token is stored;
-- the token itself travels once, in the outbox message. A verification creates the user the
-- first time (register) and a session every time it is accepted.
CREATE TABLE auth_link_tokens (
    id          bigint      GENERATED ALWAYS AS IDENTITY CONSTRAINT auth_link_tokens_pkey PRIMARY KEY,
    token_hash  bytea       NOT NULL CONSTRAINT uq_auth_link_tokens_token_hash UNIQUE,
    purpose     text        NOT NULL CONSTRAINT auth_link_tokens_purpose_check
                            CHECK (purpose IN ('register', 'login')),
    email       text        NOT NULL,
    user_id     integer     CONSTRAINT auth_link_tokens_user_id_fkey
                            REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    used_at     timestamptz
);
CREATE INDEX idx_auth_link_tokens_email ON auth_link_tokens (lower(email));
CREATE INDEX idx_auth_link_tokens_expires ON auth_link_tokens (expires_at);

-- The hand-off point to a mailer (out of scope): one row per message to send. It holds the
-- link's token in clear, because the mailer must send it; rows are personal data (GDPR).
CREATE TABLE email_outbox (
    id         bigint      GENERATED ALWAYS AS IDENTITY CONSTRAINT email_outbox_pkey PRIMARY KEY,
    user_id    integer     CONSTRAINT email_outbox_user_id_fkey REFERENCES users (id) ON DELETE CASCADE,
    email      text        NOT NULL,
    kind       text        NOT NULL CONSTRAINT email_outbox_kind_check
                           CHECK (kind IN ('verify_email', 'login_link')),
    subject    text        NOT NULL,
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
CREATE INDEX idx_email_outbox_unsent ON email_outbox (id) WHERE sent_at IS NULL;
CREATE INDEX idx_email_outbox_email ON email_outbox (lower(email));

CREATE TABLE waitlist_signups (
    id         bigint      GENERATED ALWAYS AS IDENTITY CONSTRAINT waitlist_signups_pkey PRIMARY KEY,
    email      text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX uix_waitlist_signups_email_ci ON waitlist_signups (lower(email));
