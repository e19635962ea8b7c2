-- The paper trading book: operator quotes, orders (+ legs), fills and positions.
-- Cash lives on paper_accounts; its CHECK (cash >= 0) is the last line of defence behind the
-- engine's buying-power check.

CREATE TABLE quotes (
    symbol     text          CONSTRAINT quotes_pkey PRIMARY KEY,
    bid        numeric(20,6) NOT NULL CONSTRAINT quotes_bid_check CHECK (bid >= 0),
    ask        numeric(20,6) NOT NULL CONSTRAINT quotes_ask_check CHECK (ask >= 0),
    updated_by integer,
    updated_at timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT quotes_spread_check CHECK (ask >= bid)
);

CREATE TABLE paper_orders (
    id               uuid          CONSTRAINT paper_orders_pkey PRIMARY KEY,
    user_id          integer       NOT NULL CONSTRAINT paper_orders_user_id_fkey
                                   REFERENCES users (id) ON DELETE CASCADE,
    client_order_id  text          NOT NULL,
    idempotency_key  text,
    purpose          text          NOT NULL DEFAULT 'order'
                                   CONSTRAINT paper_orders_purpose_check
                                   CHECK (purpose IN ('order', 'roll', 'close')),
    order_class      text          NOT NULL CONSTRAINT paper_orders_class_check
                                   CHECK (order_class IN ('simple', 'mleg')),
    order_type       text          NOT NULL CONSTRAINT paper_orders_type_check
                                   CHECK (order_type IN ('market', 'limit')),
    time_in_force    text          NOT NULL CONSTRAINT paper_orders_tif_check
                                   CHECK (time_in_force IN ('day', 'gtc')),
    symbol           text,
    side             text,
    position_intent  text,
    qty              numeric(20,9) NOT NULL CONSTRAINT paper_orders_qty_check CHECK (qty > 0),
    limit_price      numeric(20,6),
    status           text          NOT NULL CONSTRAINT paper_orders_status_check
                                   CHECK (status IN ('new', 'filled', 'canceled', 'expired')),
    filled_qty       numeric(20,9) NOT NULL DEFAULT 0,
    filled_avg_price numeric(20,6),
    reserved_cash    numeric(20,2) NOT NULL DEFAULT 0,
    fees             numeric(20,2) NOT NULL DEFAULT 0,
    created_at       timestamptz   NOT NULL DEFAULT now(),
    updated_at       timestamptz   NOT NULL DEFAULT now(),
    filled_at        timestamptz,
    canceled_at      timestamptz,
    CONSTRAINT uq_paper_orders_client_order_id UNIQUE (user_id, client_order_id)
);
CREATE INDEX idx_paper_orders_user_created ON paper_orders (user_id, created_at DESC);
CREATE INDEX idx_paper_orders_open ON paper_orders (user_id) WHERE status = 'new';

CREATE TABLE paper_order_legs (
    order_id         uuid          NOT NULL CONSTRAINT paper_order_legs_order_id_fkey
                                   REFERENCES paper_orders (id) ON DELETE CASCADE,
    leg_index        smallint      NOT NULL,
    symbol           text          NOT NULL,
    side             text          NOT NULL,
    position_intent  text          NOT NULL,
    ratio_qty        integer       NOT NULL CONSTRAINT paper_order_legs_ratio_check CHECK (ratio_qty > 0),
    qty              numeric(20,9) NOT NULL,
    filled_qty       numeric(20,9) NOT NULL DEFAULT 0,
    filled_avg_price numeric(20,6),
    CONSTRAINT paper_order_legs_pkey PRIMARY KEY (order_id, leg_index)
);
-- Resting orders are re-evaluated when one of their symbols' quote changes.
CREATE INDEX idx_paper_order_legs_symbol ON paper_order_legs (symbol);

CREATE TABLE paper_fills (
    id           bigint        GENERATED ALWAYS AS IDENTITY CONSTRAINT paper_fills_pkey PRIMARY KEY,
    order_id     uuid          NOT NULL CONSTRAINT paper_fills_order_id_fkey
                               REFERENCES paper_orders (id) ON DELETE CASCADE,
    user_id      integer       NOT NULL,
    leg_index    smallint      NOT NULL,
    symbol       text          NOT NULL,
    side         text          NOT NULL,
    qty          numeric(20,9) NOT NULL,
    price        numeric(20,6) NOT NULL,
    multiplier   integer       NOT NULL,
    realized_pnl numeric(20,2) NOT NULL DEFAULT 0,
    filled_at    timestamptz   NOT NULL,
    CONSTRAINT uq_paper_fills_order_leg UNIQUE (order_id, leg_index)
);
CREATE INDEX idx_paper_fills_user ON paper_fills (user_id, id);

CREATE TABLE paper_positions (
    user_id         integer       NOT NULL CONSTRAINT paper_positions_user_id_fkey
                                  REFERENCES users (id) ON DELETE CASCADE,
    symbol          text          NOT NULL,
    qty             numeric(20,9) NOT NULL,
    avg_entry_price numeric(24,10) NOT NULL DEFAULT 0,
    realized_pnl    numeric(20,2) NOT NULL DEFAULT 0,
    updated_at      timestamptz   NOT NULL DEFAULT now(),
    CONSTRAINT paper_positions_pkey PRIMARY KEY (user_id, symbol)
);
