//! Orders that stopped being good: finding and expiring them.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{ApiResult, ResultExt};

/// An order that stopped being good.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ExpiredOrder {
    pub(crate) id: Uuid,
    pub(crate) user_id: i32,
    pub(crate) time_in_force: String,
    pub(crate) expires_at: DateTime<Utc>,
}

/// Expires the open orders of `user_id` (whose account the caller has locked) that are no
/// longer good at `now`, freeing their reservations. The caller audits each.
pub(crate) async fn expire_due(
    conn: &mut PgConnection,
    user_id: i32,
    now: DateTime<Utc>,
) -> ApiResult<Vec<ExpiredOrder>> {
    raptor_db::query_as(
        "update paper_orders
            set status = 'expired', reserved_cash = 0, updated_at = $2
          where user_id = $1 and status = 'new' and expires_at <= $2
         returning id, user_id, time_in_force, expires_at",
    )
    .bind(user_id)
    .bind(now)
    .fetch_all(conn)
    .await
    .context("expire due orders")
}

/// Whether `user_id` has an open order that is no longer good at `now` (by index).
pub(crate) async fn has_due_orders(
    conn: &mut PgConnection,
    user_id: i32,
    now: DateTime<Utc>,
) -> ApiResult<bool> {
    raptor_db::query_scalar(
        "select exists (select 1 from paper_orders
                         where user_id = $1 and status = 'new' and expires_at <= $2)",
    )
    .bind(user_id)
    .bind(now)
    .fetch_one(conn)
    .await
    .context("due orders")
}

/// Locks (`FOR UPDATE SKIP LOCKED`) up to `limit` accounts that have an open order no longer
/// good at `now`; their ids.
pub(crate) async fn lock_accounts_with_due_orders(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    limit: i64,
) -> ApiResult<Vec<i32>> {
    raptor_db::query_scalar(
        "select a.user_id from paper_accounts a
          where a.user_id in (select distinct user_id from paper_orders
                               where status = 'new' and expires_at <= $1)
          order by a.user_id
          limit $2
          for update of a skip locked",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(conn)
    .await
    .context("accounts with due orders")
}
