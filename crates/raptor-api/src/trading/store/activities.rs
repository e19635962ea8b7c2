//! The activity feed, read from the rows the book already writes: fills (`paper_fills`),
//! cancels (`paper_orders.canceled_at`), order expiries (their `order.expired` audit row),
//! resets (their `account.reset` audit row) and option expiries and settlements (their
//! `position.expired` audit row). Each kind is one arm of [`ACTIVITIES`] with the same columns,
//! so a new kind is one more arm and one more `type`. The arms read from audit rows take their
//! time from the row's `created_at`, the database's `now()` of the transaction that wrote it.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{ApiResult, ResultExt};

/// One activity as read.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct ActivityRow {
    /// `<type>:<source row id>`, unique in the feed.
    pub(crate) id: String,
    pub(crate) kind: String,
    pub(crate) order_id: Option<Uuid>,
    pub(crate) symbol: Option<String>,
    pub(crate) side: Option<String>,
    pub(crate) qty: Option<Decimal>,
    pub(crate) price: Option<Decimal>,
    pub(crate) cash_delta: Decimal,
    pub(crate) occurred_at: DateTime<Utc>,
}

/// Every kind of activity of user `$1`. A fill's cash effect is what it moved: minus the signed
/// notional, and the order's fees on its first leg's fill.
const ACTIVITIES: &str = "
    select 'fill:' || f.id as id, 'fill' as kind, f.order_id, f.symbol, f.side, f.qty, f.price,
           (case when f.side = 'buy' then -1 else 1 end) * f.qty * f.price * f.multiplier
             - case when f.leg_index = 0 then o.fees else 0 end as cash_delta,
           f.filled_at as occurred_at
      from paper_fills f join paper_orders o on o.id = f.order_id
     where f.user_id = $1
    union all
    select 'cancel:' || o.id, 'cancel', o.id, o.symbol, o.side, o.qty - o.filled_qty,
           o.limit_price, 0, o.canceled_at
      from paper_orders o
     where o.user_id = $1 and o.status = 'canceled' and o.canceled_at is not null
    union all
    select 'order_expiry:' || a.id, 'order_expiry', o.id, o.symbol, o.side,
           o.qty - o.filled_qty, o.limit_price, 0, a.created_at
      from audit_log a join paper_orders o on o.id = (a.context->>'order_id')::uuid
     where a.user_id = $1 and a.action = 'order.expired' and o.user_id = $1
    union all
    select 'reset:' || a.id, 'reset', null, null, null, null, null,
           coalesce((a.context->>'cash')::numeric - (a.context->>'previous_cash')::numeric, 0),
           a.created_at
      from audit_log a
     where a.user_id = $1 and a.action = 'account.reset'
    union all
    select 'expiry:' || a.id,
           case when a.context->>'outcome' = 'cash' then 'settlement' else 'expiry' end,
           null, a.context->>'symbol', null, abs((a.context->>'qty')::numeric),
           (a.context->>'settlement_price')::numeric,
           coalesce((a.context->>'cash_delta')::numeric, 0), a.created_at
      from audit_log a
     where a.user_id = $1 and a.action = 'position.expired'";

/// A page of the feed, newest first on `(occurred_at, id)`, strictly older than `before`.
pub(crate) async fn list_activities(
    conn: &mut PgConnection,
    user_id: i32,
    before: Option<(DateTime<Utc>, &str)>,
    limit: i64,
) -> ApiResult<Vec<ActivityRow>> {
    let sql = format!(
        "select * from ({ACTIVITIES}) a
          where $2::timestamptz is null or (occurred_at, id) < ($2, $3)
          order by occurred_at desc, id desc limit $4"
    );
    raptor_db::query_as(&sql)
        .bind(user_id)
        .bind(before.map(|b| b.0))
        .bind(before.map(|b| b.1))
        .bind(limit)
        .fetch_all(conn)
        .await
        .context("list activities")
}
