//! What the book's operations share: the locked account as the engine sees it
//! (`account_state`), the `order.filled` audit row of an execution (`fill_event`), and the
//! account as the reads show it, marked to market (`account`).

use raptor_engine::AccountState;
use rust_decimal::Decimal;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::expiry::expire_due;
use crate::audit::{AuditAction, AuditEvent};
use crate::error::{ApiError, ApiResult};
use crate::trading::dto::{self, AccountResponse};
use crate::trading::store::{self, StoredOrder};

/// The locked account as the engine sees it: the account row locked, the paper mode checked,
/// what stopped being good expired, then the positions and the open orders in `scope` (all
/// without one). With `quote_symbols`, their quotes are share-locked with the account, in the
/// same statement.
pub(super) async fn account_state(
    conn: &mut PgConnection,
    user_id: i32,
    now: chrono::DateTime<chrono::Utc>,
    scope: Option<store::Scope<'_>>,
    quote_symbols: &[String],
) -> ApiResult<(
    store::AccountRow,
    AccountState,
    Vec<StoredOrder>,
    store::Quotes,
)> {
    let (mut account, quotes) = if quote_symbols.is_empty() {
        (
            store::lock_account(conn, user_id).await?,
            store::Quotes::default(),
        )
    } else {
        store::lock_account_and_quotes(conn, user_id, quote_symbols).await?
    };
    if account.mode != "paper" {
        return Err(ApiError::LiveTradingUnavailable);
    }
    let mut book = store::book(conn, user_id, scope, now).await?;
    if book.has_due {
        // Touching an account expires what stopped being good, before its reservations count.
        expire_due(conn, user_id, now).await?;
        account = store::read_account(conn, user_id).await?;
        book = store::book(conn, user_id, scope, now).await?;
    }
    let listed: Decimal = book.open.iter().map(|o| o.reserved_cash).sum();
    let state = AccountState {
        cash: account.cash,
        positions: book.positions,
        open_orders: book.open.iter().map(StoredOrder::open_order).collect(),
        reserved_elsewhere: account.reserved_cash - listed,
    };
    Ok((account, state, book.open, quotes))
}

/// The `order.filled` audit row of an execution.
pub(super) fn fill_event(
    user_id: i32,
    order_id: Uuid,
    execution: &raptor_engine::Execution,
    trigger: &'static str,
    quote_event: Option<i64>,
) -> AuditEvent {
    AuditEvent::new(
        Some(user_id),
        AuditAction::OrderFilled,
        json!({
            "order_id": order_id,
            "trigger": trigger,
            "quote_event_id": quote_event,
            "net_price": execution.net_price.to_string(),
            "cash_delta": execution.cash_delta.to_string(),
            "fees": execution.fees.to_string(),
            "realized_pnl": execution.realized_pnl.to_string(),
            "fills": execution.fills.iter().map(|f| json!({
                "leg_index": f.leg_index, "symbol": f.symbol, "side": f.side.as_str(),
                "qty": f.qty.to_string(), "price": f.price.to_string(),
                "realized_pnl": f.realized_pnl.to_string(),
                // The position this fill left (the trade-updates stream's `position_qty`).
                "position_qty": position_after(execution, &f.symbol).map(|q| q.normalize().to_string()),
            })).collect::<Vec<_>>(),
        }),
    )
}

/// The signed quantity of `symbol`'s position after `execution` (its legs touch distinct
/// symbols, so each fill has one).
fn position_after(execution: &raptor_engine::Execution, symbol: &str) -> Option<Decimal> {
    execution
        .positions
        .iter()
        .find(|p| p.symbol == symbol)
        .map(|p| p.qty)
}

/// The account's positions marked to market, summed.
struct Marks {
    market_value: rust_decimal::Decimal,
    unrealized_pnl: rust_decimal::Decimal,
    /// Positions without a quote (marked at their average entry price).
    at_cost: Vec<String>,
}

/// Marks every open position at its quote's mid (the engine's arithmetic), or at cost when the
/// symbol has no quote. A read: the quotes are not locked, so the marks are as of this moment.
async fn marks(conn: &mut PgConnection, positions: &[raptor_engine::Position]) -> ApiResult<Marks> {
    let symbols: Vec<String> = positions.iter().map(|p| p.symbol.clone()).collect();
    let quotes = store::quotes(conn, &symbols).await?;
    let mut marks = Marks {
        market_value: rust_decimal::Decimal::ZERO,
        unrealized_pnl: rust_decimal::Decimal::ZERO,
        at_cost: Vec::new(),
    };
    for position in positions {
        let instrument = raptor_engine::Instrument::parse(&position.symbol).map_err(|e| {
            crate::error::ApiError::Internal(anyhow::anyhow!(
                "stored symbol {}: {e}",
                position.symbol
            ))
        })?;
        let price = match quotes.quotes.get(&position.symbol) {
            Some(quote) => (quote.bid + quote.ask) / rust_decimal::Decimal::TWO,
            None => {
                marks.at_cost.push(position.symbol.clone());
                position.avg_entry_price
            }
        };
        let mark = position.mark(price, instrument.multiplier());
        marks.market_value += mark.market_value;
        marks.unrealized_pnl += mark.unrealized_pnl;
    }
    Ok(marks)
}

/// The account as the reads show it.
pub(crate) async fn account(conn: &mut PgConnection, user_id: i32) -> ApiResult<AccountResponse> {
    let account = store::read_account(conn, user_id).await?;
    let reserved = store::open_reservations(conn, user_id).await?;
    // One read of the positions serves the marks and the uncovered shorts.
    let positions: Vec<raptor_engine::Position> = store::list_positions(conn, user_id)
        .await?
        .into_iter()
        .map(Into::into)
        .collect();
    let marks = marks(conn, &positions).await?;
    let spread_requirement = raptor_engine::spread::spread_requirement(&positions);
    Ok(AccountResponse {
        market_value: dto::money(marks.market_value),
        equity: dto::money(account.cash + marks.market_value),
        unrealized_pnl: dto::money(marks.unrealized_pnl),
        marked_at_cost: marks.at_cost,
        mode: dto::stored(&account.mode, "mode")?,
        currency: dto::CurrencyDto::Usd,
        cash: dto::money(account.cash),
        buying_power: dto::money(account.cash - reserved - spread_requirement),
        reserved_cash: dto::money(reserved),
        spread_requirement: dto::money(spread_requirement),
        realized_pnl: dto::money(account.realized_pnl),
        uncovered_short_options: raptor_engine::expiry::uncovered_short_options(&positions),
    })
}
