-- Quote sweeps: a quote update commits the quote and an event with a sequence number, and queues
-- one sweep per account with resting orders on the symbol; the sweeps are worked in bounded
-- per-account transactions (any replica, SKIP LOCKED), each order judged against the event that
-- crossed it.
--
-- quote_events: every quote update, in order. The id is taken while the quote row is locked, so
-- the events of one symbol are numbered in the order they committed.
CREATE TABLE quote_events (
    id         bigint        GENERATED ALWAYS AS IDENTITY CONSTRAINT quote_events_pkey PRIMARY KEY,
    symbol     text          NOT NULL,
    bid        numeric(20,6) NOT NULL,
    ask        numeric(20,6) NOT NULL,
    created_at timestamptz   NOT NULL DEFAULT now()
);

-- The event that set the quote.
ALTER TABLE quotes ADD COLUMN sequence bigint NOT NULL DEFAULT 0;

-- The newest quote event of the order's symbols when it was placed (their rows share-locked): the
-- events after it are the ones that can cross it; the ones before were judged at placement.
ALTER TABLE paper_orders ADD COLUMN quote_seq bigint NOT NULL DEFAULT 0;

-- Pending sweeps: (event, account). Deleted in the transaction that sweeps them. Erasing a user
-- deletes theirs (the foreign key cascades).
CREATE TABLE quote_sweeps (
    event_id    bigint      NOT NULL CONSTRAINT quote_sweeps_event_id_fkey
                            REFERENCES quote_events (id) ON DELETE CASCADE,
    user_id     integer     NOT NULL CONSTRAINT quote_sweeps_user_id_fkey
                            REFERENCES users (id) ON DELETE CASCADE,
    enqueued_at timestamptz NOT NULL DEFAULT now(),
    -- A sweep that failed (a lock timeout, a lost connection) is retried after a back-off, so
    -- one that keeps failing does not hold up the others.
    attempts    integer     NOT NULL DEFAULT 0,
    not_before  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT quote_sweeps_pkey PRIMARY KEY (event_id, user_id)
);
-- An account's sweeps run in event order: the older one of the same account goes first.
CREATE INDEX ix_quote_sweeps_user_event ON quote_sweeps (user_id, event_id);
