-- Order history pages newest first on the keyset (created_at, id): an index in that order lets a
-- page start at its cursor and read only its rows. It replaces the (user_id, created_at) index,
-- which it covers.
CREATE INDEX idx_paper_orders_user_created_id ON paper_orders (user_id, created_at DESC, id DESC);
DROP INDEX idx_paper_orders_user_created;
