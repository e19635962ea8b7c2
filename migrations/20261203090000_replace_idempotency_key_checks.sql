-- Every keyed request writes its key row twice (the claim's insert, the completion's update),
-- and Postgres 15 evaluates a table's CHECK constraints on every such write by reading each one
-- back from its stored text and planning it again, once per statement (ExecRelCheck builds
-- them per executor run; nothing caches them between statements). Counted with callgrind on
-- the Postgres backends (`make profile-postgres`): the three checks of this table cost about
-- 130,000 instructions per statement, 260,000 per keyed order, 40 % of what the key costs
-- Postgres beyond the unkeyed order.
--
-- - `status` keeps its rule as a domain: a domain's constraint is read and planned once per
--   session (the type cache) and only evaluated when a statement sets the column (about 23,000
--   instructions per statement). Clients see `text` (a domain column is described by its base type), and every
--   statement compares it with text as before.
-- - The two checks that kept the sealed columns together (`response_kid`, `response_nonce`,
--   `response_ciphertext`, `response_body`, `response_seal`) are dropped: one statement writes
--   them (the completion, `Claim::finish`, and `raptor idempotency reencrypt`), from one sealed
--   value, and a row whose columns do not fit together does not open: its replay is `503
--   idempotency_store_unavailable`, never a re-execution. Written as one compact check they
--   still cost 87,000 instructions per statement.
--
-- No rewrite: the column becomes the domain while the domain has no constraint (the same
-- bytes, so Postgres neither rewrites the table nor rebuilds an index), then the domain gets its
-- check NOT VALID, which every value written from then on must pass. The rows already there
-- passed the table's check that it replaces, so no validation scan (which would block writes to
-- the table while it reads it) is run.
CREATE DOMAIN idempotency_key_status AS text;

ALTER TABLE idempotency_keys
    DROP CONSTRAINT idempotency_keys_status_check,
    DROP CONSTRAINT idempotency_keys_response_sealed_check,
    DROP CONSTRAINT idempotency_keys_response_seal_check,
    ALTER COLUMN status TYPE idempotency_key_status;

ALTER DOMAIN idempotency_key_status
    ADD CONSTRAINT idempotency_key_status_check
    CHECK (VALUE IN ('in_flight', 'completed', 'failed', 'released')) NOT VALID;
