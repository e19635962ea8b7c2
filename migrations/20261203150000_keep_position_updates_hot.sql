-- Every fill updates its position row (qty, average price, realized P&L), and none of those
-- updates was HOT: `idx_paper_positions_open_expiry`'s predicate named `qty` (`WHERE qty <> 0 AND
-- expiry_date IS NOT NULL`), and Postgres cannot update a row in place (heap-only) when a column
-- that any index reads, its predicate included, changes. So each fill wrote a new row version
-- elsewhere and a new entry into the primary key, and left the old version for vacuum: counted
-- over 20 s of keyed orders, 14,924 position updates, 0 HOT, 14,924 dead rows, the table at
-- 496 KiB for 40 positions. Between vacuums (and where autovacuum is off) the table and its
-- primary key grow with every fill, and each order's position lookup walks the dead versions:
-- Postgres' CPU per order rose through every 300 s soak of `make bench`.
--
-- The index now reads a column of its own, `open_expiry_date`: the expiration date of an open
-- option position, NULL for an equity or a closed position. It is generated from `qty` and
-- `symbol`, but HOT looks at the values an index holds, not at what they are computed from: it
-- changes only when an option position opens or closes, so every other update of a position
-- (an equity's always) stays on its page and adds no index entry. (An index on the expression
-- `CASE WHEN qty <> 0 …` would not do: an expression index blocks HOT on every column it names.)
-- A generated column cannot read another one, so the OCC decoding of `expiry_date` is repeated.
--
-- Adding a stored generated column rewrites `paper_positions` (one row per account and symbol)
-- under an exclusive lock, once. `expiry_date` stays; the queries that used `qty <> 0 AND
-- expiry_date <= $n` read `open_expiry_date <= $n`, which is the same set of rows.
ALTER TABLE paper_positions
    ADD COLUMN open_expiry_date date GENERATED ALWAYS AS (
        CASE WHEN qty <> 0 AND symbol ~ '^[A-Z]{1,6}[0-9]{6}[CP][0-9]{8}$' THEN
            make_date(2000 + substring(symbol from '^[A-Z]+([0-9]{2})')::integer,
                      substring(symbol from '^[A-Z]+[0-9]{2}([0-9]{2})')::integer,
                      substring(symbol from '^[A-Z]+[0-9]{4}([0-9]{2})')::integer)
        END
    ) STORED;

DROP INDEX idx_paper_positions_open_expiry;

CREATE INDEX idx_paper_positions_open_expiry ON paper_positions (open_expiry_date)
    WHERE open_expiry_date IS NOT NULL;
