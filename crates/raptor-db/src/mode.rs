//! `RAPTOR_DB_POOL_MODE`: the two ways a deployment can connect (docs/SCALING.md).
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
//! The mode is a property of the deployment, the same for every pool of the process, so it is
//! process-wide: set once by `raptor serve` before the first statement.

use std::sync::atomic::{AtomicBool, Ordering};

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
