-- When a resting order stops being good: the regular session close for a `day` order, the last
-- close before its earliest option expiry for any order on options; NULL is good until
-- canceled. Set from the engine's market calendar when the order is placed.
ALTER TABLE paper_orders ADD COLUMN expires_at timestamptz;

-- Orders resting before this column existed: day orders end at 16:00 New York on their day.
-- (Weekends and holidays are ignored here; such orders simply expire at the next pass.)
UPDATE paper_orders
   SET expires_at = (date_trunc('day', created_at AT TIME ZONE 'America/New_York')
                     + interval '16 hours') AT TIME ZONE 'America/New_York'
 WHERE status = 'new' AND time_in_force = 'day';

CREATE INDEX idx_paper_orders_expiry ON paper_orders (expires_at)
    WHERE status = 'new' AND expires_at IS NOT NULL;
