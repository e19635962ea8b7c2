//! Run-time flags (the idempotency kill switch `FLAG_IDEMPOTENCY_MIDDLEWARE`, the trading halt
//! `MBT_NEW_ORDERS_DISABLED`): an environment default with a run-time override in
//! `feature_flags`, re-read at most every [`REFRESH`] so that a flip reaches every server
//! process within one second without a restart.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{PgConnection, PgPool};

/// How stale a process's view of the flag may be.
pub const REFRESH: Duration = Duration::from_millis(400);

/// How long one read of the flag may take (a read that runs out keeps the last value, and the
/// next request tries again): with [`REFRESH`], a flip is seen within a second.
pub const READ_TIMEOUT: Duration = Duration::from_millis(500);

const NEVER: u64 = u64::MAX;

/// One flag: its name (the environment variable's and the `feature_flags` row's), its
/// environment default, and this process's view of it.
pub struct RuntimeFlag {
    name: &'static str,
    default: bool,
    value: AtomicBool,
    /// Milliseconds since `epoch` of the last successful read, or `NEVER`.
    refreshed_at: AtomicU64,
    refreshing: AtomicBool,
    epoch: Instant,
}

/// Clears the `refreshing` latch even when the refreshing request is cancelled mid-query.
struct Latch<'a>(&'a AtomicBool);

impl Drop for Latch<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for RuntimeFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeFlag")
            .field("name", &self.name)
            .field("value", &self.value.load(Ordering::Acquire))
            .finish()
    }
}

impl RuntimeFlag {
    /// The flag `name`, `default` until an override is read.
    pub fn new(name: &'static str, default: bool) -> Self {
        Self {
            name,
            default,
            value: AtomicBool::new(default),
            refreshed_at: AtomicU64::new(NEVER),
            refreshing: AtomicBool::new(false),
            epoch: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(NEVER - 1)
    }

    /// The flag's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The current value, re-read from Postgres (on `pool`, within `timeout`) when older than
    /// [`REFRESH`]. One request refreshes at a time; the others use the value they have. A
    /// failed read keeps the last known value.
    pub async fn get(&self, pool: &PgPool, timeout: Duration) -> bool {
        let last = self.refreshed_at.load(Ordering::Acquire);
        let now = self.now_ms();
        let due = last == NEVER || now.saturating_sub(last) >= REFRESH.as_millis() as u64;
        if due && !self.refreshing.swap(true, Ordering::AcqRel) {
            let _latch = Latch(&self.refreshing);
            let read = async {
                let mut conn = crate::conn(pool).await?;
                let row = crate::query_scalar::<bool>(
                    "select enabled from feature_flags where name = $1",
                )
                .bind(self.name)
                .fetch_optional(&mut *conn)
                .await?;
                conn.finish().await?;
                Ok::<_, sqlx::Error>(row)
            };
            match tokio::time::timeout(timeout, read).await {
                Ok(Ok(row)) => {
                    self.value
                        .store(row.unwrap_or(self.default), Ordering::Release);
                    self.refreshed_at.store(now, Ordering::Release);
                }
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, flag = self.name, "could not read a run-time flag; keeping last value");
                }
                Err(_) => {
                    tracing::warn!(
                        flag = self.name,
                        "reading a run-time flag timed out; keeping last value"
                    );
                }
            }
        }
        self.value.load(Ordering::Acquire)
    }

    /// Applies a stored override to this process at once. Call it only after the transaction
    /// of [`RuntimeFlag::store`] committed: a flip that rolled back must not apply.
    pub fn set_local(&self, enabled: bool) {
        self.value.store(enabled, Ordering::Release);
        self.refreshed_at.store(self.now_ms(), Ordering::Release);
    }

    /// Stores the run-time override in the caller's transaction; other processes see it within
    /// [`REFRESH`] of its commit (this one at once with [`RuntimeFlag::set_local`]).
    pub async fn store(
        &self,
        conn: &mut PgConnection,
        enabled: bool,
        updated_by: Option<i32>,
    ) -> Result<(), sqlx::Error> {
        crate::query(
            "insert into feature_flags (name, enabled, updated_by, updated_at)
             values ($1, $2, $3, now())
             on conflict (name) do update
                set enabled = excluded.enabled, updated_by = excluded.updated_by,
                    updated_at = now()",
        )
        .bind(self.name)
        .bind(enabled)
        .bind(updated_by)
        .execute(conn)
        .await?;
        Ok(())
    }
}
