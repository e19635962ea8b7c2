//! Connections for statements that need no transaction of their own (reads, a one-statement
//! write): a plain pooled connection in session mode; in transaction mode, a transaction block,
//! which [`Conn::finish`] commits. No statement of the service runs on a `&PgPool` directly.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};

use crate::mode::{pool_mode, PoolMode};

/// A connection from [`conn`]. Dropped without [`Conn::finish`], it rolls back.
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
    #[expect(
        clippy::disallowed_methods,
        reason = "the one wrapper the guard points to"
    )]
    let pooled = {
        let _waiting = crate::pool_metrics::Waiting::new(pool);
        pool.acquire().await.map_err(ConnError::Acquire)?
    };
    Ok(Conn(match pool_mode() {
        PoolMode::Session => Inner::Pooled(pooled),
        PoolMode::Transaction => Inner::Block(
            Transaction::begin(pooled, None)
                .await
                .map_err(ConnError::Begin)?,
        ),
    }))
}

/// A transaction on a connection of `pool` (what `pool.begin()` does), its wait for the
/// connection counted like [`conn`]'s (`crate::pool_metrics`).
pub async fn begin(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    #[expect(
        clippy::disallowed_methods,
        reason = "the one wrapper the guard points to"
    )]
    let pooled = {
        let _waiting = crate::pool_metrics::Waiting::new(pool);
        pool.acquire().await?
    };
    Transaction::begin(pooled, None).await
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

    /// [`Conn::finish`], keeping the connection for another statement where that costs
    /// nothing: in session mode it stays lent (`Some`), so the next statement needs no checkout
    /// and sqlx's ping on the return; in transaction mode the block is committed and the
    /// connection goes back (`None`).
    pub async fn finish_keeping(self) -> Result<Option<Conn>, sqlx::Error> {
        match self.0 {
            Inner::Pooled(_) => Ok(Some(self)),
            Inner::Block(tx) => tx.commit().await.map(|()| None),
        }
    }

    /// A transaction on this connection: `BEGIN` on a pooled connection; in transaction mode
    /// the connection's transaction block itself, which goes on (what ran on it so far becomes
    /// part of the transaction).
    pub async fn begin(self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        match self.0 {
            Inner::Pooled(pooled) => Transaction::begin(pooled, None).await,
            Inner::Block(tx) => Ok(tx),
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
