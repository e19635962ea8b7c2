-- A key's lineage: one random id per lifetime of a key, kept when an attempt is released (a
-- cancelled or stale attempt) and the key is claimed again, replaced only when an expired row is
-- taken over by a new lifetime. Downstream dedup ids (the derived client_order_id, the
-- Idempotency-Key forwarded to Stripe) are derived from it, so every retry of one key within its
-- retention forwards the same id and a key reused after it expired forwards a new one.
--
-- Released attempts now keep their row (status 'released') instead of deleting it, so that the
-- lineage survives the release. A released row is free: the next claim takes it over.

ALTER TABLE idempotency_keys
    ADD COLUMN lineage uuid NOT NULL DEFAULT gen_random_uuid();

ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_status_check,
    ADD CONSTRAINT idempotency_keys_status_check
        CHECK (status IN ('in_flight', 'completed', 'failed', 'released'));

DROP INDEX idx_idem_keys_expires;
CREATE INDEX idx_idem_keys_expires
    ON idempotency_keys (expires_at)
    WHERE status IN ('completed', 'failed', 'released');
