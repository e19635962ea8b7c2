-- Open orders are found by `idx_paper_orders_open_underlying` (user_id, underlying) WHERE
-- status = 'new' alone. The older user-only index on the same rows served no query the
-- composite cannot (its leading column is user_id), but the planner preferred it for the book
-- read of one underlying, since the statistics cannot tell that an account's resting orders sit
-- on another symbol: it then read and filtered the account's whole open book (500 rows removed
-- by filter per order on the bench's scenario 7), and every resting order maintained one index
-- more.
DROP INDEX IF EXISTS idx_paper_orders_open;
