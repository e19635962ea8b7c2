//! What stopped being good: orders past their expiry and option positions past their last
//! close, found by index and expired or settled.

use chrono::{DateTime, NaiveDate, Utc};
use raptor_engine::{Quote, Settlement};
use rust_decimal::Decimal;
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
///
/// Expiry never overtakes a pending sweep: an order that a quote event before its expiry may
/// have crossed (an event after the one it was placed under, on one of its symbols, whose
/// sweep of this account is still queued, perhaps backing off after a failure) stays open
/// until that sweep has judged it as of the event's time; the next expiry pass then expires
/// it if it did not fill.
pub(crate) async fn expire_due(
    conn: &mut PgConnection,
    user_id: i32,
    now: DateTime<Utc>,
) -> ApiResult<Vec<ExpiredOrder>> {
    raptor_db::query_as(
        "update paper_orders o
            set status = 'expired', reserved_cash = 0, updated_at = $2
          where o.user_id = $1 and o.status = 'new' and o.expires_at <= $2
            and not exists (
                select 1 from quote_sweeps s join quote_events e on e.id = s.event_id
                 where s.user_id = o.user_id and s.event_id > o.quote_seq
                   and e.created_at < o.expires_at
                   and (e.symbol = o.symbol
                        or o.order_class = 'mleg'
                           and e.symbol in (select l.symbol from paper_order_legs l
                                             where l.order_id = o.id)))
         returning o.id, o.user_id, o.time_in_force, o.expires_at",
    )
    .bind(user_id)
    .bind(now)
    .fetch_all(conn)
    .await
    .context("expire due orders")
}

/// Whether `user_id` has an open order that is no longer good at `now`, or an open option
/// position expiring on or before `through` (both by index).
pub(crate) async fn has_due(
    conn: &mut PgConnection,
    user_id: i32,
    now: DateTime<Utc>,
    through: NaiveDate,
) -> ApiResult<bool> {
    raptor_db::query_scalar(
        "select exists (select 1 from paper_orders
                         where user_id = $1 and status = 'new' and expires_at <= $2)
             or exists (select 1 from paper_positions
                         where user_id = $1 and open_expiry_date <= $3)",
    )
    .bind(user_id)
    .bind(now)
    .bind(through)
    .fetch_one(conn)
    .await
    .context("due orders and positions")
}

/// Locks (`FOR UPDATE SKIP LOCKED`) up to `limit` accounts after `after` (by id) that have an
/// open order no longer good at `now` or an open option position expiring on or before
/// `through`; their ids, ascending.
pub(crate) async fn lock_accounts_with_due(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    through: NaiveDate,
    after: i32,
    limit: i64,
) -> ApiResult<Vec<i32>> {
    raptor_db::query_scalar(
        "select a.user_id from paper_accounts a
          where a.user_id > $3
            and a.user_id in (select user_id from paper_orders
                               where status = 'new' and expires_at <= $1
                              union
                              select user_id from paper_positions
                               where open_expiry_date <= $2)
          order by a.user_id
          limit $4
          for update of a skip locked",
    )
    .bind(now)
    .bind(through)
    .bind(after)
    .bind(limit)
    .fetch_all(conn)
    .await
    .context("accounts with due orders or positions")
}

/// The open option positions of `user_id` (whose account the caller has locked) expiring on or
/// before `through`, by symbol.
pub(crate) async fn expiring_positions(
    conn: &mut PgConnection,
    user_id: i32,
    through: NaiveDate,
) -> ApiResult<Vec<super::account::PositionRow>> {
    raptor_db::query_as(
        "select symbol, qty, avg_entry_price, realized_pnl from paper_positions
          where user_id = $1 and open_expiry_date <= $2
          order by symbol",
    )
    .bind(user_id)
    .bind(through)
    .fetch_all(conn)
    .await
    .context("expiring positions")
}

/// The quote each `(symbol, close)` settles at: the symbol's last quote event at or before
/// the close, so a settlement's price does not depend on when it runs (a user touching the
/// account, the schedule, a replica that was down). When the symbol has no event at or before
/// the close (never quoted by then, or its events aged out of retention), the first one after
/// it; when it has none at all, or the close is unknown (`None`: a date beyond the engine's
/// calendar), the current quote. Symbols without any quote are left out (awaiting one).
pub(crate) async fn quotes_at_close(
    conn: &mut PgConnection,
    wanted: &[(String, Option<DateTime<Utc>>)],
) -> ApiResult<Vec<(String, Option<DateTime<Utc>>, Quote)>> {
    /// Symbol, close, and `[bid, ask]` when the symbol has any quote.
    type Row = (
        String,
        Option<DateTime<Utc>>,
        Option<sqlx::types::Json<(Decimal, Decimal)>>,
    );
    let rows: Vec<Row> = raptor_db::query_as(
        "select u.symbol, u.close, coalesce(
                    (select jsonb_build_array(e.bid::text, e.ask::text) from quote_events e
                      where e.symbol = u.symbol and e.created_at <= u.close
                      order by e.id desc limit 1),
                    (select jsonb_build_array(e.bid::text, e.ask::text) from quote_events e
                      where e.symbol = u.symbol and e.created_at > u.close
                      order by e.id limit 1),
                    (select jsonb_build_array(q.bid::text, q.ask::text) from quotes q
                      where q.symbol = u.symbol))
               from unnest($1::text[], $2::timestamptz[]) as u(symbol, close)",
    )
    .bind(wanted.iter().map(|w| w.0.clone()).collect::<Vec<_>>())
    .bind(wanted.iter().map(|w| w.1).collect::<Vec<_>>())
    .fetch_all(conn)
    .await
    .context("underlying quotes at the close")?;
    Ok(rows
        .into_iter()
        .filter_map(|(symbol, close, quote)| {
            let (bid, ask) = quote?.0;
            Some((symbol, close, Quote { bid, ask }))
        })
        .collect())
}

/// Applies settlements to `user_id`'s (locked) account in one statement: each position goes
/// flat with its realized P&L, and the account's cash and realized P&L move by the sums. Each
/// position is updated only if it still holds the quantity settled (the fence: a settlement
/// another transaction already applied leaves its position flat, so it matches nothing). The
/// number of positions settled.
pub(crate) async fn settle_positions(
    conn: &mut PgConnection,
    user_id: i32,
    settlements: &[Settlement],
    at: DateTime<Utc>,
) -> ApiResult<usize> {
    let settled: i64 = raptor_db::query_scalar(
        "with p as (
            update paper_positions p
               set qty = 0, avg_entry_price = 0, realized_pnl = s.realized_pnl, updated_at = $2,
                   open_expiry_date = null
              from unnest($3::text[], $4::numeric[], $5::numeric[])
                     as s(symbol, qty, realized_pnl)
             where p.user_id = $1 and p.symbol = s.symbol and p.qty = s.qty
            returning p.symbol),
        cash as (
            update paper_accounts
               set cash = cash + $6, realized_pnl = realized_pnl + $7, updated_at = $2
             where user_id = $1 and (select count(*) from p) = cardinality($3::text[]))
        select count(*) from p",
    )
    .bind(user_id)
    .bind(at)
    .bind(
        settlements
            .iter()
            .map(|s| s.symbol.clone())
            .collect::<Vec<_>>(),
    )
    .bind(settlements.iter().map(|s| s.qty).collect::<Vec<_>>())
    .bind(
        settlements
            .iter()
            .map(|s| s.position.realized_pnl)
            .collect::<Vec<_>>(),
    )
    .bind(settlements.iter().map(|s| s.cash_delta).sum::<Decimal>())
    .bind(settlements.iter().map(|s| s.realized_pnl).sum::<Decimal>())
    .fetch_one(conn)
    .await
    .context("settle expired positions")?;
    Ok(usize::try_from(settled).unwrap_or(0))
}
