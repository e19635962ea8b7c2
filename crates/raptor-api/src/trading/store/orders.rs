//! Order rows: the insert (with its execution's effects), evaluation verdicts, ending an
//! open order, and the reads.

use chrono::{DateTime, Utc};
use raptor_engine::{Execution, OrderClass, OrderSpec, OrderStatus};
use raptor_idempotency::PendingCompletion;
use rust_decimal::Decimal;
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use super::fills::{filled_price, leg_index, ExecutionArrays};
use crate::error::{ApiResult, ResultExt};

/// What a new order row holds.
pub(crate) struct NewOrder<'a> {
    pub(crate) id: Uuid,
    pub(crate) user_id: i32,
    pub(crate) client_order_id: String,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) purpose: &'static str,
    pub(crate) spec: &'a OrderSpec,
    pub(crate) status: OrderStatus,
    pub(crate) reserved_cash: Decimal,
    pub(crate) execution: Option<&'a Execution>,
    pub(crate) at: DateTime<Utc>,
    /// When a resting order stops being good (`None`: until canceled, or not resting).
    pub(crate) expires_at: Option<DateTime<Utc>>,
    /// The newest quote event of its symbols when it was placed ([`super::quotes::Quotes::sequence`]):
    /// quote sweeps judge it against the later events only.
    pub(crate) quote_seq: i64,
}

/// Whether `client_order_id` is taken on this (locked) account.
pub(crate) async fn client_order_id_created(
    conn: &mut PgConnection,
    user_id: i32,
    client_order_id: &str,
) -> ApiResult<Option<chrono::DateTime<chrono::Utc>>> {
    raptor_db::query_scalar(
        "select created_at from paper_orders where user_id = $1 and client_order_id = $2",
    )
    .bind(user_id)
    .bind(client_order_id)
    .fetch_optional(conn)
    .await
    .context("check client_order_id")
}

/// Writes a new order with its legs, its audit rows, when it filled its fills, positions and
/// cash, and the idempotency key's completion (`completion`, the answer placing gives), in one
/// statement: the statement's row, for [`PendingCompletion::written`]. `None` when the account
/// already has an order with this `client_order_id` (the unique index decides; nothing is
/// written, the audit rows and the completion neither, and the transaction stays usable).
///
/// The statement is assembled from named pieces (`raptor_db::push_insert!`/`push_unnest!`):
/// every value is written beside its column and bound where it lands, and the completion,
/// with its fence, is a piece of its own ([`PendingCompletion::push_cte`]). Its text depends
/// only on its shape, so it is prepared once per connection.
pub(crate) async fn insert_order(
    conn: &mut PgConnection,
    order: &NewOrder<'_>,
    audit: crate::audit::Rows,
    completion: &PendingCompletion,
) -> ApiResult<Option<PgRow>> {
    let spec = order.spec;
    let simple_leg = (spec.class == OrderClass::Simple)
        .then(|| spec.legs.first())
        .flatten();
    let (filled_qty, filled_avg_price, fees, filled_at) = match order.execution {
        Some(execution) => (
            spec.qty,
            Some(filled_price(spec, execution)),
            execution.fees,
            Some(order.at),
        ),
        None => (Decimal::ZERO, None, Decimal::ZERO, None),
    };
    let fill_of = |index: usize| {
        order
            .execution
            .and_then(|e| e.fills.iter().find(|f| f.leg_index == index))
    };
    let legs = &spec.legs;

    let mut sql = raptor_db::statement("with o as (");
    raptor_db::push_insert!(&mut sql, "paper_orders", {
        id: order.id,
        user_id: order.user_id,
        client_order_id: &order.client_order_id,
        idempotency_key: &order.idempotency_key,
        purpose: order.purpose,
        order_class: spec.class.as_str(),
        order_type: spec.order_type.as_str(),
        time_in_force: spec.time_in_force.as_str(),
        symbol: simple_leg.map(|l| l.instrument.symbol().to_owned()),
        side: simple_leg.map(|l| l.side.as_str()),
        position_intent: simple_leg.map(|l| l.position_intent.as_str()),
        qty: spec.qty,
        limit_price: spec.limit_price,
        status: order.status.as_str(),
        filled_qty: filled_qty,
        filled_avg_price: filled_avg_price,
        reserved_cash: order.reserved_cash,
        fees: fees,
        created_at: order.at,
        updated_at: order.at,
        filled_at: filled_at,
        expires_at: order.expires_at,
        quote_seq: order.quote_seq,
    });
    sql.push(
        "
            on conflict on constraint uq_paper_orders_client_order_id do nothing
            returning id),
        legs as (
            insert into paper_order_legs
                (order_id, leg_index, symbol, side, position_intent, ratio_qty, qty, filled_qty,
                 filled_avg_price)
            select o.id, l.leg_index, l.symbol, l.side, l.position_intent, l.ratio_qty, l.qty,
                   l.filled_qty, l.filled_avg_price
              from o, ",
    );
    raptor_db::push_unnest!(&mut sql, "l", {
        leg_index: "smallint[]" = (0..legs.len()).map(leg_index).collect::<Vec<_>>(),
        symbol: "text[]" = legs.iter().map(|l| l.instrument.symbol().to_owned()).collect::<Vec<_>>(),
        side: "text[]" = legs.iter().map(|l| l.side.as_str()).collect::<Vec<_>>(),
        position_intent: "text[]" = legs.iter().map(|l| l.position_intent.as_str()).collect::<Vec<_>>(),
        ratio_qty: "integer[]" = legs
            .iter()
            .map(|l| i32::try_from(l.ratio_qty).unwrap_or(i32::MAX))
            .collect::<Vec<_>>(),
        qty: "numeric[]" = legs.iter().map(|l| l.fill_qty(spec.qty)).collect::<Vec<_>>(),
        filled_qty: "numeric[]" = (0..legs.len())
            .map(|i| fill_of(i).map_or(Decimal::ZERO, |f| f.qty))
            .collect::<Vec<_>>(),
        filled_avg_price: "numeric[]" = (0..legs.len())
            .map(|i| fill_of(i).map(|f| f.price))
            .collect::<Vec<_>>(),
    });
    sql.push(
        "),
        audit as (
            insert into audit_log (user_id, action, context, request_id)
            select a.user_id, a.action, a.context, ",
    )
    .push_bind(audit.request_id)
    .push(" from ");
    raptor_db::push_unnest!(&mut sql, "a", {
        user_id: "integer[]" = audit.users,
        action: "text[]" = audit.actions,
        context: "jsonb[]" = audit.contexts,
    });
    sql.push(" where exists (select 1 from o)),\n");
    ExecutionArrays::new(order.execution).push_effects(&mut sql, order.user_id, order.at);
    sql.push(",\n");
    completion.push_cte(&mut sql, "exists (select 1 from o)");
    sql.push("\nselect (select count(*) from o) as written, ")
        .push(PendingCompletion::COMPLETED_COLUMN);

    let row = raptor_db::built(&mut sql)
        .fetch_one(conn)
        .await
        .context("insert order")?;
    let inserted = row.try_get::<i64, _>("written").context("insert order")? == 1;
    Ok(inserted.then_some(row))
}

/// Records the verdict of a resting order's last evaluation (`None`: not marketable). True when
/// it changed, i.e. when it is worth an audit row.
pub(crate) async fn note_evaluation(
    conn: &mut PgConnection,
    order_id: Uuid,
    code: Option<&str>,
) -> ApiResult<bool> {
    let changed = raptor_db::query(
        "update paper_orders set last_evaluation_code = $2
          where id = $1 and last_evaluation_code is distinct from $2",
    )
    .bind(order_id)
    .bind(code)
    .execute(conn)
    .await
    .context("note evaluation")?
    .rows_affected();
    Ok(changed > 0)
}

/// Ends an open order as `canceled` or `expired`, releasing its reservation (guarded on
/// `status = 'new'`); false if it was no longer open.
pub(crate) async fn end_open_order(
    conn: &mut PgConnection,
    order_id: Uuid,
    status: OrderStatus,
    at: DateTime<Utc>,
) -> ApiResult<bool> {
    Ok(raptor_db::query(
        "update paper_orders
            set status = $2, reserved_cash = 0, updated_at = $3,
                canceled_at = case when $2 = 'canceled' then $3 else canceled_at end
          where id = $1 and status = 'new'",
    )
    .bind(order_id)
    .bind(status.as_str())
    .bind(at)
    .execute(conn)
    .await
    .context("end open order")?
    .rows_affected()
        == 1)
}

/// A `paper_orders` row as stored (`dto` renders it).
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct OrderRow {
    pub(crate) id: Uuid,
    pub(crate) client_order_id: String,
    pub(crate) purpose: String,
    pub(crate) order_class: String,
    pub(crate) order_type: String,
    pub(crate) time_in_force: String,
    pub(crate) symbol: Option<String>,
    pub(crate) side: Option<String>,
    pub(crate) position_intent: Option<String>,
    pub(crate) qty: Decimal,
    pub(crate) limit_price: Option<Decimal>,
    pub(crate) status: String,
    pub(crate) filled_qty: Decimal,
    pub(crate) filled_avg_price: Option<Decimal>,
    pub(crate) fees: Decimal,
    pub(crate) created_at: DateTime<Utc>,
    pub(crate) updated_at: DateTime<Utc>,
    pub(crate) filled_at: Option<DateTime<Utc>>,
    pub(crate) canceled_at: Option<DateTime<Utc>>,
}

/// A `paper_order_legs` row as stored.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct LegRow {
    pub(crate) order_id: Uuid,
    pub(crate) symbol: String,
    pub(crate) side: String,
    pub(crate) position_intent: String,
    pub(crate) ratio_qty: i32,
    pub(crate) qty: Decimal,
    pub(crate) filled_qty: Decimal,
    pub(crate) filled_avg_price: Option<Decimal>,
}

/// An order with its legs, as stored.
#[derive(Debug, Clone)]
pub(crate) struct OrderRecord {
    pub(crate) row: OrderRow,
    pub(crate) legs: Vec<LegRow>,
}

const ORDER_COLUMNS: &str = "id, client_order_id, purpose, order_class, order_type, time_in_force,
    symbol, side, position_intent, qty, limit_price, status, filled_qty, filled_avg_price,
    fees, created_at, updated_at, filled_at, canceled_at";

async fn load_legs(conn: &mut PgConnection, ids: &[Uuid]) -> ApiResult<Vec<LegRow>> {
    raptor_db::query_as(
        "select order_id, symbol, side, position_intent, ratio_qty, qty, filled_qty, filled_avg_price
           from paper_order_legs where order_id = any($1) order by order_id, leg_index",
    )
    .bind(ids)
    .fetch_all(conn)
    .await
    .context("load legs")
}

/// One order of the account, for the response or for a cancel (`lock` takes its row lock).
pub(crate) async fn find_order(
    conn: &mut PgConnection,
    user_id: i32,
    id: Uuid,
    lock: bool,
) -> ApiResult<Option<OrderRecord>> {
    let suffix = if lock { " for update" } else { "" };
    let row: Option<OrderRow> = raptor_db::query_as(&format!(
        "select {ORDER_COLUMNS} from paper_orders where user_id = $1 and id = $2{suffix}"
    ))
    .bind(user_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
    .context("find order")?;
    let Some(row) = row else {
        return Ok(None);
    };
    let legs = load_legs(conn, &[row.id]).await?;
    Ok(Some(OrderRecord { row, legs }))
}

/// Which orders a page of the history holds (`GET /api/trading/orders`).
#[derive(Debug, Clone, Default)]
pub(crate) struct OrderFilter<'a> {
    /// The statuses to list.
    pub(crate) statuses: &'a [&'a str],
    /// Orders with a leg on this symbol.
    pub(crate) symbol: Option<&'a str>,
    /// Created strictly after.
    pub(crate) after: Option<DateTime<Utc>>,
    /// Created strictly before.
    pub(crate) until: Option<DateTime<Utc>>,
    /// Strictly older than this `(created_at, id)`: the last order of the previous page.
    pub(crate) before: Option<(DateTime<Utc>, Uuid)>,
}

/// A page of the account's orders, newest first on `(created_at, id)`: at most `limit` rows
/// (callers ask for one more than they show, to know whether there is more). Only the filters
/// given are in the statement, so each shape gets a plan that walks
/// `idx_paper_orders_user_created_id` from the cursor.
pub(crate) async fn list_orders(
    conn: &mut PgConnection,
    user_id: i32,
    filter: &OrderFilter<'_>,
    limit: i64,
) -> ApiResult<Vec<OrderRecord>> {
    let mut sql = format!(
        "select {ORDER_COLUMNS} from paper_orders o where user_id = $1 and status = any($2)"
    );
    let mut n = 3;
    let mut clause = |text: &str| {
        sql.push_str(&text.replace('#', &format!("${n}")));
        n += 1;
    };
    if filter.symbol.is_some() {
        // Every order has at least one leg, simple orders too.
        clause(
            " and exists (select 1 from paper_order_legs l where l.order_id = o.id and l.symbol = #)",
        );
    }
    if filter.after.is_some() {
        clause(" and created_at > #");
    }
    if filter.until.is_some() {
        clause(" and created_at < #");
    }
    if filter.before.is_some() {
        clause(" and (created_at, id) < (#");
        clause(", #)");
    }
    clause(" order by created_at desc, id desc limit #");
    let mut query = raptor_db::query_as::<OrderRow>(&sql)
        .bind(user_id)
        .bind(filter.statuses);
    if let Some(symbol) = filter.symbol {
        query = query.bind(symbol);
    }
    if let Some(after) = filter.after {
        query = query.bind(after);
    }
    if let Some(until) = filter.until {
        query = query.bind(until);
    }
    if let Some((at, id)) = filter.before {
        query = query.bind(at).bind(id);
    }
    let rows = query
        .bind(limit)
        .fetch_all(&mut *conn)
        .await
        .context("list orders")?;
    with_legs(conn, rows).await
}

/// `rows` with their legs, read in one statement.
async fn with_legs(conn: &mut PgConnection, rows: Vec<OrderRow>) -> ApiResult<Vec<OrderRecord>> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut legs: std::collections::HashMap<Uuid, Vec<LegRow>> = std::collections::HashMap::new();
    for leg in load_legs(conn, &ids).await? {
        legs.entry(leg.order_id).or_default().push(leg);
    }
    Ok(rows
        .into_iter()
        .map(|row| {
            let own = legs.remove(&row.id).unwrap_or_default();
            OrderRecord { row, legs: own }
        })
        .collect())
}

/// The account's orders among `ids` (those that exist), in two statements whatever their
/// number: the trade-updates stream reads a page of events' orders at once.
pub(crate) async fn find_orders(
    conn: &mut PgConnection,
    user_id: i32,
    ids: &[Uuid],
) -> ApiResult<Vec<OrderRecord>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<OrderRow> = raptor_db::query_as(&format!(
        "select {ORDER_COLUMNS} from paper_orders where user_id = $1 and id = any($2)"
    ))
    .bind(user_id)
    .bind(ids)
    .fetch_all(&mut *conn)
    .await
    .context("find orders")?;
    with_legs(conn, rows).await
}

/// The account's order with this `client_order_id`.
pub(crate) async fn find_order_by_client_order_id(
    conn: &mut PgConnection,
    user_id: i32,
    client_order_id: &str,
) -> ApiResult<Option<OrderRecord>> {
    let row: Option<OrderRow> = raptor_db::query_as(&format!(
        "select {ORDER_COLUMNS} from paper_orders where user_id = $1 and client_order_id = $2"
    ))
    .bind(user_id)
    .bind(client_order_id)
    .fetch_optional(&mut *conn)
    .await
    .context("find order by client_order_id")?;
    let Some(row) = row else {
        return Ok(None);
    };
    let legs = load_legs(conn, &[row.id]).await?;
    Ok(Some(OrderRecord { row, legs }))
}
