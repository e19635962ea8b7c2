//! The connection an instrumented request's authentication lends to its transaction.
//!
//! An order used to check out three connections: the token lookup's, the claim's (store pool)
//! and the business transaction's, and sqlx sends a ping on every return to the pool. The
//! business pool's two are one here: an [`Authenticate`](crate::Authenticate) returns the
//! connection its token lookup used as a [`Lent`], and [`Idempotent`](crate::Idempotent)
//! begins the request's transaction on it (in transaction pool mode it simply continues the
//! lookup's transaction block).
//!
//! A lent connection is never held while the request waits on the client or on a queue: the
//! body is read before the authentication runs, the claim lets go of it before it waits on a
//! locked key, and a gate that must wait (the per-account write permit) receives the `Lent`
//! and [`Lent::let_go`]es of it first. The connection travels in signatures, not in the
//! request's extensions: a gate that forgets to hand it on cannot return one.

use raptor_db::Conn;

/// The connection an authentication's lookup used, lent to the request's transaction; empty
/// when there is none to lend (the principal was already known, or the gate let go of it).
/// Dropped unused, the connection goes back to its pool (rolling back a transaction block).
#[must_use = "hand the lent connection on (an `Authenticate` returns it), or `finish` it"]
#[derive(Default)]
pub struct Lent(Option<Conn>);

impl Lent {
    /// A lent `conn`.
    pub fn new(conn: Conn) -> Self {
        Self(Some(conn))
    }

    /// Nothing lent.
    pub fn none() -> Self {
        Self(None)
    }

    /// Whether a connection is lent.
    pub fn is_lent(&self) -> bool {
        self.0.is_some()
    }

    /// Gives the connection back to its pool: call before anything that may wait.
    pub fn let_go(&mut self) {
        drop(self.0.take());
    }

    /// Ends the connection's use where nothing borrows it ([`Conn::finish`]: commits its
    /// transaction block in transaction mode, returns it to the pool in session mode).
    pub async fn finish(self) -> Result<(), sqlx::Error> {
        match self.0 {
            Some(conn) => conn.finish().await,
            None => Ok(()),
        }
    }

    /// The connection, for the request's transaction.
    pub(crate) fn into_conn(self) -> Option<Conn> {
        self.0
    }
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Lent").field(&self.is_lent()).finish()
    }
}
