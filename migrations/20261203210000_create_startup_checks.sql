-- The start-up check that IDEMPOTENCY_STORE_DATABASE_URL reaches the database DATABASE_URL
-- does (`raptor_db::pool::check_sessions`): `raptor serve` writes a nonce here through the
-- business pool, reads it through the store's, and deletes it. A claim committed in another
-- database would guard nothing, so a store URL that points elsewhere refuses to start.
SET LOCAL lock_timeout = '5s';

CREATE TABLE startup_checks (
    nonce      uuid        CONSTRAINT startup_checks_pkey PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);
