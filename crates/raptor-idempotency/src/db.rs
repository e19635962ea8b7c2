//! How the service's statements reach Postgres, in either of the two ways a deployment can
//! connect (`RAPTOR_DB_POOL_MODE`, docs/SCALING.md):
//!
//! - [`PoolMode::Session`] (the default): each pooled connection is a server session of its
//!   own (Postgres directly, or PgBouncer in session pooling). Statements are prepared once per
//!   connection under a name (`sqlx_s_N`) and cached, and a lone statement runs in autocommit.
//! - [`PoolMode::Transaction`]: PgBouncer in transaction pooling, which may hand every
//!   transaction, and every statement outside one, to a different server session. sqlx sends a
//!   statement in two round trips (Parse/Describe, then Bind/Execute), so a statement is only
//!   safe where the server session cannot change between them: inside an explicit transaction.
//!   And a named statement outlives its transaction on a server session another client gets
//!   next, so statements are unnamed (parsed afresh, replaced by the next one, never left
//!   behind).
//!
//! Every statement of the service goes through [`query`], [`query_as`] or [`query_scalar`] (so
//! it is named or unnamed as the mode wants), and runs on a transaction or on a [`Conn`] (so it
//! is inside a transaction block when the mode needs one). `crates/clippy.toml` refuses
//! `sqlx::query*` and `Pool::acquire` elsewhere in the service's crates; no statement runs on a
//! `&PgPool` directly.
//!
//! The mode is a property of the deployment, the same for every pool of the process, so it is
//! process-wide: set once by `raptor serve` before the first statement.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::{FromRow, PgConnection, PgPool, Postgres, Transaction};

/// How the process's connections map to Postgres server sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMode {
    /// A connection is a server session for its whole life (direct, or PgBouncer session
    /// pooling): named, cached statements; lone statements in autocommit.
    Session,
    /// A connection is a server session only for the length of one transaction (PgBouncer
    /// transaction pooling): unnamed statements, every one inside a transaction block.
    Transaction,
}

static TRANSACTION_POOLING: AtomicBool = AtomicBool::new(false);

/// Sets the process's pool mode. Call it before the first statement (`raptor serve` does).
pub fn set_pool_mode(mode: PoolMode) {
    TRANSACTION_POOLING.store(mode == PoolMode::Transaction, Ordering::Release);
}

/// The process's pool mode.
pub fn pool_mode() -> PoolMode {
    if TRANSACTION_POOLING.load(Ordering::Acquire) {
        PoolMode::Transaction
    } else {
        PoolMode::Session
    }
}

fn persistent() -> bool {
    pool_mode() == PoolMode::Session
}

/// [`sqlx::query`], named and cached in session mode, unnamed in transaction mode.
#[allow(clippy::disallowed_methods)]
pub fn query(sql: &str) -> Query<'_, Postgres, PgArguments> {
    sqlx::query(sql).persistent(persistent())
}

/// [`sqlx::query_as`], named and cached in session mode, unnamed in transaction mode.
#[allow(clippy::disallowed_methods)]
pub fn query_as<'q, O>(sql: &'q str) -> QueryAs<'q, Postgres, O, PgArguments>
where
    O: for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_as(sql).persistent(persistent())
}

/// [`sqlx::query_scalar`], named and cached in session mode, unnamed in transaction mode.
#[allow(clippy::disallowed_methods)]
pub fn query_scalar<'q, O>(sql: &'q str) -> QueryScalar<'q, Postgres, O, PgArguments>
where
    (O,): for<'r> FromRow<'r, PgRow>,
{
    sqlx::query_scalar(sql).persistent(persistent())
}

/// A connection for statements that need no transaction of their own (reads, a one-statement
/// write): a plain pooled connection in session mode; in transaction mode, a transaction block,
/// which [`Conn::finish`] commits. Dropped without `finish`, it rolls back.
pub struct Conn(Inner);

enum Inner {
    Pooled(PoolConnection<Postgres>),
    Block(Transaction<'static, Postgres>),
}

/// A [`Conn`] from `pool`: `acquire` in session mode, `begin` in transaction mode.
pub async fn conn(pool: &PgPool) -> Result<Conn, sqlx::Error> {
    try_conn(pool).await.map_err(ConnError::into_inner)
}

/// Why [`try_conn`] has no connection to give.
#[derive(Debug)]
pub enum ConnError {
    /// The pool lent none: it timed out (every connection busy, or connecting kept failing or
    /// hanging), it is closed, or connecting failed outright (refused, DNS, TLS,
    /// authentication). Nothing was sent on any session.
    Acquire(sqlx::Error),
    /// A connection was lent, but its `BEGIN` (transaction mode) failed: the server was
    /// reached.
    Begin(sqlx::Error),
}

impl ConnError {
    /// The underlying error.
    pub fn into_inner(self) -> sqlx::Error {
        match self {
            Self::Acquire(err) | Self::Begin(err) => err,
        }
    }
}

/// [`conn`], telling a pool that lent no connection ([`ConnError::Acquire`]) from a lent
/// connection whose transaction block could not begin: the idempotency claim fails open only
/// in the first case, and only when connecting itself fails.
pub async fn try_conn(pool: &PgPool) -> Result<Conn, ConnError> {
    #[allow(clippy::disallowed_methods)]
    let pooled = pool.acquire().await.map_err(ConnError::Acquire)?;
    Ok(Conn(match pool_mode() {
        PoolMode::Session => Inner::Pooled(pooled),
        PoolMode::Transaction => Inner::Block(
            Transaction::begin(pooled, None)
                .await
                .map_err(ConnError::Begin)?,
        ),
    }))
}

impl Conn {
    /// Ends the connection's use: commits its transaction block in transaction mode (a write
    /// made on it is durable only then); returns it to the pool in session mode.
    pub async fn finish(self) -> Result<(), sqlx::Error> {
        match self.0 {
            Inner::Pooled(_) => Ok(()),
            Inner::Block(tx) => tx.commit().await,
        }
    }
}

impl Deref for Conn {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        match &self.0 {
            Inner::Pooled(conn) => conn,
            Inner::Block(tx) => tx,
        }
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        match &mut self.0 {
            Inner::Pooled(conn) => conn,
            Inner::Block(tx) => tx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Execute;

    fn named<'q>(statement: impl Execute<'q, Postgres>) -> bool {
        statement.persistent()
    }

    #[test]
    fn statements_are_named_only_in_session_mode() {
        // The only test that sets the process-wide mode, so no other test sees it flip.
        assert_eq!(pool_mode(), PoolMode::Session);
        assert!(named(query("select 1")));
        set_pool_mode(PoolMode::Transaction);
        assert!(!named(query("select 1")));
        assert!(!named(query_scalar::<i32>("select 1")));
        assert!(!named(query_as::<(i32,)>("select 1")));
        set_pool_mode(PoolMode::Session);
        assert!(named(query_as::<(i32,)>("select 1")));
        assert!(named(query_scalar::<i32>("select 1")));
    }
}
