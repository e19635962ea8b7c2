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
-- option position, NULL for an equity or a closed position. HOT looks at the values an index
-- holds, and this one changes only when an option position opens or closes, so every other
-- update of a position (an equity's always) stays on its page and adds no index entry. (An
-- index on the expression `CASE WHEN qty <> 0 …` would not do: an expression index blocks HOT on
-- every column it names.)
--
-- Neither date is a generated column any more. Postgres 15 plans a table's generation
-- expressions again in every statement that writes a row of it (ExecInitStoredGenerated, like
-- CHECK constraints): counted with `make profile-postgres`, `expiry_date` alone cost 128,000
-- instructions per order, and the two dates as generated columns 273,000, 13 % of an order. The
-- writers set them instead, from `occ_expiry_date(symbol)` (a SQL function that Postgres inlines
-- into the statement's plan, which is prepared once): the order's and a resting order's fills
-- (`trading/store/fills.rs`) and the expiry's settlement (`trading/store/expiry.rs`), each tested
-- for keeping `open_expiry_date` = `CASE WHEN qty <> 0 THEN expiry_date END`.
--
-- The function is not STRICT: Postgres inlines a SQL function only when its body is as strict as
-- the function says, and a CASE is not, so a STRICT one ran through the SQL-function executor at
-- every call (counted: 2,213,341 instructions per order against 1,838,885 inlined).
--
-- No table rewrite: dropping a column's generation keeps its stored values, and the new column is
-- nullable without a default; the backfill touches only open option positions.
CREATE FUNCTION occ_expiry_date(symbol text) RETURNS date
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN symbol ~ '^[A-Z]{1,6}[0-9]{6}[CP][0-9]{8}$' THEN
        make_date(2000 + substring(symbol from '^[A-Z]+([0-9]{2})')::integer,
                  substring(symbol from '^[A-Z]+[0-9]{2}([0-9]{2})')::integer,
                  substring(symbol from '^[A-Z]+[0-9]{4}([0-9]{2})')::integer)
    END;

ALTER TABLE paper_positions
    ALTER COLUMN expiry_date DROP EXPRESSION,
    ADD COLUMN open_expiry_date date;

UPDATE paper_positions SET open_expiry_date = expiry_date
 WHERE qty <> 0 AND expiry_date IS NOT NULL;

DROP INDEX idx_paper_positions_open_expiry;

CREATE INDEX idx_paper_positions_open_expiry ON paper_positions (open_expiry_date)
    WHERE open_expiry_date IS NOT NULL;
