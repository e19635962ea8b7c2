//! Expiry: day orders at the session close, orders on options at their contract's last close.

use serde_json::json;
use sqlx::{PgConnection, PgPool};

use super::Desk;
use crate::audit::{self, AuditAction, AuditEvent};
use crate::error::{ApiResult, ResultExt};
use crate::trading::store;

/// Accounts swept per transaction by `raptor orders expire` and the schedule.
const ACCOUNTS_PER_SWEEP: i64 = 100;

/// Expires the open orders that stopped being good by `now` (day orders at the session close,
/// orders on options at their last close) of `user_id`, whose account the caller has locked.
/// Each expiry frees its reservation and is audited, in the caller's transaction.
pub(crate) async fn expire_due(
    conn: &mut PgConnection,
    user_id: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<usize> {
    let expired = store::expire_due(conn, user_id, now).await?;
    for order in &expired {
        let reason = if order.time_in_force == "day" {
            "session_close"
        } else {
            "contract_expiry"
        };
        audit::record(
            conn,
            AuditEvent::new(
                Some(order.user_id),
                AuditAction::OrderExpired,
                json!({ "order_id": order.id, "reason": reason,
                        "expires_at": order.expires_at }),
            ),
        )
        .await
        .context("audit expiry")?;
    }
    Ok(expired.len())
}

/// One sweep of every account's due orders, [`ACCOUNTS_PER_SWEEP`] accounts at a time (each batch its own
/// transaction, so it never holds many locks): `raptor orders expire` and the schedule.
pub(crate) async fn expire_orders(db: &PgPool, desk: &Desk) -> ApiResult<usize> {
    let mut total = 0;
    loop {
        let now = desk.now();
        let mut tx = db.begin().await.context("begin")?;
        // Account by account, each locked first: the lock order of the book (an order writer
        // holds its account's row before any of its orders, and the reservation trigger
        // updates that row), so the sweep cannot deadlock with orders or quote updates. An
        // account another transaction holds is skipped: touching it expires its orders anyway.
        let accounts =
            store::lock_accounts_with_due_orders(&mut tx, now, ACCOUNTS_PER_SWEEP).await?;
        for &user_id in &accounts {
            total += expire_due(&mut tx, user_id, now).await?;
        }
        tx.commit().await.context("commit expiry")?;
        if i64::try_from(accounts.len()).unwrap_or(i64::MAX) < ACCOUNTS_PER_SWEEP {
            return Ok(total);
        }
    }
}

/// Expires the caller's due orders before a read, so reads never show a dead order as open.
/// Usually one cheap indexed look; when there is something to expire, the account is locked
/// first (the book's lock order).
pub(crate) async fn expire_for_read(db: &PgPool, desk: &Desk, user_id: i32) -> ApiResult<()> {
    let now = desk.now();
    let mut conn = raptor_db::conn(db).await.context("acquire")?;
    let due = store::has_due_orders(&mut conn, user_id, now).await?;
    conn.finish().await.context("finish")?;
    if !due {
        return Ok(());
    }
    let mut tx = db.begin().await.context("begin")?;
    store::lock_account(&mut tx, user_id).await?;
    expire_due(&mut tx, user_id, now).await?;
    tx.commit().await.context("commit expiry")?;
    Ok(())
}
