//! Operator quotes and the sweeps they start. Setting a quote commits it as a numbered event,
//! with one queued sweep per account that rests an order on the symbol; each sweep is its own
//! short transaction that locks one account and judges its resting orders against the event
//! (`quote_sweeps`, worked by any replica, `SKIP LOCKED`). An order is judged against every
//! event after the one it was placed under (`quote_seq`), in event order, and fills at most
//! once (its fill is guarded on `status = 'new'` under the account lock).

use std::time::Duration;

use raptor_engine::{OrderClass, OrderSpec, OrderStatus, OrderType, TimeInForce};
use rust_decimal::Decimal;
use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::book::{account_state, fill_event};
use crate::audit::{self, AuditAction, AuditEvent};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::trading::desk::Desk;
use crate::trading::dto::{self, QuoteResponse};
use crate::trading::{parse, store};

/// Sets a quote: commits it as a numbered event, with one queued sweep per account that rests
/// an order on the symbol, then works this event's sweeps, one account per transaction, until
/// they are done or `budget` has passed; what is left is worked by the sweepers of every
/// replica ([`sweep_next`]). The answer lists the orders this call filled and the accounts
/// still pending.
#[tracing::instrument(skip_all, fields(quote.symbol = symbol))]
pub(crate) async fn set_quote(
    db: &PgPool,
    desk: &Desk,
    updated_by: Option<i32>,
    symbol: &str,
    (bid, ask): (Decimal, Decimal),
    budget: Option<Duration>,
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
    let mut tx = raptor_db::begin(db).await.context("begin")?;
    let (event, queued) =
        store::set_quote_event(&mut tx, symbol, bid, ask, updated_by, desk.now()).await?;
    audit::record(
        &mut tx,
        AuditEvent::new(
            updated_by,
            AuditAction::QuoteSet,
            json!({ "symbol": symbol, "bid": bid.to_string(), "ask": ask.to_string(),
                    "quote_event_id": event, "sweeps": queued }),
        ),
    )
    .await
    .context("audit quote")?;
    tx.commit().await.context("commit quote")?;

    let started = std::time::Instant::now();
    let mut filled = Vec::new();
    let mut worker = Worker::default();
    while budget.is_none_or(|budget| started.elapsed() < budget) {
        match worker.next(db, desk, Some(event)).await {
            Ok(Some(Swept::Filled(ids))) => filled.extend(ids),
            Ok(Some(Swept::Deferred)) => {}
            Ok(None) => break,
            Err(err) => {
                // The quote is set; the sweep that failed is retried by the sweepers.
                tracing::warn!(error = %err, quote.event = event, "quote sweep failed; left to the sweepers");
                break;
            }
        }
    }
    let mut conn = raptor_db::conn(db).await.context("acquire")?;
    let pending = store::pending_sweeps(&mut conn, Some(event)).await?;
    conn.finish().await.context("finish")?;
    Ok(QuoteResponse {
        symbol: symbol.to_owned(),
        bid: dto::price(bid),
        ask: dto::price(ask),
        sequence: event,
        filled_order_ids: filled,
        pending_accounts: pending,
    })
}

/// What one sweep did.
#[derive(Debug)]
pub(crate) enum Swept {
    /// Done: the orders it filled (maybe none).
    Filled(Vec<Uuid>),
    /// It failed (a lock timeout, say): rolled back and put back for a later attempt.
    Deferred,
}

/// A sweeper's position in the queue: it moves forward from the last sweep it took, and goes
/// once more over the whole queue when it reaches the end (for the sweeps it skipped because
/// another worker held them or an older event of their account was pending).
#[derive(Debug, Default)]
pub(crate) struct Worker {
    after: Option<(i64, i32)>,
}

impl Worker {
    /// The next sweep ([`sweep_next`]); `None` once a pass from the start found none ready.
    pub(crate) async fn next(
        &mut self,
        db: &PgPool,
        desk: &Desk,
        event: Option<i64>,
    ) -> ApiResult<Option<Swept>> {
        loop {
            match sweep_next(db, desk, event, self.after).await? {
                Some((swept, at)) => {
                    self.after = Some(at);
                    return Ok(Some(swept));
                }
                None if self.after.is_some() => self.after = None,
                None => return Ok(None),
            }
        }
    }
}

/// Works one pending sweep (of `event` only, when given) in a transaction of its own: the
/// account locked, its resting orders on the event's symbol judged against the event, the
/// fills written and audited, the sweep removed; with the sweep's position. `None` when no
/// sweep past `after` is ready (none pending, or each one held by another worker, backing off,
/// or waiting for an older event of its account). `Err` only when no sweep could be taken at
/// all (the database is not there).
///
/// The transaction commits with `synchronous_commit=off`: it does not wait for its WAL flush.
/// That is safe because the fills and the removal of the sweep commit together: a crash can
/// only lose the most recent sweeps whole, and their queue rows come back with them, so they
/// run again. Anything durable that came after a sweep (an order, a cancel: their commits wait
/// for the flush of all earlier WAL) makes that sweep durable too.
async fn sweep_next(
    db: &PgPool,
    desk: &Desk,
    event: Option<i64>,
    after: Option<(i64, i32)>,
) -> ApiResult<Option<(Swept, (i64, i32))>> {
    let mut tx = raptor_db::begin(db).await.context("begin")?;
    let Some(sweep) = store::next_sweep(&mut tx, event, after).await? else {
        tx.commit().await.context("commit")?;
        return Ok(None);
    };
    let swept = async {
        let filled = fill_resting_for(&mut tx, desk, &sweep).await?;
        store::finish_sweep(&mut tx, &sweep).await?;
        Ok::<_, ApiError>(filled)
    }
    .await;
    let filled = match swept {
        Ok(filled) => filled,
        Err(err) => {
            let _ = tx.rollback().await;
            return defer(db, &sweep, &err).await;
        }
    };
    if let Err(err) = tx.commit().await {
        return defer(db, &sweep, &err.into()).await;
    }
    let at = (sweep.event_id, sweep.user_id);
    if !filled.is_empty() {
        metrics::counter!("raptor_quote_sweep_fills_total").increment(filled.len() as u64);
        metrics::counter!("raptor_order_fills_total", "trigger" => "quote")
            .increment(filled.len() as u64);
    }
    metrics::counter!("raptor_quote_sweeps_total").increment(1);
    Ok(Some((Swept::Filled(filled), at)))
}

/// A sweep that failed: put back with a back-off.
async fn defer(
    db: &PgPool,
    sweep: &store::Sweep,
    err: &ApiError,
) -> ApiResult<Option<(Swept, (i64, i32))>> {
    tracing::warn!(error = %err, quote.event = sweep.event_id, user.id = sweep.user_id,
                   "quote sweep failed; retried later");
    metrics::counter!("raptor_quote_sweep_failures_total").increment(1);
    let mut conn = raptor_db::conn(db).await.context("acquire")?;
    store::defer_sweep(&mut conn, sweep).await?;
    conn.finish().await.context("finish")?;
    Ok(Some((Swept::Deferred, (sweep.event_id, sweep.user_id))))
}

/// Judges `sweep.user_id`'s resting orders on the event's symbol, placed before the event,
/// against the quotes as of the event (every leg's latest quote at or below its sequence), at
/// the event's time; fills, expiries and changed verdicts are written and audited.
async fn fill_resting_for(
    conn: &mut PgConnection,
    desk: &Desk,
    sweep: &store::Sweep,
) -> ApiResult<Vec<Uuid>> {
    let (user_id, symbol, now) = (sweep.user_id, sweep.symbol.as_str(), sweep.at);
    // One account that cannot trade must not block the quote for everyone else.
    let (_, mut account, open, _) = match account_state(conn, user_id, now, None, &[]).await {
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
        .filter(|(_, o)| {
            o.quote_seq < sweep.event_id
                && o.spec.legs.iter().any(|l| l.instrument.symbol() == symbol)
        })
        .map(|(i, _)| i)
        .collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let mut symbols: Vec<String> = candidates
        .iter()
        .flat_map(|&i| open[i].spec.legs.iter())
        .map(|l| l.instrument.symbol().to_owned())
        .collect();
    symbols.sort();
    symbols.dedup();
    // Every leg is judged as of the event: the latest quote of each symbol at or below the
    // event's sequence (the event's own symbol at the event's prices). A later quote of another
    // leg has its own event and its own sweep; mixing the two would fill at a net that never
    // existed, or miss a crossing that did.
    let quotes = store::quotes_as_of(conn, &symbols, sweep.event_id).await?;

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
                events.push(fill_event(
                    user_id,
                    order.id,
                    &execution,
                    "quote",
                    Some(sweep.event_id),
                ));
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
        let written =
            store::fill_resting_many(conn, user_id, &filled, &positions, desk.now()).await?;
        if written != filled.len() {
            // The account is locked, and every writer of its orders locks it first: no other
            // writer can have ended one of these orders. Refuse to commit a partial picture.
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
