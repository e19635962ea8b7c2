//! Operator quotes: setting one fills, in the same transaction, every resting order it makes
//! marketable.

use raptor_engine::{OrderClass, OrderSpec, OrderStatus, OrderType, TimeInForce};
use rust_decimal::Decimal;
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{account_state, fill_event, Desk};
use crate::audit::{self, AuditAction, AuditEvent};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::trading::dto::{self, QuoteResponse};
use crate::trading::{parse, store};

/// Sets a quote and, in the same transaction, fills every resting order it makes marketable.
#[tracing::instrument(skip_all, fields(quote.symbol = symbol))]
pub(crate) async fn set_quote(
    db: &PgPool,
    desk: &Desk,
    updated_by: Option<i32>,
    symbol: &str,
    bid: Decimal,
    ask: Decimal,
) -> ApiResult<QuoteResponse> {
    parse::instrument(symbol)?;
    let in_range = |p: Decimal| {
        !p.is_sign_negative() && p.scale() <= parse::PRICE_SCALE && p <= raptor_engine::MAX_PRICE
    };
    if !in_range(bid) || !in_range(ask) || ask < bid {
        return Err(ApiError::invalid(
            ErrorCode::InvalidQuote,
            "bid and ask must be between 0 and 1000000000 with at most 6 decimals, ask >= bid",
        ));
    }
    let mut tx = db.begin().await.context("begin")?;
    // The quote row lock serialises racing updates of one symbol: the second sees the orders
    // the first filled as no longer open, so each fills exactly once.
    store::upsert_quote(&mut tx, symbol, bid, ask, updated_by).await?;
    audit::record(
        &mut tx,
        AuditEvent::new(
            updated_by,
            AuditAction::QuoteSet,
            json!({ "symbol": symbol, "bid": bid.to_string(), "ask": ask.to_string() }),
        ),
    )
    .await
    .context("audit quote")?;
    let mut filled = Vec::new();
    for user_id in store::users_resting_on(&mut tx, symbol).await? {
        filled.extend(fill_resting_for(&mut tx, desk, user_id, symbol).await?);
    }
    tx.commit().await.context("commit quote")?;
    Ok(QuoteResponse {
        symbol: symbol.to_owned(),
        bid: dto::price(bid),
        ask: dto::price(ask),
        filled_order_ids: filled,
    })
}

async fn fill_resting_for(
    conn: &mut PgConnection,
    desk: &Desk,
    user_id: i32,
    symbol: &str,
) -> ApiResult<Vec<Uuid>> {
    let now = desk.now();
    // One account that cannot trade must not block the quote for everyone else.
    let (_, mut account, open) = match account_state(conn, user_id, now, None).await {
        Ok(loaded) => loaded,
        Err(err @ (ApiError::LiveTradingUnavailable | ApiError::NotFound(_))) => {
            tracing::warn!(user.id = user_id, error = %err, "resting orders skipped on quote update");
            return Ok(Vec::new());
        }
        Err(err) => return Err(err),
    };
    let candidates: Vec<usize> = open
        .iter()
        .enumerate()
        .filter(|(_, o)| o.spec.legs.iter().any(|l| l.instrument.symbol() == symbol))
        .map(|(i, _)| i)
        .collect();
    let mut symbols: Vec<String> = candidates
        .iter()
        .flat_map(|&i| open[i].spec.legs.iter())
        .map(|l| l.instrument.symbol().to_owned())
        .collect();
    symbols.sort();
    symbols.dedup();
    // One read of every quote the candidates need (the updated one is already written).
    let quotes = store::quotes(conn, &symbols, false).await?;

    // One pass: `account.open_orders[i]` is `open[i]`. While an order is judged, its slot holds
    // an empty stand-in (the engine judges it against the account without it); a filled order
    // leaves the stand-in behind, so later orders see its reservation freed and its fill
    // applied.
    let mut filled: Vec<store::RestingFill<'_>> = Vec::new();
    let mut touched: Vec<String> = Vec::new();
    let mut events = Vec::new();
    for index in candidates {
        let order = &open[index];
        let own = std::mem::replace(&mut account.open_orders[index], stand_in());
        match desk
            .engine()
            .evaluate_resting(&account, &order.spec, &quotes, now)
        {
            Ok(Some(execution)) => {
                // Applied here so later orders are judged against it; written below, with
                // every other fill of the account, in one statement.
                desk.engine().apply(&mut account, &execution);
                touched.extend(execution.positions.iter().map(|p| p.symbol.clone()));
                events.push(fill_event(user_id, order.id, &execution, "quote"));
                filled.push(store::RestingFill {
                    order_id: order.id,
                    spec: &order.spec,
                    execution,
                });
                continue;
            }
            Ok(None) => {
                if order.last_evaluation_code.is_some() {
                    store::note_evaluation(conn, order.id, None).await?;
                }
            }
            Err(raptor_engine::OrderRejection::ContractExpired { symbol }) => {
                // It can never fill: expire it and release its reservation.
                if store::end_open_order(conn, order.id, OrderStatus::Expired, now).await? {
                    events.push(AuditEvent::new(
                        Some(user_id),
                        AuditAction::OrderExpired,
                        json!({ "order_id": order.id, "reason": "contract_expiry", "symbol": symbol }),
                    ));
                    continue;
                }
            }
            Err(rejection) => {
                // Audited when the verdict changes, not on every quote tick.
                if order.last_evaluation_code.as_deref() != Some(rejection.code()) {
                    store::note_evaluation(conn, order.id, Some(rejection.code())).await?;
                    events.push(AuditEvent::new(
                        Some(user_id),
                        AuditAction::OrderEvaluationRejected,
                        json!({ "order_id": order.id, "code": rejection.code(),
                                "reason": rejection.to_string() }),
                    ));
                }
            }
        }
        account.open_orders[index] = own;
    }
    if !filled.is_empty() {
        touched.sort();
        touched.dedup();
        let positions: Vec<raptor_engine::Position> = touched
            .iter()
            .filter_map(|symbol| account.positions.get(symbol).cloned())
            .collect();
        let written = store::fill_resting_many(conn, user_id, &filled, &positions, now).await?;
        if written != filled.len() {
            // The account and the quote rows are locked: no other writer can have ended one
            // of these orders. Refuse to commit a partial picture.
            return Err(ApiError::Internal(anyhow::anyhow!(
                "filled {written} of {} resting orders",
                filled.len()
            )));
        }
    }
    audit::record_many(conn, events)
        .await
        .context("audit quote-driven changes")?;
    Ok(filled.iter().map(|f| f.order_id).collect())
}

/// What an order's slot holds while it is judged, or after it filled: no legs, no reservation.
fn stand_in() -> raptor_engine::OpenOrder {
    raptor_engine::OpenOrder {
        spec: OrderSpec {
            class: OrderClass::Simple,
            order_type: OrderType::Market,
            time_in_force: TimeInForce::Gtc,
            qty: Decimal::ZERO,
            limit_price: None,
            legs: Vec::new(),
        },
        reserved_cash: Decimal::ZERO,
    }
}
