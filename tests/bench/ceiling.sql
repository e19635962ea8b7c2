-- The ceiling of `make bench`: the writes a keyed market order must make in Raptor's schema, and
-- nothing more, in no more round trips than the service makes (the claim; BEGIN; one statement
-- that locks quote and account; one that makes every write and completes the key; COMMIT), run
-- by pgbench in the prepared protocol on the same Postgres (see tests/bench/ceiling.rs).
-- The session runs with synchronous_commit=off (PGOPTIONS), as the service's claim does; the
-- order's transaction turns it back on, as the service's business transaction has it.
-- The key's two writes sit between `-- key {` and `-- key }`: the bench's unkeyed ceiling runs this
-- script without them, so that both ceilings make the same order writes.
-- Variables: :umin and :umax, the bench users' ids. Each client keeps one user, as the service's
-- load does (its client i sends as user i): a user drawn at random per transaction would make the
-- clients queue on each other's account rows, a contention the service's load never meets.
\set uid :umin + (:client_id % (:umax - :umin + 1))
-- key {
INSERT INTO idempotency_keys
    (idem_key, scope_user_id, scope_endpoint, request_hash, status, attempt, locked_at, expires_at)
VALUES (gen_random_uuid()::text, :uid, 'POST /api/trading/orders', 'ceiling', 'in_flight',
        gen_random_uuid(), now(), now() + interval '1 day')
RETURNING id AS key_id \gset
-- key }
BEGIN;
SELECT set_config('synchronous_commit', 'on', true), q.bid, q.ask, a.cash, a.reserved_cash
  FROM quotes q, paper_accounts a
 WHERE q.symbol = 'AAPL' AND a.user_id = :uid
   FOR SHARE OF q FOR UPDATE OF a;
WITH
-- key {
k AS (
    UPDATE idempotency_keys
       SET status = 'completed', response_code = 201, response_body = '{"ceiling": true}',
           completed_at = now()
     WHERE id = :key_id),
-- key }
o AS (
    INSERT INTO paper_orders
        (id, user_id, client_order_id, purpose, order_class, order_type, time_in_force, symbol,
         side, position_intent, qty, status, filled_qty, filled_avg_price, created_at,
         updated_at, filled_at)
    VALUES (gen_random_uuid(), :uid, gen_random_uuid()::text, 'order', 'simple', 'market', 'day',
            'AAPL', 'buy', 'buy_to_open', 1, 'filled', 1, 190.10, now(), now(), now())
    RETURNING id),
l AS (
    INSERT INTO paper_order_legs
        (order_id, leg_index, symbol, side, position_intent, ratio_qty, qty, filled_qty,
         filled_avg_price)
    SELECT id, 0, 'AAPL', 'buy', 'buy_to_open', 1, 1, 1, 190.10 FROM o),
f AS (
    INSERT INTO paper_fills (order_id, user_id, leg_index, symbol, side, qty, price, multiplier, filled_at)
    SELECT id, :uid, 0, 'AAPL', 'buy', 1, 190.10, 1, now() FROM o),
p AS (
    INSERT INTO paper_positions (user_id, symbol, qty, avg_entry_price)
    VALUES (:uid, 'AAPL', 1, 190.10)
    ON CONFLICT (user_id, symbol) DO UPDATE SET qty = paper_positions.qty + 1, updated_at = now()),
c AS (
    UPDATE paper_accounts SET cash = cash - 190.10, updated_at = now() WHERE user_id = :uid)
INSERT INTO audit_log (user_id, action, context) VALUES (:uid, 'order.accepted', '{"ceiling": true}');
COMMIT;
