//! Quotes: read (share-locked for an order), upserted by operators, and who rests on one.

use std::collections::BTreeMap;

use raptor_engine::Quote;
use rust_decimal::Decimal;
use sqlx::PgConnection;

use crate::error::{ApiResult, ResultExt};

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
