-- Stored responses encrypted at rest (docs/idempotency.md, "Stored responses at rest").
-- With RAPTOR_RESPONSE_KEYS set, a completed key's body is sealed in the application
-- (ChaCha20-Poly1305, never pgcrypto: the key must not appear in SQL text or statement logs):
-- response_kid names the key, response_nonce is the row's random 96-bit nonce and
-- response_ciphertext the sealed body with its tag; response_body stays NULL. Rows written
-- without a key keep their plain response_body and still replay; `raptor idempotency
-- reencrypt` moves them (and rows under an older key) to the current key.
--
-- Expand only: nullable columns, no backfill; every existing row satisfies the check.

ALTER TABLE idempotency_keys
    ADD COLUMN response_kid        text,
    ADD COLUMN response_nonce      bytea,
    ADD COLUMN response_ciphertext bytea,
    ADD CONSTRAINT idempotency_keys_response_sealed_check CHECK (
        (response_kid IS NULL AND response_nonce IS NULL AND response_ciphertext IS NULL)
        OR (response_kid IS NOT NULL AND octet_length(response_nonce) = 12
            AND response_ciphertext IS NOT NULL AND response_body IS NULL)
    );
