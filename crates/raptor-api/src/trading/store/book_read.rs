//! The book read: what an order decision needs after the account lock (positions, the open
//! orders in scope, whether one is due), in one statement.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use raptor_engine::{
    Instrument, LegSpec, OpenOrder, OrderClass, OrderSpec, OrderType, Position, PositionIntent,
    Side, TimeInForce,
};
use rust_decimal::Decimal;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::error::{ApiError, ApiResult, ResultExt};

/// Which open orders an order decision reads: those with a leg on one of `underlyings` (an
/// equity's symbol, an option's root). Closing quantity and option coverage can only depend on
/// those; a few more (other contracts on the same root) do no harm. `None` reads every open
/// order (quote updates, resets).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope<'a> {
    pub(crate) underlyings: &'a [String],
}

/// The ids of the open orders on the underlyings `$2`: simple orders by the
/// `(user_id, underlying)` index (`{SIMPLE}`: how `underlying` is matched, [`book_sql`]),
/// multi-leg orders by their legs.
const SCOPED_IDS: &str = "
    select id from paper_orders
     where user_id = $1 and status = 'new' and {SIMPLE}
    union all
    select m.id from paper_orders m
     where m.user_id = $1 and m.status = 'new' and m.order_class = 'mleg'
       and exists (select 1 from paper_order_legs l
                    where l.order_id = m.id
                      and coalesce(substring(l.symbol from '^([A-Z]+)[0-9]{6}[CP][0-9]{8}$'),
                                   l.symbol) = any($2))";

/// The book read (`book`): positions, the open orders whose ids `{OPEN_IDS}` selects, and
/// whether an order is due to expire or a position to settle (`$4`: the expiry cut-off date).
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
                        'quote_seq', o.quote_seq,
                        'legs', (select jsonb_agg(jsonb_build_object(
                                    'symbol', l.symbol, 'side', l.side,
                                    'position_intent', l.position_intent,
                                    'ratio_qty', l.ratio_qty) order by l.leg_index)
                                   from paper_order_legs l where l.order_id = o.id))
                        order by o.created_at, o.id)
                        from paper_orders o
                       where o.id in ({OPEN_IDS})), '[]'),
            exists (select 1 from paper_orders d
                     where d.user_id = $1 and d.status = 'new' and d.expires_at <= $3)
             or exists (select 1 from paper_positions e
                         where e.user_id = $1 and e.open_expiry_date <= $4)";

/// [`BOOK_TEMPLATE`] with the id list of `scope`: separate statements, not one with
/// `$2 is null or …`, because a generic plan could not use the underlying index through the
/// OR. Built once.
///
/// One underlying (every simple order, and a spread on one root) compares `underlying` with
/// `$2[1]`: an equality, so both columns of `(user_id, underlying)` bound the index scan.
/// With `= any($2)` Postgres 15 often scans the account's whole open book by `user_id` and
/// filters (measured: an account with 500 resting orders on another symbol read 20–30 more
/// blocks per order, `docs/benchmarks/history.md`). It did so with the equality too while a
/// user-only index on the open orders existed; that index is gone (migration
/// `…_drop_open_orders_user_index`).
fn book_sql(scope: Option<Scope<'_>>) -> &'static str {
    static SQL: std::sync::LazyLock<[String; 3]> = std::sync::LazyLock::new(|| {
        let scoped = |simple| SCOPED_IDS.replace("{SIMPLE}", simple);
        [
            scoped("underlying = $2[1]"),
            scoped("underlying = any($2)"),
            ALL_IDS.to_owned(),
        ]
        .map(|ids| BOOK_TEMPLATE.replace("{OPEN_IDS}", &ids))
    });
    match scope {
        Some(s) if s.underlyings.len() == 1 => &SQL[0],
        Some(_) => &SQL[1],
        None => &SQL[2],
    }
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
    /// Whether an open order of the account is no longer good or an option position is past
    /// its last close (expire and settle them first).
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
    quote_seq: i64,
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
    ) = raptor_db::query_as(book_sql(scope))
        .bind(user_id)
        .bind(scope.map_or(&[][..], |s| s.underlyings))
        .bind(now)
        .bind(raptor_engine::expiry::expired_through(now))
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

/// An order that is still open, as the engine needs it.
#[derive(Debug, Clone)]
pub(crate) struct StoredOrder {
    pub(crate) id: Uuid,
    pub(crate) spec: OrderSpec,
    pub(crate) reserved_cash: Decimal,
    /// The verdict of its last re-evaluation (an engine rejection code), if any.
    pub(crate) last_evaluation_code: Option<String>,
    /// The newest quote event it was judged against when placed.
    pub(crate) quote_seq: i64,
}

impl StoredOrder {
    pub(crate) fn open_order(&self) -> OpenOrder {
        OpenOrder {
            spec: self.spec.clone(),
            reserved_cash: self.reserved_cash,
        }
    }
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
            quote_seq: order.quote_seq,
        })
    }
}

fn parse<T: FromStr>(text: &str, what: &str) -> ApiResult<T> {
    text.parse()
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("stored {what} {text:?} does not parse")))
}
