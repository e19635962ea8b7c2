-- The mail relay (docs/operations.md, "Sign-in email"): `raptor serve` claims due, unsent
-- messages with FOR UPDATE SKIP LOCKED, sends them over SMTP and records the outcome in the same
-- transaction. A message is sent (`sent_at`), waiting for its next attempt (`next_attempt_at`,
-- after `attempts` failures, the last in `last_error`), or given up (`failed_at`).
--
-- Once a message is sent or given up its body and link are cleared: the sign-in token exists in
-- clear only while the message waits to be sent. The body therefore becomes nullable.
ALTER TABLE email_outbox
    ALTER COLUMN body DROP NOT NULL,
    ADD COLUMN link            text,
    ADD COLUMN attempts        integer     NOT NULL DEFAULT 0
                               CONSTRAINT email_outbox_attempts_check CHECK (attempts >= 0),
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN last_error      text,
    ADD COLUMN failed_at       timestamptz;

-- The relay's queue: what is still to be sent, in the order it is due.
CREATE INDEX idx_email_outbox_due ON email_outbox (next_attempt_at, id)
    WHERE sent_at IS NULL AND failed_at IS NULL;
-- Retention of given-up messages.
CREATE INDEX idx_email_outbox_failed ON email_outbox (failed_at) WHERE failed_at IS NOT NULL;
