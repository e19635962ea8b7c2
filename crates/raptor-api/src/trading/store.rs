//! SQL of the paper book. Every write takes `&mut PgConnection` (the caller's transaction).
//! Lock order, everywhere: quote row (quote updates only), then the account row, then its
//! positions by symbol — so concurrent writers cannot deadlock.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use raptor_engine::{
    Execution, Instrument, LegSpec, OpenOrder, OrderClass, OrderSpec, OrderStatus, OrderType,
    Position, PositionIntent, Quote, Side, TimeInForce,
};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use super::dto::{self, LegResponse, OrderResponse, PositionResponse};
use crate::error::{ApiError, ApiResult, ResultExt};

/// The account row, locked.
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AccountRow {
    pub(crate) mode: String,
    pub(crate) cash: Decimal,
    pub(crate) realized_pnl: Decimal,
}

/// Locks the account row (`FOR UPDATE`): every order-path transaction starts here.
pub(crate) async fn lock_account(conn: &mut PgConnection, user_id: i32) -> ApiResult<AccountRow> {
    sqlx::query_as(
        "select mode, cash, realized_pnl from paper_accounts where user_id = $1 for update",
    )
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("lock account")?
    .ok_or(ApiError::NotFound("paper account"))
}

/// Reads the account without locking.
pub(crate) async fn read_account(conn: &mut PgConnection, user_id: i32) -> ApiResult<AccountRow> {
    sqlx::query_as("select mode, cash, realized_pnl from paper_accounts where user_id = $1")
        .bind(user_id)
        .fetch_optional(conn)
        .await
        .context("read account")?
        .ok_or(ApiError::NotFound("paper account"))
}

#[derive(sqlx::FromRow)]
struct PositionRow {
    symbol: String,
    qty: Decimal,
    avg_entry_price: Decimal,
    realized_pnl: Decimal,
}

impl From<PositionRow> for Position {
    fn from(row: PositionRow) -> Self {
        Position {
            symbol: row.symbol,
            qty: row.qty,
            avg_entry_price: row.avg_entry_price,
            realized_pnl: row.realized_pnl,
        }
    }
}

/// The account's positions, locked in symbol order (call after [`lock_account`]).
pub(crate) async fn lock_positions(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<BTreeMap<String, Position>> {
    let rows: Vec<PositionRow> = sqlx::query_as(
        "select symbol, qty, avg_entry_price, realized_pnl from paper_positions
          where user_id = $1 order by symbol for update",
    )
    .bind(user_id)
    .fetch_all(conn)
    .await
    .context("lock positions")?;
    Ok(rows
        .into_iter()
        .map(|r| (r.symbol.clone(), r.into()))
        .collect())
}

/// Positions for reading (non-flat first, by symbol).
pub(crate) async fn list_positions(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Vec<PositionResponse>> {
    let rows: Vec<PositionRow> = sqlx::query_as(
        "select symbol, qty, avg_entry_price, realized_pnl from paper_positions
          where user_id = $1 and qty <> 0 order by symbol",
    )
    .bind(user_id)
    .fetch_all(conn)
    .await
    .context("list positions")?;
    Ok(rows
        .into_iter()
        .map(|r| PositionResponse {
            side: if r.qty.is_sign_negative() {
                "short"
            } else {
                "long"
            },
            symbol: r.symbol,
            qty: dto::qty(r.qty),
            avg_entry_price: dto::price(r.avg_entry_price),
            realized_pnl: dto::money(r.realized_pnl),
        })
        .collect())
}

/// Writes the new state of every touched position.
pub(crate) async fn save_positions(
    conn: &mut PgConnection,
    user_id: i32,
    positions: &[Position],
) -> ApiResult<()> {
    for p in positions {
        sqlx::query(
            "insert into paper_positions (user_id, symbol, qty, avg_entry_price, realized_pnl, updated_at)
             values ($1, $2, $3, $4, $5, now())
             on conflict (user_id, symbol) do update
                set qty = excluded.qty, avg_entry_price = excluded.avg_entry_price,
                    realized_pnl = excluded.realized_pnl, updated_at = now()",
        )
        .bind(user_id)
        .bind(&p.symbol)
        .bind(p.qty)
        .bind(p.avg_entry_price)
        .bind(p.realized_pnl)
        .execute(&mut *conn)
        .await
        .context("save position")?;
    }
    Ok(())
}

/// Applies an execution's cash and realized P&L to the (locked) account.
pub(crate) async fn apply_cash(
    conn: &mut PgConnection,
    user_id: i32,
    execution: &Execution,
) -> ApiResult<()> {
    sqlx::query(
        "update paper_accounts
            set cash = cash + $2, realized_pnl = realized_pnl + $3, updated_at = now()
          where user_id = $1",
    )
    .bind(user_id)
    .bind(execution.cash_delta)
    .bind(execution.realized_pnl)
    .execute(conn)
    .await
    .context("apply cash")?;
    Ok(())
}

/// Quotes for `symbols`. With `lock`, each row is share-locked (in symbol order) so that no
/// quote update can commit between this read and the end of the caller's transaction.
pub(crate) async fn quotes(
    conn: &mut PgConnection,
    symbols: &[String],
    lock: bool,
) -> ApiResult<BTreeMap<String, Quote>> {
    let suffix = if lock {
        " order by symbol for share"
    } else {
        ""
    };
    let rows: Vec<(String, Decimal, Decimal)> = sqlx::query_as(&format!(
        "select symbol, bid, ask from quotes where symbol = any($1){suffix}"
    ))
    .bind(symbols)
    .fetch_all(conn)
    .await
    .context("load quotes")?;
    Ok(rows
        .into_iter()
        .map(|(symbol, bid, ask)| (symbol, Quote { bid, ask }))
        .collect())
}

/// Upserts a quote; the row lock serialises concurrent updates of one symbol.
pub(crate) async fn upsert_quote(
    conn: &mut PgConnection,
    symbol: &str,
    bid: Decimal,
    ask: Decimal,
    updated_by: Option<i32>,
) -> ApiResult<()> {
    sqlx::query(
        "insert into quotes (symbol, bid, ask, updated_by, updated_at) values ($1, $2, $3, $4, now())
         on conflict (symbol) do update
            set bid = excluded.bid, ask = excluded.ask, updated_by = excluded.updated_by,
                updated_at = now()",
    )
    .bind(symbol)
    .bind(bid)
    .bind(ask)
    .bind(updated_by)
    .execute(conn)
    .await
    .context("upsert quote")?;
    Ok(())
}

/// Users with a resting order that has a leg on `symbol`, in id order (the lock order).
pub(crate) async fn users_resting_on(conn: &mut PgConnection, symbol: &str) -> ApiResult<Vec<i32>> {
    sqlx::query_scalar(
        "select distinct o.user_id from paper_orders o
           join paper_order_legs l on l.order_id = o.id
          where o.status = 'new' and l.symbol = $1
          order by o.user_id",
    )
    .bind(symbol)
    .fetch_all(conn)
    .await
    .context("resting users")
}

/// What a new order row holds.
pub(crate) struct NewOrder<'a> {
    pub(crate) id: Uuid,
    pub(crate) user_id: i32,
    pub(crate) client_order_id: &'a str,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) purpose: &'static str,
    pub(crate) spec: &'a OrderSpec,
    pub(crate) status: OrderStatus,
    pub(crate) reserved_cash: Decimal,
    pub(crate) execution: Option<&'a Execution>,
    pub(crate) at: DateTime<Utc>,
    /// When a resting order stops being good (`None`: until canceled, or not resting).
    pub(crate) expires_at: Option<DateTime<Utc>>,
}

/// Whether `client_order_id` is taken on this (locked) account.
pub(crate) async fn client_order_id_created(
    conn: &mut PgConnection,
    user_id: i32,
    client_order_id: &str,
) -> ApiResult<Option<chrono::DateTime<chrono::Utc>>> {
    sqlx::query_scalar(
        "select created_at from paper_orders where user_id = $1 and client_order_id = $2",
    )
    .bind(user_id)
    .bind(client_order_id)
    .fetch_optional(conn)
    .await
    .context("check client_order_id")
}

/// Records the verdict of a resting order's last evaluation (`None`: not marketable). True when
/// it changed, i.e. when it is worth an audit row.
pub(crate) async fn note_evaluation(
    conn: &mut PgConnection,
    order_id: Uuid,
    code: Option<&str>,
) -> ApiResult<bool> {
    let changed = sqlx::query(
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

/// Inserts an order, its legs and (when it filled) its fills.
pub(crate) async fn insert_order(conn: &mut PgConnection, order: &NewOrder<'_>) -> ApiResult<()> {
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
    sqlx::query(
        "insert into paper_orders
            (id, user_id, client_order_id, idempotency_key, purpose, order_class, order_type,
             time_in_force, symbol, side, position_intent, qty, limit_price, status, filled_qty,
             filled_avg_price, reserved_cash, fees, created_at, updated_at, filled_at, expires_at)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
                 $19, $19, $20, $21)",
    )
    .bind(order.id)
    .bind(order.user_id)
    .bind(order.client_order_id)
    .bind(&order.idempotency_key)
    .bind(order.purpose)
    .bind(spec.class.as_str())
    .bind(spec.order_type.as_str())
    .bind(spec.time_in_force.as_str())
    .bind(simple_leg.map(|l| l.instrument.symbol().to_owned()))
    .bind(simple_leg.map(|l| l.side.as_str()))
    .bind(simple_leg.map(|l| l.position_intent.as_str()))
    .bind(spec.qty)
    .bind(spec.limit_price)
    .bind(order.status.as_str())
    .bind(filled_qty)
    .bind(filled_avg_price)
    .bind(order.reserved_cash)
    .bind(fees)
    .bind(order.at)
    .bind(filled_at)
    .bind(order.expires_at)
    .execute(&mut *conn)
    .await
    .context("insert order")?;

    for (index, leg) in spec.legs.iter().enumerate() {
        let fill = order
            .execution
            .and_then(|e| e.fills.iter().find(|f| f.leg_index == index));
        sqlx::query(
            "insert into paper_order_legs
                (order_id, leg_index, symbol, side, position_intent, ratio_qty, qty, filled_qty,
                 filled_avg_price)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(order.id)
        .bind(i16::try_from(index).unwrap_or(i16::MAX))
        .bind(leg.instrument.symbol())
        .bind(leg.side.as_str())
        .bind(leg.position_intent.as_str())
        .bind(i32::try_from(leg.ratio_qty).unwrap_or(i32::MAX))
        .bind(leg.fill_qty(spec.qty))
        .bind(fill.map_or(Decimal::ZERO, |f| f.qty))
        .bind(fill.map(|f| f.price))
        .execute(&mut *conn)
        .await
        .context("insert leg")?;
    }
    if let Some(execution) = order.execution {
        insert_fills(conn, order.id, order.user_id, execution, order.at).await?;
    }
    Ok(())
}

/// The order-level fill price: the leg price for simple orders, the net per unit for mleg.
fn filled_price(spec: &OrderSpec, execution: &Execution) -> Decimal {
    match (spec.class, execution.fills.first()) {
        (OrderClass::Simple, Some(fill)) => fill.price,
        _ => execution.net_price,
    }
}

async fn insert_fills(
    conn: &mut PgConnection,
    order_id: Uuid,
    user_id: i32,
    execution: &Execution,
    at: DateTime<Utc>,
) -> ApiResult<()> {
    for fill in &execution.fills {
        sqlx::query(
            "insert into paper_fills
                (order_id, user_id, leg_index, symbol, side, qty, price, multiplier, realized_pnl,
                 filled_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(order_id)
        .bind(user_id)
        .bind(i16::try_from(fill.leg_index).unwrap_or(i16::MAX))
        .bind(&fill.symbol)
        .bind(fill.side.as_str())
        .bind(fill.qty)
        .bind(fill.price)
        .bind(i32::try_from(fill.multiplier.mantissa()).unwrap_or(i32::MAX))
        .bind(fill.realized_pnl)
        .bind(at)
        .execute(&mut *conn)
        .await
        .context("insert fill")?;
    }
    Ok(())
}

/// Marks a resting order filled by `execution` (guarded on `status = 'new'`); false if it was
/// no longer open.
pub(crate) async fn fill_resting(
    conn: &mut PgConnection,
    order_id: Uuid,
    user_id: i32,
    spec: &OrderSpec,
    execution: &Execution,
    at: DateTime<Utc>,
) -> ApiResult<bool> {
    let updated = sqlx::query(
        "update paper_orders
            set status = 'filled', filled_qty = qty, filled_avg_price = $2, fees = $3,
                reserved_cash = 0, filled_at = $4, updated_at = $4
          where id = $1 and status = 'new'",
    )
    .bind(order_id)
    .bind(filled_price(spec, execution))
    .bind(execution.fees)
    .bind(at)
    .execute(&mut *conn)
    .await
    .context("fill resting order")?
    .rows_affected();
    if updated == 0 {
        return Ok(false);
    }
    for fill in &execution.fills {
        sqlx::query(
            "update paper_order_legs set filled_qty = $3, filled_avg_price = $4
              where order_id = $1 and leg_index = $2",
        )
        .bind(order_id)
        .bind(i16::try_from(fill.leg_index).unwrap_or(i16::MAX))
        .bind(fill.qty)
        .bind(fill.price)
        .execute(&mut *conn)
        .await
        .context("fill resting leg")?;
    }
    insert_fills(conn, order_id, user_id, execution, at).await?;
    Ok(true)
}

/// Ends an open order as `canceled` or `expired`, releasing its reservation (guarded on
/// `status = 'new'`); false if it was no longer open.
pub(crate) async fn end_open_order(
    conn: &mut PgConnection,
    order_id: Uuid,
    status: OrderStatus,
    at: DateTime<Utc>,
) -> ApiResult<bool> {
    Ok(sqlx::query(
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

/// An order that stopped being good.
#[derive(Debug, sqlx::FromRow)]
pub(crate) struct ExpiredOrder {
    pub(crate) id: Uuid,
    pub(crate) user_id: i32,
    pub(crate) time_in_force: String,
    pub(crate) expires_at: DateTime<Utc>,
}

/// Expires open orders whose `expires_at` is at or before `now`: those of `user_id`, or (with
/// `None`) up to `limit` of anyone's, skipping rows another transaction holds. Frees their
/// reservations. The caller audits each.
pub(crate) async fn expire_due(
    conn: &mut PgConnection,
    user_id: Option<i32>,
    now: DateTime<Utc>,
    limit: i64,
) -> ApiResult<Vec<ExpiredOrder>> {
    sqlx::query_as(
        "update paper_orders o
            set status = 'expired', reserved_cash = 0, updated_at = $2
          where o.id in (select id from paper_orders
                          where status = 'new' and expires_at <= $2
                            and ($1::integer is null or user_id = $1)
                          order by expires_at
                          limit $3
                          for update skip locked)
            and o.status = 'new'
         returning o.id, o.user_id, o.time_in_force, o.expires_at",
    )
    .bind(user_id)
    .bind(now)
    .bind(limit)
    .fetch_all(conn)
    .await
    .context("expire due orders")
}

/// Resets the account: cash, P&L, positions (open orders are canceled by the caller first).
pub(crate) async fn reset_account(
    conn: &mut PgConnection,
    user_id: i32,
    cash: Decimal,
) -> ApiResult<()> {
    sqlx::query("delete from paper_positions where user_id = $1")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("reset positions")?;
    sqlx::query(
        "update paper_accounts set cash = $2, realized_pnl = 0, updated_at = now() where user_id = $1",
    )
    .bind(user_id)
    .bind(cash)
    .execute(conn)
    .await
    .context("reset cash")?;
    Ok(())
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct OrderRow {
    id: Uuid,
    client_order_id: String,
    purpose: String,
    order_class: String,
    order_type: String,
    time_in_force: String,
    symbol: Option<String>,
    side: Option<String>,
    position_intent: Option<String>,
    qty: Decimal,
    limit_price: Option<Decimal>,
    status: String,
    filled_qty: Decimal,
    filled_avg_price: Option<Decimal>,
    reserved_cash: Decimal,
    fees: Decimal,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    filled_at: Option<DateTime<Utc>>,
    canceled_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, sqlx::FromRow)]
struct LegRow {
    order_id: Uuid,
    symbol: String,
    side: String,
    position_intent: String,
    ratio_qty: i32,
    qty: Decimal,
    filled_qty: Decimal,
    filled_avg_price: Option<Decimal>,
}

const ORDER_COLUMNS: &str = "id, client_order_id, purpose, order_class, order_type, time_in_force,
    symbol, side, position_intent, qty, limit_price, status, filled_qty, filled_avg_price,
    reserved_cash, fees, created_at, updated_at, filled_at, canceled_at";

/// An order that is still open, as the engine needs it.
#[derive(Debug, Clone)]
pub(crate) struct StoredOrder {
    pub(crate) id: Uuid,
    pub(crate) spec: OrderSpec,
    pub(crate) reserved_cash: Decimal,
}

impl StoredOrder {
    pub(crate) fn open_order(&self) -> OpenOrder {
        OpenOrder {
            spec: self.spec.clone(),
            reserved_cash: self.reserved_cash,
        }
    }
}

fn parse<T: FromStr>(text: &str, what: &str) -> ApiResult<T> {
    text.parse()
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("stored {what} {text:?} does not parse")))
}

fn to_spec(order: &OrderRow, legs: &[&LegRow]) -> ApiResult<OrderSpec> {
    let legs = legs
        .iter()
        .map(|leg| {
            Ok(LegSpec {
                instrument: Instrument::parse(&leg.symbol).map_err(|e| {
                    ApiError::Internal(anyhow::anyhow!("stored symbol {}: {e}", leg.symbol))
                })?,
                side: parse::<Side>(&leg.side, "side")?,
                ratio_qty: u32::try_from(leg.ratio_qty).unwrap_or(1),
                position_intent: parse::<PositionIntent>(&leg.position_intent, "intent")?,
            })
        })
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(OrderSpec {
        class: parse::<OrderClass>(&order.order_class, "class")?,
        order_type: parse::<OrderType>(&order.order_type, "type")?,
        time_in_force: parse::<TimeInForce>(&order.time_in_force, "tif")?,
        qty: order.qty,
        limit_price: order.limit_price,
        legs,
    })
}

async fn load_legs(conn: &mut PgConnection, ids: &[Uuid]) -> ApiResult<Vec<LegRow>> {
    sqlx::query_as(
        "select order_id, symbol, side, position_intent, ratio_qty, qty, filled_qty, filled_avg_price
           from paper_order_legs where order_id = any($1) order by order_id, leg_index",
    )
    .bind(ids)
    .fetch_all(conn)
    .await
    .context("load legs")
}

/// The account's open orders, oldest first (call after [`lock_account`]).
pub(crate) async fn open_orders(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Vec<StoredOrder>> {
    let rows: Vec<OrderRow> = sqlx::query_as(&format!(
        "select {ORDER_COLUMNS} from paper_orders where user_id = $1 and status = 'new'
          order by created_at, id"
    ))
    .bind(user_id)
    .fetch_all(&mut *conn)
    .await
    .context("open orders")?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let legs = load_legs(conn, &ids).await?;
    rows.iter()
        .map(|row| {
            let own: Vec<&LegRow> = legs.iter().filter(|l| l.order_id == row.id).collect();
            Ok(StoredOrder {
                id: row.id,
                spec: to_spec(row, &own)?,
                reserved_cash: row.reserved_cash,
            })
        })
        .collect()
}

/// One order of the account, for the response or for a cancel (`lock` takes its row lock).
pub(crate) async fn find_order(
    conn: &mut PgConnection,
    user_id: i32,
    id: Uuid,
    lock: bool,
) -> ApiResult<Option<OrderResponse>> {
    let suffix = if lock { " for update" } else { "" };
    let row: Option<OrderRow> = sqlx::query_as(&format!(
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
    Ok(Some(to_response(row, &legs)))
}

/// The account's orders, newest first.
pub(crate) async fn list_orders(
    conn: &mut PgConnection,
    user_id: i32,
    statuses: &[&str],
    limit: i64,
) -> ApiResult<Vec<OrderResponse>> {
    let rows: Vec<OrderRow> = sqlx::query_as(&format!(
        "select {ORDER_COLUMNS} from paper_orders where user_id = $1 and status = any($2)
          order by created_at desc, id desc limit $3"
    ))
    .bind(user_id)
    .bind(statuses)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await
    .context("list orders")?;
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let legs = load_legs(conn, &ids).await?;
    Ok(rows
        .into_iter()
        .map(|row| {
            let own: Vec<LegRow> = legs
                .iter()
                .filter(|l| l.order_id == row.id)
                .cloned()
                .collect();
            to_response(row, &own)
        })
        .collect())
}

fn to_response(row: OrderRow, legs: &[LegRow]) -> OrderResponse {
    OrderResponse {
        id: row.id,
        client_order_id: row.client_order_id,
        purpose: row.purpose,
        order_class: row.order_class,
        order_type: row.order_type,
        time_in_force: row.time_in_force,
        symbol: row.symbol,
        side: row.side,
        position_intent: row.position_intent,
        qty: dto::qty(row.qty),
        filled_qty: dto::qty(row.filled_qty),
        filled_avg_price: row.filled_avg_price.map(dto::price),
        limit_price: row.limit_price.map(dto::price),
        fees: dto::money(row.fees),
        legs: legs
            .iter()
            .map(|leg| LegResponse {
                symbol: leg.symbol.clone(),
                side: leg.side.clone(),
                position_intent: leg.position_intent.clone(),
                ratio_qty: leg.ratio_qty,
                qty: dto::qty(leg.qty),
                filled_qty: dto::qty(leg.filled_qty),
                filled_avg_price: leg.filled_avg_price.map(dto::price),
                status: row.status.clone(),
            })
            .collect(),
        status: row.status,
        created_at: row.created_at,
        updated_at: row.updated_at,
        filled_at: row.filled_at,
        canceled_at: row.canceled_at,
    }
}
