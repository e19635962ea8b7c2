//! Cancelling an order, resetting the account.

use raptor_engine::{OrderEvent, OrderStatus, Transition};
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{account_state, expire_due, Desk};
use crate::audit::{self, AuditAction, AuditEvent};
use crate::error::{ApiError, ApiResult, ResultExt};
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

/// Resets the paper account: open orders canceled, positions gone, starting cash.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn reset(
    conn: &mut PgConnection,
    desk: &Desk,
    user_id: i32,
) -> ApiResult<AccountResponse> {
    let now = desk.now();
    let (before, account, open, _) = account_state(conn, user_id, now, None, &[]).await?;
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
            }),
        ),
    )
    .await
    .context("audit reset")?;
    super::account(conn, user_id).await
}
