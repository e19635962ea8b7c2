-- The verdict of a resting order's last re-evaluation on a quote update (an engine rejection
-- code, or NULL when it was simply not marketable): a rejection is audited when it changes, not
-- on every quote tick.
ALTER TABLE paper_orders ADD COLUMN last_evaluation_code text;
