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
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, ResultExt};

/// The account row, with the totals of its open orders (kept by a trigger on `paper_orders`).
#[derive(Debug, Clone, sqlx::FromRow)]
pub(crate) struct AccountRow {
    pub(crate) mode: String,
    pub(crate) cash: Decimal,
    pub(crate) realized_pnl: Decimal,
    /// Cash reserved by the open orders.
    pub(crate) reserved_cash: Decimal,
    /// How many orders are open.
    pub(crate) open_orders: i32,
}

const ACCOUNT_COLUMNS: &str = "mode, cash, realized_pnl, reserved_cash, open_orders";

/// Locks the account row (`FOR UPDATE`): every order-path transaction starts here.
pub(crate) async fn lock_account(conn: &mut PgConnection, user_id: i32) -> ApiResult<AccountRow> {
    raptor_db::query_as(&format!(
        "select {ACCOUNT_COLUMNS} from paper_accounts where user_id = $1 for update"
    ))
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("lock account")?
    .ok_or(ApiError::NotFound("paper account"))
}

/// Reads the account without locking.
pub(crate) async fn read_account(conn: &mut PgConnection, user_id: i32) -> ApiResult<AccountRow> {
    raptor_db::query_as(&format!(
        "select {ACCOUNT_COLUMNS} from paper_accounts where user_id = $1"
    ))
    .bind(user_id)
    .fetch_optional(conn)
    .await
    .context("read account")?
    .ok_or(ApiError::NotFound("paper account"))
}

/// A `paper_positions` row as stored.
#[derive(sqlx::FromRow)]
pub(crate) struct PositionRow {
    pub(crate) symbol: String,
    pub(crate) qty: Decimal,
    pub(crate) avg_entry_price: Decimal,
    pub(crate) realized_pnl: Decimal,
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

/// Which open orders an order decision reads: those with a leg on one of `underlyings` (an
/// equity's symbol, an option's root). Closing quantity and option coverage can only depend on
/// those; a few more (other contracts on the same root) do no harm. `None` reads every open
/// order (quote updates, resets).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) underlyings: &'a [String],
}

/// The ids of the open orders on the underlyings `$2`: simple orders by the
/// `(user_id, underlying)` index, multi-leg orders by their legs.
const SCOPED_IDS: &str = "
    select id from paper_orders
     where user_id = $1 and status = 'new' and underlying = any($2)
    union all
    select m.id from paper_orders m
     where m.user_id = $1 and m.status = 'new' and m.order_class = 'mleg'
       and exists (select 1 from paper_order_legs l
                    where l.order_id = m.id
                      and coalesce(substring(l.symbol from '^([A-Z]+)[0-9]{6}[CP][0-9]{8}$'),
                                   l.symbol) = any($2))";

/// The book read (`book`): positions, the open orders whose ids `{OPEN_IDS}` selects, and
/// whether one is due to expire.
const BOOK_TEMPLATE: &str = "select
            coalesce((select jsonb_agg(jsonb_build_object(
                        'symbol', p.symbol, 'qty', p.qty::text,
                        'avg_entry_price', p.avg_entry_price::text,
                        'realized_pnl', p.realized_pnl::text) order by p.symbol)
                        from paper_positions p where p.user_id = $1), '[]'),
            coalesce((select jsonb_agg(jsonb_build_object(
                        'id', o.id, 'order_class', o.order_class, 'order_type', o.order_type,
                        'time_in_force', o.time_in_force, 'qty', o.qty::text,
                        'limit_price', o.limit_price::text,
                        'reserved_cash', o.reserved_cash::text,
                        'last_evaluation_code', o.last_evaluation_code,
                        'legs', (select jsonb_agg(jsonb_build_object(
                                    'symbol', l.symbol, 'side', l.side,
                                    'position_intent', l.position_intent,
                                    'ratio_qty', l.ratio_qty) order by l.leg_index)
                                   from paper_order_legs l where l.order_id = o.id))
                        order by o.created_at, o.id)
                        from paper_orders o
                       where o.id in ({OPEN_IDS})), '[]'),
            exists (select 1 from paper_orders d
                     where d.user_id = $1 and d.status = 'new' and d.expires_at <= $3)";

/// [`BOOK_TEMPLATE`] with the scoped or the full id list: two statements, not one with
/// `$2 is null or …`, because a generic plan could not use the underlying index through the
/// OR. Built once.
fn book_sql(scoped: bool) -> &'static str {
    static SQL: std::sync::LazyLock<[String; 2]> = std::sync::LazyLock::new(|| {
        [SCOPED_IDS, ALL_IDS].map(|ids| BOOK_TEMPLATE.replace("{OPEN_IDS}", ids))
    });
    &SQL[usize::from(!scoped)]
}

/// The ids of every open order of the account (`$2` unused).
const ALL_IDS: &str = "
    select id from paper_orders where user_id = $1 and status = 'new' and $2::text[] is not null";

/// What a decision needs besides the account row, read in one statement after the account
/// lock (so it sees every write committed before the lock was granted; the account lock guards
/// the positions and open orders of the account).
pub(crate) struct Book {
    pub(crate) positions: BTreeMap<String, Position>,
    /// The open orders in scope, oldest first.
    pub(crate) open: Vec<StoredOrder>,
    /// Whether an open order of the account is no longer good (expire it first).
    pub(crate) has_due: bool,
}

#[derive(serde::Deserialize)]
struct PositionJson {
    symbol: String,
    qty: Decimal,
    avg_entry_price: Decimal,
    realized_pnl: Decimal,
}

#[derive(serde::Deserialize)]
struct OpenOrderJson {
    id: Uuid,
    order_class: String,
    order_type: String,
    time_in_force: String,
    qty: Decimal,
    limit_price: Option<Decimal>,
    reserved_cash: Decimal,
    last_evaluation_code: Option<String>,
    legs: Vec<OpenLegJson>,
}

#[derive(serde::Deserialize)]
struct OpenLegJson {
    symbol: String,
    side: String,
    position_intent: String,
    ratio_qty: i32,
}

/// The positions and the open orders in `scope` of a locked account, in one round trip.
pub(crate) async fn book(
    conn: &mut PgConnection,
    user_id: i32,
    scope: Option<Scope<'_>>,
    now: DateTime<Utc>,
) -> ApiResult<Book> {
    // Decimals travel as JSON strings: exact, whatever their scale.
    let (positions, open, has_due): (
        sqlx::types::Json<Vec<PositionJson>>,
        sqlx::types::Json<Vec<OpenOrderJson>>,
        bool,
    ) = raptor_db::query_as(book_sql(scope.is_some()))
        .bind(user_id)
        .bind(scope.map_or(&[][..], |s| s.underlyings))
        .bind(now)
        .fetch_one(conn)
        .await
        .context("read the book")?;
    let positions = positions
        .0
        .into_iter()
        .map(|p| {
            let position = Position {
                symbol: p.symbol.clone(),
                qty: p.qty,
                avg_entry_price: p.avg_entry_price,
                realized_pnl: p.realized_pnl,
            };
            (p.symbol, position)
        })
        .collect();
    let open = open
        .0
        .into_iter()
        .map(StoredOrder::try_from)
        .collect::<ApiResult<Vec<_>>>()?;
    Ok(Book {
        positions,
        open,
        has_due,
    })
}

impl TryFrom<OpenOrderJson> for StoredOrder {
    type Error = ApiError;

    fn try_from(order: OpenOrderJson) -> ApiResult<Self> {
        let legs = order
            .legs
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
        Ok(StoredOrder {
            id: order.id,
            spec: OrderSpec {
                class: parse::<OrderClass>(&order.order_class, "class")?,
                order_type: parse::<OrderType>(&order.order_type, "type")?,
                time_in_force: parse::<TimeInForce>(&order.time_in_force, "tif")?,
                qty: order.qty,
                limit_price: order.limit_price,
                legs,
            },
            reserved_cash: order.reserved_cash,
            last_evaluation_code: order.last_evaluation_code,
        })
    }
}

/// Positions for reading (non-flat, by symbol).
pub(crate) async fn list_positions(
    conn: &mut PgConnection,
    user_id: i32,
) -> ApiResult<Vec<PositionRow>> {
    raptor_db::query_as(
        "select symbol, qty, avg_entry_price, realized_pnl from paper_positions
          where user_id = $1 and qty <> 0 order by symbol",
    )
    .bind(user_id)
    .fetch_all(conn)
    .await
    .context("list positions")
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
    let rows: Vec<(String, Decimal, Decimal)> = raptor_db::query_as(&format!(
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
    raptor_db::query(
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
    raptor_db::query_scalar(
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

/// The effects of an execution, as parallel arrays for `unnest`: fills, positions, cash.
struct ExecutionArrays {
    fill_leg: Vec<i16>,
    fill_symbol: Vec<String>,
    fill_side: Vec<&'static str>,
    fill_qty: Vec<Decimal>,
    fill_price: Vec<Decimal>,
    fill_multiplier: Vec<i32>,
    fill_pnl: Vec<Decimal>,
    position_symbol: Vec<String>,
    position_qty: Vec<Decimal>,
    position_avg: Vec<Decimal>,
    position_pnl: Vec<Decimal>,
    cash_delta: Decimal,
    realized_pnl: Decimal,
}

impl ExecutionArrays {
    fn new(execution: Option<&Execution>) -> Self {
        let fills = execution.map_or(&[][..], |e| e.fills.as_slice());
        let positions = execution.map_or(&[][..], |e| e.positions.as_slice());
        Self {
            fill_leg: fills.iter().map(|f| leg_index(f.leg_index)).collect(),
            fill_symbol: fills.iter().map(|f| f.symbol.clone()).collect(),
            fill_side: fills.iter().map(|f| f.side.as_str()).collect(),
            fill_qty: fills.iter().map(|f| f.qty).collect(),
            fill_price: fills.iter().map(|f| f.price).collect(),
            fill_multiplier: fills
                .iter()
                .map(|f| i32::try_from(f.multiplier.mantissa()).unwrap_or(i32::MAX))
                .collect(),
            fill_pnl: fills.iter().map(|f| f.realized_pnl).collect(),
            position_symbol: positions.iter().map(|p| p.symbol.clone()).collect(),
            position_qty: positions.iter().map(|p| p.qty).collect(),
            position_avg: positions.iter().map(|p| p.avg_entry_price).collect(),
            position_pnl: positions.iter().map(|p| p.realized_pnl).collect(),
            cash_delta: execution.map_or(Decimal::ZERO, |e| e.cash_delta),
            realized_pnl: execution.map_or(Decimal::ZERO, |e| e.realized_pnl),
        }
    }

    /// Binds parameters `$first..$first+12` in the order of [`EFFECTS_SQL`].
    fn bind<'q>(
        self,
        query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
        query
            .bind(self.fill_leg)
            .bind(self.fill_symbol)
            .bind(self.fill_side)
            .bind(self.fill_qty)
            .bind(self.fill_price)
            .bind(self.fill_multiplier)
            .bind(self.fill_pnl)
            .bind(self.position_symbol)
            .bind(self.position_qty)
            .bind(self.position_avg)
            .bind(self.position_pnl)
            .bind(self.cash_delta)
            .bind(self.realized_pnl)
    }
}

fn leg_index(index: usize) -> i16 {
    i16::try_from(index).unwrap_or(i16::MAX)
}

/// The fills, positions and cash of an execution, as CTEs that run only when the CTE `o`
/// (the order written or updated) returned its row. `$1` is the order id, `$2` the user, `$3`
/// the time; the execution's arrays are `$10..$22`.
const EFFECTS_SQL: &str = "
    fills as (
        insert into paper_fills
            (order_id, user_id, leg_index, symbol, side, qty, price, multiplier, realized_pnl,
             filled_at)
        select o.id, $2, f.leg_index, f.symbol, f.side, f.qty, f.price, f.multiplier, f.pnl, $3
          from o, unnest($10::smallint[], $11::text[], $12::text[], $13::numeric[],
                         $14::numeric[], $15::integer[], $16::numeric[])
                  as f(leg_index, symbol, side, qty, price, multiplier, pnl)),
    positions as (
        insert into paper_positions (user_id, symbol, qty, avg_entry_price, realized_pnl, updated_at)
        select $2, p.symbol, p.qty, p.avg_entry_price, p.realized_pnl, $3
          from o, unnest($17::text[], $18::numeric[], $19::numeric[], $20::numeric[])
                  as p(symbol, qty, avg_entry_price, realized_pnl)
        on conflict (user_id, symbol) do update
           set qty = excluded.qty, avg_entry_price = excluded.avg_entry_price,
               realized_pnl = excluded.realized_pnl, updated_at = excluded.updated_at),
    cash as (
        update paper_accounts
           set cash = cash + $21, realized_pnl = realized_pnl + $22, updated_at = $3
         where user_id = $2 and exists (select 1 from o) and ($21 <> 0 or $22 <> 0))";

/// The order insert (`insert_order`), with the execution's effects. Built once.
fn insert_order_sql() -> &'static str {
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        "with o as (
            insert into paper_orders
                (id, user_id, client_order_id, idempotency_key, purpose, order_class, order_type,
                 time_in_force, symbol, side, position_intent, qty, limit_price, status,
                 filled_qty, filled_avg_price, reserved_cash, fees, created_at, updated_at,
                 filled_at, expires_at)
            values ($1, $2, $4, $5, $6, $7, $8, $9, $23, $24, $25, $26, $27, $28, $29, $30, $31,
                    $32, $3, $3, $33, $34)
            on conflict on constraint uq_paper_orders_client_order_id do nothing
            returning id),
        legs as (
            insert into paper_order_legs
                (order_id, leg_index, symbol, side, position_intent, ratio_qty, qty, filled_qty,
                 filled_avg_price)
            select o.id, l.* from o, unnest($35::smallint[], $36::text[], $37::text[],
                                            $38::text[], $39::integer[], $40::numeric[],
                                            $41::numeric[], $42::numeric[])
                                     as l),
        {EFFECTS_SQL}
        select count(*) from o"
            .replace("{EFFECTS_SQL}", EFFECTS_SQL)
    });
    &SQL
}

/// Writes a new order with its legs and, when it filled, its fills, positions and cash, in one
/// statement. `false` when the account already has an order with this `client_order_id` (the
/// unique index decides; nothing is written and the transaction stays usable).
pub(crate) async fn insert_order(conn: &mut PgConnection, order: &NewOrder<'_>) -> ApiResult<bool> {
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

    let query = raptor_db::query(insert_order_sql())
        .bind(order.id)
        .bind(order.user_id)
        .bind(order.at)
        .bind(&order.client_order_id)
        .bind(&order.idempotency_key)
        .bind(order.purpose)
        .bind(spec.class.as_str())
        .bind(spec.order_type.as_str())
        .bind(spec.time_in_force.as_str());
    let arrays = ExecutionArrays::new(order.execution);
    let written = arrays
        .bind(query)
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
        .bind(filled_at)
        .bind(order.expires_at)
        .bind((0..spec.legs.len()).map(leg_index).collect::<Vec<_>>())
        .bind(
            spec.legs
                .iter()
                .map(|l| l.instrument.symbol().to_owned())
                .collect::<Vec<_>>(),
        )
        .bind(
            spec.legs
                .iter()
                .map(|l| l.side.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            spec.legs
                .iter()
                .map(|l| l.position_intent.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(
            spec.legs
                .iter()
                .map(|l| i32::try_from(l.ratio_qty).unwrap_or(i32::MAX))
                .collect::<Vec<_>>(),
        )
        .bind(
            spec.legs
                .iter()
                .map(|l| l.fill_qty(spec.qty))
                .collect::<Vec<_>>(),
        )
        .bind(
            (0..spec.legs.len())
                .map(|i| fill_of(i).map_or(Decimal::ZERO, |f| f.qty))
                .collect::<Vec<_>>(),
        )
        .bind(
            (0..spec.legs.len())
                .map(|i| fill_of(i).map(|f| f.price))
                .collect::<Vec<_>>(),
        )
        .fetch_one(conn)
        .await
        .context("insert order")?;
    Ok(written.try_get::<i64, _>(0).context("insert order")? == 1)
}

/// The order-level fill price: the leg price for simple orders, the net per unit for mleg.
pub(crate) fn filled_price(spec: &OrderSpec, execution: &Execution) -> Decimal {
    match (spec.class, execution.fills.first()) {
        (OrderClass::Simple, Some(fill)) => fill.price,
        _ => execution.net_price,
    }
}

/// One resting order a quote update fills.
pub(crate) struct RestingFill<'a> {
    pub(crate) order_id: Uuid,
    pub(crate) spec: &'a OrderSpec,
    pub(crate) execution: Execution,
}

/// Fills several resting orders of one (locked) account in one statement: the orders and their
/// legs, every fill, the final state of every touched position, and the summed cash. The
/// number of orders filled (each guarded on `status = 'new'`).
pub(crate) async fn fill_resting_many(
    conn: &mut PgConnection,
    user_id: i32,
    fills: &[RestingFill<'_>],
    positions: &[Position],
    at: DateTime<Utc>,
) -> ApiResult<usize> {
    let mut leg_order = Vec::new();
    let mut leg_index = Vec::new();
    let mut leg_symbol = Vec::new();
    let mut leg_side = Vec::new();
    let mut leg_qty = Vec::new();
    let mut leg_price = Vec::new();
    let mut leg_multiplier = Vec::new();
    let mut leg_pnl = Vec::new();
    for fill in fills {
        for f in &fill.execution.fills {
            leg_order.push(fill.order_id);
            leg_index.push(self::leg_index(f.leg_index));
            leg_symbol.push(f.symbol.clone());
            leg_side.push(f.side.as_str());
            leg_qty.push(f.qty);
            leg_price.push(f.price);
            leg_multiplier.push(i32::try_from(f.multiplier.mantissa()).unwrap_or(i32::MAX));
            leg_pnl.push(f.realized_pnl);
        }
    }
    let cash: Decimal = fills.iter().map(|f| f.execution.cash_delta).sum();
    let realized: Decimal = fills.iter().map(|f| f.execution.realized_pnl).sum();
    let filled = raptor_db::query(
        "with o as (
            update paper_orders p
               set status = 'filled', filled_qty = p.qty, filled_avg_price = f.avg, fees = f.fees,
                   reserved_cash = 0, filled_at = $2, updated_at = $2
              from unnest($3::uuid[], $4::numeric[], $5::numeric[]) as f(id, avg, fees)
             where p.id = f.id and p.status = 'new'
            returning p.id),
        legs as (
            update paper_order_legs l
               set filled_qty = f.qty, filled_avg_price = f.price
              from unnest($6::uuid[], $7::smallint[], $10::numeric[], $11::numeric[])
                     as f(order_id, leg_index, qty, price)
             where l.order_id = f.order_id and l.leg_index = f.leg_index
               and f.order_id in (select id from o)),
        fills as (
            insert into paper_fills
                (order_id, user_id, leg_index, symbol, side, qty, price, multiplier,
                 realized_pnl, filled_at)
            select f.order_id, $1, f.leg_index, f.symbol, f.side, f.qty, f.price, f.multiplier,
                   f.pnl, $2
              from unnest($6::uuid[], $7::smallint[], $8::text[], $9::text[], $10::numeric[],
                          $11::numeric[], $12::integer[], $13::numeric[])
                     as f(order_id, leg_index, symbol, side, qty, price, multiplier, pnl)
             where f.order_id in (select id from o)),
        positions as (
            insert into paper_positions
                (user_id, symbol, qty, avg_entry_price, realized_pnl, updated_at)
            select $1, p.symbol, p.qty, p.avg_entry_price, p.realized_pnl, $2
              from unnest($14::text[], $15::numeric[], $16::numeric[], $17::numeric[])
                     as p(symbol, qty, avg_entry_price, realized_pnl)
             where exists (select 1 from o)
            on conflict (user_id, symbol) do update
               set qty = excluded.qty, avg_entry_price = excluded.avg_entry_price,
                   realized_pnl = excluded.realized_pnl, updated_at = excluded.updated_at),
        cash as (
            update paper_accounts
               set cash = cash + $18, realized_pnl = realized_pnl + $19, updated_at = $2
             where user_id = $1 and exists (select 1 from o))
        select count(*) from o",
    )
    .bind(user_id)
    .bind(at)
    .bind(fills.iter().map(|f| f.order_id).collect::<Vec<_>>())
    .bind(
        fills
            .iter()
            .map(|f| filled_price(f.spec, &f.execution))
            .collect::<Vec<_>>(),
    )
    .bind(fills.iter().map(|f| f.execution.fees).collect::<Vec<_>>())
    .bind(leg_order)
    .bind(leg_index)
    .bind(leg_symbol)
    .bind(leg_side)
    .bind(leg_qty)
    .bind(leg_price)
    .bind(leg_multiplier)
    .bind(leg_pnl)
    .bind(
        positions
            .iter()
            .map(|p| p.symbol.clone())
            .collect::<Vec<_>>(),
    )
    .bind(positions.iter().map(|p| p.qty).collect::<Vec<_>>())
    .bind(
        positions
            .iter()
            .map(|p| p.avg_entry_price)
            .collect::<Vec<_>>(),
    )
    .bind(positions.iter().map(|p| p.realized_pnl).collect::<Vec<_>>())
    .bind(cash)
    .bind(realized)
    .fetch_one(conn)
    .await
    .context("fill resting orders")?;
    let filled: i64 = filled.try_get(0).context("fill resting orders")?;
    Ok(usize::try_from(filled).unwrap_or(0))
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

/// Resets the account: cash, P&L, positions (open orders are canceled by the caller first).
pub(crate) async fn reset_account(
    conn: &mut PgConnection,
    user_id: i32,
    cash: Decimal,
) -> ApiResult<()> {
    raptor_db::query("delete from paper_positions where user_id = $1")
        .bind(user_id)
        .execute(&mut *conn)
        .await
        .context("reset positions")?;
    raptor_db::query(
        "update paper_accounts set cash = $2, realized_pnl = 0, updated_at = now() where user_id = $1",
    )
    .bind(user_id)
    .bind(cash)
    .execute(conn)
    .await
    .context("reset cash")?;
    Ok(())
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

/// An order that is still open, as the engine needs it.
#[derive(Debug, Clone)]
pub(crate) struct StoredOrder {
    pub(crate) id: Uuid,
    pub(crate) spec: OrderSpec,
    pub(crate) reserved_cash: Decimal,
    /// The verdict of its last re-evaluation (an engine rejection code), if any.
    pub(crate) last_evaluation_code: Option<String>,
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

/// The account's orders, newest first.
pub(crate) async fn list_orders(
    conn: &mut PgConnection,
    user_id: i32,
    statuses: &[&str],
    limit: i64,
) -> ApiResult<Vec<OrderRecord>> {
    let rows: Vec<OrderRow> = raptor_db::query_as(&format!(
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
            OrderRecord { row, legs: own }
        })
        .collect())
}
