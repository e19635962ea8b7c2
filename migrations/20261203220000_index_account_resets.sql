-- no-transaction
-- A reset sent with an Idempotency-Key keeps its natural key (`reset_id`, derived from the
-- account and the key) in its `account.reset` audit row, and a reset with an id already used
-- within the key's retention is refused (`422 duplicate_reset`), so a retry with the
-- idempotency mechanism switched off does not wipe the account a second time
-- (`trading/ops/cancel_reset.rs`). This partial index holds the reset rows only (a few per
-- account), so the lookup does not walk the account's whole audit history.
--
-- Built CONCURRENTLY (a file of one statement, outside a transaction) because audit_log is the
-- largest table: a plain CREATE INDEX would block every audited write while it builds.
CREATE INDEX CONCURRENTLY IF NOT EXISTS idx_audit_log_account_reset
    ON audit_log (user_id, (context->>'reset_id'))
    WHERE action = 'account.reset';
