-- Which layout a sealed response is in (docs/idempotency.md, "Stored responses at rest").
-- NULL on a row with a ciphertext: the first layout (the body alone sealed, response_headers in
-- plain text). 2: the response's body and headers sealed together, bound to the key's lineage
-- and completing attempt as well as the row, so a ciphertext restored onto its own row in a
-- later lifetime of the key does not open; response_headers stays NULL.
--
-- Expand only: a nullable column, no backfill (existing sealed rows are the first layout, which
-- `raptor idempotency reencrypt` moves to the second).

ALTER TABLE idempotency_keys
    ADD COLUMN response_seal smallint,
    ADD CONSTRAINT idempotency_keys_response_seal_check CHECK (
        response_seal IS NULL OR (response_seal = 2 AND response_ciphertext IS NOT NULL)
    );
