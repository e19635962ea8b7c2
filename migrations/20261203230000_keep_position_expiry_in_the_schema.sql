-- The position's expiry dates are kept by the database, whoever writes the row.
--
-- Migration 20261203150000 made `expiry_date` (the option's expiration date) and
-- `open_expiry_date` (the same while the position is open: the expiry index's key) plain
-- columns that the writers set. A writer that does not set them leaves them NULL, and a
-- position whose `open_expiry_date` is NULL is never settled: the previous release's binary,
-- which still serves during a rolling deploy (it knew `expiry_date` as a generated column and
-- `open_expiry_date` not at all), opened option positions that never settled. So every row is
-- checked on its way in, by a BEFORE trigger whose WHEN condition holds only for a row whose
-- dates are wrong or missing; then `keep_position_expiry` sets them:
--
--   expiry_date      = occ_expiry_date(symbol) when unset;
--   open_expiry_date = CASE WHEN qty <> 0 THEN expiry_date END.
--
-- This release's writers still set both in their statements, so for them the WHEN is false and
-- no PL/pgSQL runs: what each row costs is the WHEN's few comparisons (and, on insert, a
-- regular-expression test of an equity's symbol). The backfill repairs the rows the previous
-- binary wrote since 20261203150000.
--
-- Upgrade rule (docs/operations.md, "Upgrading"): every migration works with the previous
-- release's binary still serving; a column the code relies on is kept by the database.
SET LOCAL lock_timeout = '5s';

CREATE FUNCTION keep_position_expiry() RETURNS trigger
    LANGUAGE plpgsql AS $$
BEGIN
    NEW.expiry_date := coalesce(NEW.expiry_date, occ_expiry_date(NEW.symbol));
    NEW.open_expiry_date := CASE WHEN NEW.qty <> 0 THEN NEW.expiry_date END;
    RETURN NEW;
END
$$;

CREATE TRIGGER paper_positions_keep_expiry
    BEFORE INSERT OR UPDATE ON paper_positions
    FOR EACH ROW
    WHEN (NEW.open_expiry_date IS DISTINCT FROM (CASE WHEN NEW.qty <> 0 THEN NEW.expiry_date END)
          OR (NEW.expiry_date IS NULL AND NEW.symbol ~ '[0-9]{6}[CP][0-9]{8}$'))
    EXECUTE FUNCTION keep_position_expiry();

-- Rows the previous binary wrote since 20261203150000 (the trigger above sets them).
UPDATE paper_positions SET qty = qty
 WHERE open_expiry_date IS DISTINCT FROM (CASE WHEN qty <> 0 THEN expiry_date END)
    OR (expiry_date IS NULL AND symbol ~ '[0-9]{6}[CP][0-9]{8}$');
