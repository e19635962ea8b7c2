//! Whether a database can be connected to at all: for the idempotency store, the one question
//! that decides whether a fail-open (Tier 2) route may run without dedup (docs/idempotency.md,
//! "Tiers").
//!
//! A claim that got no connection from the store pool cannot tell, from the pool's error alone,
//! a pool whose connections are all busy (the store is up: refuse, the key may exist) from a
//! store nobody can connect to (sqlx retries a refused connect until its acquire timeout and
//! then reports the same `PoolTimedOut`). So the claim asks: it opens one connection of its own,
//! outside the pool. One probe runs at a time per process and its answer is reused for
//! [`FRESH`], so a saturated pool does not turn every waiting request into a new connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::sync::Mutex;

/// How long a probe's answer is reused.
pub const FRESH: Duration = Duration::from_secs(1);

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// A connection was made (or the server answered that it has too many): the store is up.
    Reachable,
    /// No connection could be made: refused, DNS, TLS, authentication, or no answer in time;
    /// why.
    Unreachable(String),
}

/// The store's reachability, probed on demand (see the module docs).
pub struct Reachability {
    options: Arc<PgConnectOptions>,
    last: Mutex<Option<(Instant, Reach)>>,
}

impl Reachability {
    /// Probes connections with `options` (the pool's).
    pub fn new(options: Arc<PgConnectOptions>) -> Self {
        Self {
            options,
            last: Mutex::new(None),
        }
    }

    /// Whether a connection to the store can be made, found out within `budget`; `None` when
    /// the answer did not come in time (another probe holds the turn, or this one hangs and
    /// the budget is shorter than its connect): the caller must then not assume unreachable.
    pub async fn probe(&self, budget: Duration) -> Option<Reach> {
        let started = Instant::now();
        let mut last = tokio::time::timeout(budget, self.last.lock()).await.ok()?;
        if let Some((at, reach)) = &*last {
            if at.elapsed() < FRESH {
                return Some(reach.clone());
            }
        }
        let left = budget.saturating_sub(started.elapsed());
        if left < budget / 2 {
            // Most of the budget went on waiting for another probe's turn: too little is left
            // to tell a hanging connect from a slow one.
            return None;
        }
        let reach = match tokio::time::timeout(left, self.options.connect()).await {
            Ok(Ok(conn)) => {
                // Closed politely off the request's path.
                tokio::spawn(async move {
                    let _ = conn.close().await;
                });
                Reach::Reachable
            }
            // The server answered: it is up, only full. The pool is then busy, not cut off.
            Ok(Err(sqlx::Error::Database(db))) if db.code().as_deref() == Some("53300") => {
                Reach::Reachable
            }
            Ok(Err(err)) => Reach::Unreachable(err.to_string()),
            Err(_) => Reach::Unreachable(format!("no connection within {} ms", left.as_millis())),
        };
        *last = Some((Instant::now(), reach.clone()));
        Some(reach)
    }
}
