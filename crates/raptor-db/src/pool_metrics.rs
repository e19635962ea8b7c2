//! The pools as metrics: how many connections each holds, how many are idle, and how many
//! callers wait for one. sqlx reports size and idle connections but not its waiters, so every
//! acquire of the service goes through [`conn`](crate::conn()) or [`begin`](crate::begin()), which
//! count the callers inside `acquire` (`Waiting`).
//!
//! Which pool a `PgPool` is ([`pool_label`]): the idempotency store's pool carries what only it
//! has (its own `application_name` when it has its own URL, else `synchronous_commit=off` among
//! its session options, both set by `pool::store`); every other pool is `business`.

use std::time::Instant;

use sqlx::PgPool;

/// The `application_name` of the idempotency store's connections when it has a URL of its own
/// (`IDEMPOTENCY_STORE_DATABASE_URL`): how [`pool_label`] knows that pool (kept here, with the
/// labels, so that this file needs nothing of `pool.rs`).
pub const STORE_APPLICATION_NAME: &str = "raptor-idempotency";

/// The `pool` label of the business pool (`DATABASE_URL`).
pub const BUSINESS: &str = "business";
/// The `pool` label of the idempotency store's pool.
pub const STORE: &str = "store";

/// The `pool` label of `pool`: [`STORE`] or [`BUSINESS`].
pub fn pool_label(pool: &PgPool) -> &'static str {
    let options = pool.connect_options();
    let store = options.get_application_name() == Some(STORE_APPLICATION_NAME)
        || options
            .get_options()
            .is_some_and(|o| o.contains("synchronous_commit"));
    if store {
        STORE
    } else {
        BUSINESS
    }
}

/// One caller inside a pool's `acquire`: `raptor_db_pool_waiters{pool}` is one higher while it
/// lives (dropped when the connection is lent, the acquire fails, or the caller gives up), and
/// its wait is recorded in `raptor_db_pool_acquire_seconds{pool}`.
pub(crate) struct Waiting {
    pool: &'static str,
    since: Instant,
}

impl Waiting {
    pub(crate) fn new(pool: &PgPool) -> Self {
        let pool = pool_label(pool);
        metrics::gauge!("raptor_db_pool_waiters", "pool" => pool).increment(1.0);
        Self {
            pool,
            since: Instant::now(),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::gauge!("raptor_db_pool_waiters", "pool" => self.pool).decrement(1.0);
        metrics::histogram!("raptor_db_pool_acquire_seconds", "pool" => self.pool)
            .record(self.since.elapsed().as_secs_f64());
    }
}

/// Sets `pool`'s gauges, read when metrics are scraped: `raptor_db_pool_connections{pool}`
/// (open), `raptor_db_pool_idle_connections{pool}`, `raptor_db_pool_max_connections{pool}`;
/// `raptor_db_pool_waiters{pool}` is made to exist (at 0) before the first acquire.
pub fn record(pool: &PgPool) {
    let label = pool_label(pool);
    metrics::gauge!("raptor_db_pool_connections", "pool" => label).set(f64::from(pool.size()));
    metrics::gauge!("raptor_db_pool_idle_connections", "pool" => label).set(pool.num_idle() as f64);
    metrics::gauge!("raptor_db_pool_max_connections", "pool" => label)
        .set(f64::from(pool.options().get_max_connections()));
    metrics::gauge!("raptor_db_pool_waiters", "pool" => label).increment(0.0);
}
