//! Cancelling an order, resetting the account.

use raptor_engine::{OrderEvent, OrderStatus, Transition};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::book::account_state;
use super::expiry::expire_due;
use raptor_idempotency::{IdempotencyKey, Policy, Tier1};

use crate::audit::{self, AuditAction, AuditEvent};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::trading::desk::Desk;
use crate::trading::dto::{AccountResponse, OrderResponse};
use crate::trading::store;

/// Cancels an open order; a canceled one is returned unchanged (no new audit row).
#[tracing::instrument(skip_all, fields(user.id = user_id, order.id = %order_id))]
pub(crate) async fn cancel(
    conn: &mut PgConnection,
    desk: &Desk,
    user_id: i32,
    order_id: Uuid,
) -> ApiResult<OrderResponse> {
    let now = desk.now();
    store::lock_account(conn, user_id).await?;
    expire_due(conn, user_id, now).await?;
    let order = store::find_order(conn, user_id, order_id, true)
        .await?
        .ok_or(ApiError::NotFound("order"))?;
    let stored = order.row.status.clone();
    let status: OrderStatus = stored
        .parse()
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("bad stored status {stored}")))?;
    match status.apply(OrderEvent::Cancel) {
        Ok(Transition::NoOp) => return OrderResponse::try_from(order),
        Ok(Transition::To(_)) => {
            store::end_open_order(conn, order_id, OrderStatus::Canceled, now).await?;
            audit::record(
                conn,
                AuditEvent::new(
                    Some(user_id),
                    AuditAction::OrderCanceled,
                    json!({ "order_id": order_id, "reason": "requested" }),
                ),
            )
            .await
            .context("audit cancel")?;
        }
        Err(_) => return Err(ApiError::OrderNotCancelable { status: stored }),
    }
    store::find_order(conn, user_id, order_id, false)
        .await?
        .map(OrderResponse::try_from)
        .ok_or(ApiError::NotFound("order"))?
}

/// How long a reset id is remembered: the retention of the Tier 1 key it comes from.
const RESET_ID_RETENTION: std::time::Duration = <Tier1 as Policy>::TTL;

/// The natural key of a reset sent with `key`, as an order's derived `client_order_id` is: the
/// same for every retry of one key, never the key itself.
pub(crate) fn reset_id(user_id: i32, key: IdempotencyKey) -> Uuid {
    super::client_order_id::natural_key(user_id, "account_reset", key, "")
}

/// Resets the paper account: open orders canceled, positions gone, starting cash.
///
/// With `reset_id` (the request sent an `Idempotency-Key`), a reset already made with that id
/// within the key's retention is refused (`422 duplicate_reset`): with the idempotency
/// mechanism switched off by an operator, a retried reset is refused instead of wiping the
/// trades made since. The id is kept in the reset's audit row.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn reset(
    conn: &mut PgConnection,
    desk: &Desk,
    user_id: i32,
    reset_id: Option<Uuid>,
) -> ApiResult<AccountResponse> {
    let now = desk.now();
    let (before, account, open, _) = account_state(conn, user_id, now, None, &[]).await?;
    if let Some(id) = reset_id {
        // Under the account lock: a concurrent reset with the same id has committed its audit
        // row, or waits behind this one.
        let since = now
            - chrono::Duration::from_std(RESET_ID_RETENTION)
                .unwrap_or_else(|_| chrono::Duration::days(1));
        if store::reset_seen(conn, user_id, id, since).await? {
            return Err(ApiError::invalid(
                ErrorCode::DuplicateReset,
                format!("this Idempotency-Key already reset the account (reset {id})"),
            ));
        }
    }
    for order in &open {
        store::end_open_order(conn, order.id, OrderStatus::Canceled, now).await?;
        audit::record(
            conn,
            AuditEvent::new(
                Some(user_id),
                AuditAction::OrderCanceled,
                json!({ "order_id": order.id, "reason": "account_reset" }),
            ),
        )
        .await
        .context("audit reset cancel")?;
    }
    let cash = desk.limits().starting_cash;
    store::reset_account(conn, user_id, cash).await?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::AccountReset,
            json!({
                "previous_cash": before.cash.to_string(),
                "previous_realized_pnl": before.realized_pnl.to_string(),
                "positions_cleared": account.positions.values().filter(|p| !p.qty.is_zero()).count(),
                "orders_canceled": open.len(),
                "cash": cash.to_string(),
                "reset_id": reset_id,
            }),
        ),
    )
    .await
    .context("audit reset")?;
    super::book::account(conn, user_id).await
}
