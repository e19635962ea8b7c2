//! The account row (locked first by every writer) and its positions.

use raptor_engine::Position;
use rust_decimal::Decimal;
use sqlx::PgConnection;

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
