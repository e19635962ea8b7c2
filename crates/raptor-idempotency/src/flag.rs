//! The `FLAG_IDEMPOTENCY_MIDDLEWARE` kill switch: an environment default with a run-time
//! override in `feature_flags`, re-read at most every [`REFRESH`] so that a flip reaches every
//! server process within one second without a restart.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{PgConnection, PgPool};

/// The flag's name, as the environment variable and the `feature_flags` row.
pub const FLAG_IDEMPOTENCY_MIDDLEWARE: &str = "FLAG_IDEMPOTENCY_MIDDLEWARE";

/// How stale a process's view of the flag may be.
pub const REFRESH: Duration = Duration::from_millis(400);

/// How long one read of the flag may take (a read that runs out keeps the last value, and the
/// next request tries again): with [`REFRESH`], a flip is seen within a second.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_millis(500);

const NEVER: u64 = u64::MAX;

pub(crate) struct FlagCache {
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

impl FlagCache {
    pub(crate) fn new(default: bool) -> Self {
        Self {
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

    /// The current value, re-read from Postgres when older than [`REFRESH`]. One request
    /// refreshes at a time; the others use the value they have. A failed read keeps the last
    /// known value.
    pub(crate) async fn get(&self, pool: &PgPool, timeout: Duration) -> bool {
        let last = self.refreshed_at.load(Ordering::Acquire);
        let now = self.now_ms();
        let due = last == NEVER || now.saturating_sub(last) >= REFRESH.as_millis() as u64;
        if due && !self.refreshing.swap(true, Ordering::AcqRel) {
            let _latch = Latch(&self.refreshing);
            let read = async {
                let mut conn = raptor_db::conn(pool).await?;
                let row = raptor_db::query_scalar::<bool>(
                    "select enabled from feature_flags where name = $1",
                )
                .bind(FLAG_IDEMPOTENCY_MIDDLEWARE)
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
                    tracing::warn!(error = %err, "could not read FLAG_IDEMPOTENCY_MIDDLEWARE; keeping last value");
                }
                Err(_) => {
                    tracing::warn!(
                        "reading FLAG_IDEMPOTENCY_MIDDLEWARE timed out; keeping last value"
                    );
                }
            }
        }
        self.value.load(Ordering::Acquire)
    }

    pub(crate) fn set_local(&self, enabled: bool) {
        self.value.store(enabled, Ordering::Release);
        self.refreshed_at.store(self.now_ms(), Ordering::Release);
    }
}

/// Stores the run-time override; other processes see it within [`REFRESH`].
pub(crate) async fn store(
    conn: &mut PgConnection,
    enabled: bool,
    updated_by: Option<i32>,
) -> Result<(), sqlx::Error> {
    raptor_db::query(
        "insert into feature_flags (name, enabled, updated_by, updated_at)
         values ($1, $2, $3, now())
         on conflict (name) do update
            set enabled = excluded.enabled, updated_by = excluded.updated_by, updated_at = now()",
    )
    .bind(FLAG_IDEMPOTENCY_MIDDLEWARE)
    .bind(enabled)
    .bind(updated_by)
    .execute(conn)
    .await?;
    Ok(())
}
