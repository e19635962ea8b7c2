//! Executions written: the fills, positions and cash of an execution as `unnest` arrays, and
//! the one-statement fill of a quote update's resting orders.

use chrono::{DateTime, Utc};
use raptor_engine::{Execution, OrderClass, OrderSpec, Position};
use rust_decimal::Decimal;
use sqlx::{PgConnection, Row};
use uuid::Uuid;

use crate::error::{ApiResult, ResultExt};

/// The effects of an execution, as parallel arrays for `unnest`: fills, positions, cash.
pub(super) struct ExecutionArrays {
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
    pub(super) fn new(execution: Option<&Execution>) -> Self {
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

    /// Pushes the execution's effects onto an order's statement: its fills, the final state of
    /// the positions it touched, and the account's cash, as common table expressions that run
    /// only when the CTE `o` (the order written or updated) returned its row. `user_id` owns
    /// the account; `at` is the time of the fills.
    pub(super) fn push_effects<'q>(
        self,
        sql: &mut raptor_db::Statement<'q>,
        user_id: i32,
        at: DateTime<Utc>,
    ) {
        sql.push(
            "fills as (
        insert into paper_fills
            (order_id, user_id, leg_index, symbol, side, qty, price, multiplier, realized_pnl,
             filled_at)
        select o.id, ",
        )
        .push_bind(user_id)
        .push(", f.leg_index, f.symbol, f.side, f.qty, f.price, f.multiplier, f.pnl, ")
        .push_bind(at)
        .push(" from o, ");
        raptor_db::push_unnest!(sql, "f", {
            leg_index: "smallint[]" = self.fill_leg,
            symbol: "text[]" = self.fill_symbol,
            side: "text[]" = self.fill_side,
            qty: "numeric[]" = self.fill_qty,
            price: "numeric[]" = self.fill_price,
            multiplier: "integer[]" = self.fill_multiplier,
            pnl: "numeric[]" = self.fill_pnl,
        });
        sql.push(
            "),
    positions as (
        insert into paper_positions
            (user_id, symbol, qty, avg_entry_price, realized_pnl, updated_at, expiry_date,
             open_expiry_date)
        select ",
        )
        .push_bind(user_id)
        .push(", p.symbol, p.qty, p.avg_entry_price, p.realized_pnl, ")
        .push_bind(at)
        .push(
            ", occ_expiry_date(p.symbol),
               case when p.qty <> 0 then occ_expiry_date(p.symbol) end
          from o, ",
        );
        raptor_db::push_unnest!(sql, "p", {
            symbol: "text[]" = self.position_symbol,
            qty: "numeric[]" = self.position_qty,
            avg_entry_price: "numeric[]" = self.position_avg,
            realized_pnl: "numeric[]" = self.position_pnl,
        });
        sql.push(
            "
        on conflict (user_id, symbol) do update
           set qty = excluded.qty, avg_entry_price = excluded.avg_entry_price,
               realized_pnl = excluded.realized_pnl, updated_at = excluded.updated_at,
               open_expiry_date = excluded.open_expiry_date),
    cash as (
        update paper_accounts set cash = cash + ",
        )
        .push_bind(self.cash_delta)
        .push(", realized_pnl = realized_pnl + ")
        .push_bind(self.realized_pnl)
        .push(", updated_at = ")
        .push_bind(at)
        .push(" where user_id = ")
        .push_bind(user_id)
        .push(" and exists (select 1 from o) and (")
        .push_bind(self.cash_delta)
        .push(" <> 0 or ")
        .push_bind(self.realized_pnl)
        .push(" <> 0))");
    }
}

pub(super) fn leg_index(index: usize) -> i16 {
    i16::try_from(index).unwrap_or(i16::MAX)
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
                (user_id, symbol, qty, avg_entry_price, realized_pnl, updated_at, expiry_date,
                 open_expiry_date)
            select $1, p.symbol, p.qty, p.avg_entry_price, p.realized_pnl, $2,
                   occ_expiry_date(p.symbol),
                   case when p.qty <> 0 then occ_expiry_date(p.symbol) end
              from unnest($14::text[], $15::numeric[], $16::numeric[], $17::numeric[])
                     as p(symbol, qty, avg_entry_price, realized_pnl)
             where exists (select 1 from o)
            on conflict (user_id, symbol) do update
               set qty = excluded.qty, avg_entry_price = excluded.avg_entry_price,
                   realized_pnl = excluded.realized_pnl, updated_at = excluded.updated_at,
                   open_expiry_date = excluded.open_expiry_date),
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
