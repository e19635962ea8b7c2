-- The cash reserved by an account's open orders, and how many there are, kept on the account row
-- so that placing an order reads two numbers instead of the account's whole open book. A trigger
-- keeps them equal to sum(reserved_cash) and count(*) of the account's orders with status 'new',
-- whichever code path inserts, fills, cancels, expires or deletes them. Writers of paper_orders lock the account row first
-- (the lock order of the book), so the trigger's update never waits on another order writer.

ALTER TABLE paper_accounts
    ADD COLUMN reserved_cash numeric(20,2) NOT NULL DEFAULT 0
        CONSTRAINT paper_accounts_reserved_cash_check CHECK (reserved_cash >= 0),
    ADD COLUMN open_orders integer NOT NULL DEFAULT 0
        CONSTRAINT paper_accounts_open_orders_check CHECK (open_orders >= 0);

UPDATE paper_accounts a
   SET reserved_cash = coalesce((SELECT sum(o.reserved_cash) FROM paper_orders o
                                  WHERE o.user_id = a.user_id AND o.status = 'new'), 0),
       open_orders = (SELECT count(*) FROM paper_orders o
                       WHERE o.user_id = a.user_id AND o.status = 'new');

-- "Has this account an order that is no longer good?" without reading its open book.
CREATE INDEX idx_paper_orders_user_expiry ON paper_orders (user_id, expires_at)
    WHERE status = 'new' AND expires_at IS NOT NULL;

CREATE FUNCTION paper_orders_track_reservations() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    delta numeric(20,2) := 0;
    opened integer := 0;
    account integer;
BEGIN
    IF TG_OP = 'DELETE' THEN
        account := OLD.user_id;
    ELSE
        account := NEW.user_id;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        IF OLD.status = 'new' THEN
            delta := delta - OLD.reserved_cash;
            opened := opened - 1;
        END IF;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        IF NEW.status = 'new' THEN
            delta := delta + NEW.reserved_cash;
            opened := opened + 1;
        END IF;
    END IF;
    IF delta <> 0 OR opened <> 0 THEN
        UPDATE paper_accounts
           SET reserved_cash = reserved_cash + delta, open_orders = open_orders + opened
         WHERE user_id = account;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER paper_orders_reservations
    AFTER INSERT OR UPDATE OF status, reserved_cash OR DELETE ON paper_orders
    FOR EACH ROW EXECUTE FUNCTION paper_orders_track_reservations();
