//! The account row (locked first by every writer) and its positions.

use raptor_engine::{Position, Quote};
use rust_decimal::Decimal;
use sqlx::PgConnection;

use super::quotes::Quotes;
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

/// Locks the account row and share-locks the quotes of `symbols` (in symbol order), in one
/// statement: what an order decision starts with. Both come back as they are once the locks
/// are granted (a row lock re-reads the row it waited for). The quote rows are locked first
/// (the subquery runs before the row lock above it); no writer holds a quote row and waits for
/// an account, so this order cannot deadlock with quote updates.
pub(crate) async fn lock_account_and_quotes(
    conn: &mut PgConnection,
    user_id: i32,
    symbols: &[String],
) -> ApiResult<(AccountRow, Quotes)> {
    #[derive(sqlx::FromRow)]
    struct Locked {
        #[sqlx(flatten)]
        account: AccountRow,
        quotes: sqlx::types::Json<Vec<QuoteJson>>,
    }
    #[derive(serde::Deserialize)]
    struct QuoteJson {
        symbol: String,
        bid: Decimal,
        ask: Decimal,
        sequence: i64,
    }
    let locked: Locked = raptor_db::query_as(&lock_account_and_quotes_statement(symbols.len()))
        .bind(user_id)
        .bind(symbols)
        .fetch_optional(conn)
        .await
        .context("lock account and quotes")?
        .ok_or(ApiError::NotFound("paper account"))?;
    let sequence = locked
        .quotes
        .0
        .iter()
        .map(|q| q.sequence)
        .max()
        .unwrap_or(0);
    let quotes = locked
        .quotes
        .0
        .into_iter()
        .map(|q| {
            (
                q.symbol,
                Quote {
                    bid: q.bid,
                    ask: q.ask,
                },
            )
        })
        .collect();
    Ok((locked.account, Quotes { quotes, sequence }))
}

/// The statement that locks the account and share-locks the quotes of an order on `symbols`
/// symbols: `$1` the user, `$2` the symbols (public for the plan test).
///
/// One symbol (every simple order) is compared as `$2[1]`, not `any($2)`: for an array
/// parameter Postgres' generic plan assumes ten elements (a bitmap scan and a sort) and costs
/// more than the custom plans, so the statement was planned again at every execution, about a
/// tenth of Postgres' work per order (`make profile-postgres`). With `$2[1]` the generic plan
/// is the custom one, and the session keeps it.
pub fn lock_account_and_quotes_statement(symbols: usize) -> String {
    let which = if symbols == 1 { "= $2[1]" } else { "= any($2)" };
    format!(
        "select {ACCOUNT_COLUMNS},
                (select coalesce(jsonb_agg(jsonb_build_object(
                            'symbol', q.symbol, 'bid', q.bid::text, 'ask', q.ask::text,
                            'sequence', q.sequence)), '[]')
                   from (select symbol, bid, ask, sequence from quotes
                          where symbol {which} order by symbol for share) q) as quotes
           from paper_accounts where user_id = $1 for update of paper_accounts"
    )
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

/// The cash the account's open orders reserve, summed from the orders themselves.
pub(crate) async fn open_reservations(conn: &mut PgConnection, user_id: i32) -> ApiResult<Decimal> {
    raptor_db::query_scalar(
        "select coalesce(sum(reserved_cash), 0) from paper_orders where user_id = $1 and status = 'new'",
    )
    .bind(user_id)
    .fetch_one(conn)
    .await
    .context("reserved cash")
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

/// One open (non-flat) position.
pub(crate) async fn find_position(
    conn: &mut PgConnection,
    user_id: i32,
    symbol: &str,
) -> ApiResult<Option<PositionRow>> {
    raptor_db::query_as(
        "select symbol, qty, avg_entry_price, realized_pnl from paper_positions
          where user_id = $1 and symbol = $2 and qty <> 0",
    )
    .bind(user_id)
    .bind(symbol)
    .fetch_optional(conn)
    .await
    .context("find position")
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

/// Whether `user_id`'s account was reset with `reset_id` since `since` (its `account.reset`
/// audit row, found by `idx_audit_log_account_reset`).
pub(crate) async fn reset_seen(
    conn: &mut PgConnection,
    user_id: i32,
    reset_id: uuid::Uuid,
    since: chrono::DateTime<chrono::Utc>,
) -> ApiResult<bool> {
    raptor_db::query_scalar(
        "select exists (select 1 from audit_log
                         where user_id = $1 and action = 'account.reset'
                           and context->>'reset_id' = $2::text and created_at >= $3)",
    )
    .bind(user_id)
    .bind(reset_id)
    .bind(since)
    .fetch_one(conn)
    .await
    .context("find a reset by its id")
}
