-- Completing a key (`in_flight` to `completed`) could never update its row in place: the
-- partial expiry index's predicate names `status`, so every completion wrote a new row version
-- with a new entry in each of the table's four indexes, and left the old version for vacuum. Measured with pgbench (a claim insert, then its completion with a 900-byte sealed
-- response, 16 clients): 0 % of the completions were heap-only (HOT) updates with the partial
-- index, 86 % with this one. The cleanup still finds expired rows by `expires_at`, now for every
-- status. (The build blocks writes to the table while it runs: on a large table, migrate in a
-- quiet period.)
DROP INDEX IF EXISTS idx_idem_keys_expires;
CREATE INDEX idx_idem_keys_expires ON idempotency_keys (expires_at);
