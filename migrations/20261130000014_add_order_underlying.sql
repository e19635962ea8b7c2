-- The underlying of a simple order's symbol (an option's root, an equity's own symbol), so that
-- placing an order reads the account's open orders on its underlyings by index instead of
-- scanning the whole open book: an account holding 500 resting orders on other symbols costs
-- what an empty one does. Multi-leg orders (symbol NULL) are found by their own index and legs.
ALTER TABLE paper_orders
    ADD COLUMN underlying text GENERATED ALWAYS AS (
        coalesce(substring(symbol from '^([A-Z]+)[0-9]{6}[CP][0-9]{8}$'), symbol)
    ) STORED;

CREATE INDEX idx_paper_orders_open_underlying ON paper_orders (user_id, underlying)
    WHERE status = 'new';
CREATE INDEX idx_paper_orders_open_mleg ON paper_orders (user_id)
    WHERE status = 'new' AND order_class = 'mleg';
