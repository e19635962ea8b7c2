-- The wake-up of the trade-updates streams (docs/adr/0140-trade-updates-stream.md): every audit
-- row of a trade action notifies its user's streams on channel `raptor_trade_updates`, with the
-- user id as payload. NOTIFY is transactional: it is delivered when the row's transaction
-- commits, never for one that rolls back, and Postgres folds the same notification sent twice
-- in one transaction into one. The list of actions is `trading::stream::TRADE_ACTIONS`.
-- CREATE TRIGGER takes a lock on audit_log that every write waits behind: give up rather than
-- queue them during a rolling deploy (the migration fails, and the next `raptor migrate` runs it).
SET LOCAL lock_timeout = '5s';

CREATE FUNCTION notify_trade_update() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('raptor_trade_updates', NEW.user_id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER audit_log_notify_trade_update
    AFTER INSERT ON audit_log
    FOR EACH ROW
    WHEN (NEW.user_id IS NOT NULL AND NEW.action IN (
        'order.accepted', 'order.filled', 'order.canceled', 'order.expired',
        'order.rejected', 'order.evaluation_rejected', 'position.expired'))
    EXECUTE FUNCTION notify_trade_update();
