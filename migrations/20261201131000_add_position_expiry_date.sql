-- The expiration date of an option position, decoded from its OCC symbol (NULL for equities),
-- so the expiry pass finds the positions past their last close by index: the service computes
-- from the market calendar the latest expiration date that has stopped trading and settles the
-- open positions expiring on or before it.
ALTER TABLE paper_positions
    ADD COLUMN expiry_date date GENERATED ALWAYS AS (
        CASE WHEN symbol ~ '^[A-Z]{1,6}[0-9]{6}[CP][0-9]{8}$' THEN
            make_date(2000 + substring(symbol from '^[A-Z]+([0-9]{2})')::integer,
                      substring(symbol from '^[A-Z]+[0-9]{2}([0-9]{2})')::integer,
                      substring(symbol from '^[A-Z]+[0-9]{4}([0-9]{2})')::integer)
        END
    ) STORED;

CREATE INDEX idx_paper_positions_open_expiry ON paper_positions (expiry_date)
    WHERE qty <> 0 AND expiry_date IS NOT NULL;
