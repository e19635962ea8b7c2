-- The second ceiling's schema (`make bench`): the tables the ceiling script writes, in a schema of
-- their own, with only what the order path needs of them: primary keys, the idempotency key's
-- unique scope and the account's unique client_order_id. No trigger, no foreign key, no other
-- index. `ceiling.sql` runs on it unchanged (search_path=ceiling_min), so the difference between
-- the two ceilings is the cost of the real schema's trigger, constraints and indexes.
DROP SCHEMA IF EXISTS ceiling_min CASCADE;
CREATE SCHEMA ceiling_min;
SET search_path = ceiling_min;
CREATE TABLE idempotency_keys (
    id bigserial PRIMARY KEY,
    idem_key text NOT NULL,
    scope_user_id integer,
    scope_endpoint text NOT NULL,
    request_hash text NOT NULL,
    status text NOT NULL,
    attempt uuid NOT NULL,
    locked_at timestamptz,
    expires_at timestamptz NOT NULL,
    response_code integer,
    response_body text,
    completed_at timestamptz,
    CONSTRAINT idempotency_keys_scope UNIQUE NULLS NOT DISTINCT (idem_key, scope_user_id, scope_endpoint)
);
CREATE TABLE quotes (symbol text PRIMARY KEY, bid numeric(20,6) NOT NULL, ask numeric(20,6) NOT NULL);
CREATE TABLE paper_accounts (
    user_id integer PRIMARY KEY,
    cash numeric(20,2) NOT NULL,
    reserved_cash numeric(20,2) NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE paper_orders (
    id uuid PRIMARY KEY,
    user_id integer NOT NULL,
    client_order_id text NOT NULL,
    purpose text NOT NULL,
    order_class text NOT NULL,
    order_type text NOT NULL,
    time_in_force text NOT NULL,
    symbol text,
    side text,
    position_intent text,
    qty numeric(20,6) NOT NULL,
    status text NOT NULL,
    filled_qty numeric(20,6) NOT NULL,
    filled_avg_price numeric(20,6),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    filled_at timestamptz,
    CONSTRAINT paper_orders_client_order_id UNIQUE (user_id, client_order_id)
);
CREATE TABLE paper_order_legs (
    order_id uuid NOT NULL,
    leg_index smallint NOT NULL,
    symbol text NOT NULL,
    side text NOT NULL,
    position_intent text NOT NULL,
    ratio_qty integer NOT NULL,
    qty numeric(20,6) NOT NULL,
    filled_qty numeric(20,6) NOT NULL,
    filled_avg_price numeric(20,6),
    PRIMARY KEY (order_id, leg_index)
);
CREATE TABLE paper_fills (
    id bigserial PRIMARY KEY,
    order_id uuid NOT NULL,
    user_id integer NOT NULL,
    leg_index smallint NOT NULL,
    symbol text NOT NULL,
    side text NOT NULL,
    qty numeric(20,6) NOT NULL,
    price numeric(20,6) NOT NULL,
    multiplier integer NOT NULL,
    filled_at timestamptz NOT NULL
);
CREATE TABLE paper_positions (
    user_id integer NOT NULL,
    symbol text NOT NULL,
    qty numeric(20,6) NOT NULL,
    avg_entry_price numeric(20,10) NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, symbol)
);
CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    user_id integer,
    action text NOT NULL,
    context jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO quotes SELECT symbol, bid, ask FROM public.quotes;
INSERT INTO paper_accounts (user_id, cash) SELECT user_id, cash FROM public.paper_accounts;
