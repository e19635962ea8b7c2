//! Placing an order, a roll or a close: the intent settled against the locked positions, the
//! engine's decision, the order row, its fills and its audit rows.

use axum::http::StatusCode;
use raptor_engine::{
    Decision, Instrument, LegSpec, OrderClass, OrderSpec, OrderStatus, OrderType, Position,
    PositionIntent, Side, TimeInForce,
};
use raptor_idempotency::{Completed, Completer, IdempotencyKey, Reply};
use rust_decimal::Decimal;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::book::{account_state, fill_event};
use super::client_order_id::ClientOrderId;
use crate::audit::{self, AuditAction, AuditEvent};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::trading::desk::Desk;
use crate::trading::dto::{self, OrderResponse};
use crate::trading::parse::{invalid_order, CloseDraft, OrderDraft, Price, RollDraft};
use crate::trading::store;

/// What the caller asked for, parsed at the boundary (`trading::parse`).
pub(crate) enum Intent {
    /// `POST /orders`.
    Order(OrderDraft),
    /// `POST /positions/{symbol}/roll`.
    Roll(RollDraft),
    /// `POST /positions/{symbol}/close`.
    Close(CloseDraft),
}

impl Intent {
    /// Every instrument the request names, by symbol, sorted and distinct (the quote lock
    /// order).
    fn instruments(&self) -> Vec<&Instrument> {
        let mut instruments: Vec<&Instrument> = match self {
            Self::Order(order) => order.legs.iter().map(|l| &l.instrument).collect(),
            Self::Roll(roll) => vec![&roll.from, &roll.to],
            Self::Close(close) => vec![&close.instrument],
        };
        instruments.sort_by(|a, b| a.symbol().cmp(b.symbol()));
        instruments.dedup_by(|a, b| a.symbol() == b.symbol());
        instruments
    }

    fn purpose(&self) -> &'static str {
        match self {
            Self::Order(_) => "order",
            Self::Roll(_) => "roll",
            Self::Close(_) => "close",
        }
    }
}

/// Picks the intent of a leg: the explicit one (checked against `side`), or the one implied by
/// `side` and the current position.
fn leg_intent(
    symbol: &str,
    side: Option<Side>,
    intent: Option<PositionIntent>,
    positions: &std::collections::BTreeMap<String, Position>,
) -> ApiResult<PositionIntent> {
    match (side, intent) {
        (Some(side), Some(intent)) if intent.side() != side => Err(invalid_order(format!(
            "{symbol:?}: side {side} contradicts position_intent {intent}"
        ))),
        (_, Some(intent)) => Ok(intent),
        (Some(side), None) => {
            let held = positions.get(symbol).map_or(Decimal::ZERO, |p| p.qty);
            Ok(PositionIntent::infer(side, held))
        }
        (None, None) => Err(invalid_order(format!(
            "{symbol:?}: side or position_intent is required"
        ))),
    }
}

/// Turns a parsed request into an engine order, given the (locked) positions; the requested
/// `client_order_id`, if any.
fn to_spec(
    intent: &Intent,
    positions: &std::collections::BTreeMap<String, Position>,
) -> ApiResult<(OrderSpec, Option<String>)> {
    match intent {
        Intent::Order(order) => {
            let legs = order
                .legs
                .iter()
                .map(|leg| {
                    let intent =
                        leg_intent(leg.instrument.symbol(), leg.side, leg.intent, positions)?;
                    Ok(LegSpec {
                        instrument: leg.instrument.clone(),
                        side: intent.side(),
                        ratio_qty: leg.ratio_qty,
                        position_intent: intent,
                    })
                })
                .collect::<ApiResult<Vec<_>>>()?;
            Ok((
                OrderSpec {
                    class: order.class,
                    order_type: order.order_type,
                    time_in_force: order.time_in_force,
                    qty: order.qty,
                    limit_price: order.limit_price.map(Price::get),
                    legs,
                },
                order.client_order_id.clone(),
            ))
        }
        Intent::Roll(roll) => {
            let spec = OrderSpec {
                class: OrderClass::Mleg,
                order_type: if roll.limit_price.is_some() {
                    OrderType::Limit
                } else {
                    OrderType::Market
                },
                time_in_force: TimeInForce::Day,
                qty: roll.qty,
                limit_price: roll.limit_price.map(Price::get),
                legs: vec![
                    LegSpec {
                        instrument: roll.from.clone(),
                        side: Side::Buy,
                        ratio_qty: 1,
                        position_intent: PositionIntent::BuyToClose,
                    },
                    LegSpec {
                        instrument: roll.to.clone(),
                        side: Side::Sell,
                        ratio_qty: 1,
                        position_intent: PositionIntent::SellToOpen,
                    },
                ],
            };
            Ok((spec, None))
        }
        Intent::Close(close) => {
            let symbol = close.instrument.symbol();
            let held = positions
                .get(symbol)
                .map(|p| p.qty)
                .filter(|q| !q.is_zero())
                .ok_or(ApiError::NotFound("position"))?;
            let intent = if held.is_sign_negative() {
                PositionIntent::BuyToClose
            } else {
                PositionIntent::SellToClose
            };
            let spec = OrderSpec::simple(
                close.instrument.clone(),
                intent,
                close.qty.unwrap_or(held.abs()),
                OrderType::Market,
                None,
                TimeInForce::Day,
            );
            Ok((spec, None))
        }
    }
}

fn spec_context(spec: &OrderSpec) -> serde_json::Value {
    json!({
        "order_class": spec.class.as_str(),
        "type": spec.order_type.as_str(),
        "qty": spec.qty.to_string(),
        "limit_price": spec.limit_price.map(|p| p.to_string()),
        "legs": spec.legs.iter().map(|l| json!({
            "symbol": l.instrument.symbol(),
            "side": l.side.as_str(),
            "position_intent": l.position_intent.as_str(),
            "ratio_qty": l.ratio_qty,
        })).collect::<Vec<_>>(),
    })
}

/// What placing made of an intent.
pub(crate) enum Placed {
    /// The order (filled or resting, `filled` says which): `201` with `Location`, stored on the
    /// key by the order's own statement.
    Order { filled: bool, answer: Completed },
    /// The engine refused it: a business answer, audited, so committed and replayed
    /// (`Reply::rejected`).
    Rejected(ApiError),
}

/// The answer to a placed order: `201` with `Location`.
fn created(order: &OrderResponse) -> Reply {
    let location = format!("/api/trading/orders/{}", order.id);
    Reply::json(StatusCode::CREATED, order).with_location(location)
}

/// Places an order, roll or close for `user_id`; the order's statement also completes the
/// claim's key (`completer`). `Err` is a refusal that keeps nothing (a malformed intent, a
/// taken client order id, the open-order limit) or an infrastructure failure.
#[tracing::instrument(skip_all, fields(user.id = user_id, order.purpose = intent.purpose()))]
pub(crate) async fn place(
    conn: &mut PgConnection,
    desk: &Desk,
    user_id: i32,
    intent: Intent,
    completer: &Completer<'_>,
    key: Option<IdempotencyKey>,
    lineage: Option<Uuid>,
) -> ApiResult<Placed> {
    // Microseconds, as Postgres stores it: the answer is built from these values, and a later
    // read of the rows must show the same.
    let now = chrono::SubsecRound::trunc_subsecs(desk.now(), 6);
    let purpose = intent.purpose();
    // The quotes are share-locked with the account: a quote update waits for this order, so
    // its sweep sees the order resting (or filled) and cannot miss it.
    let instruments = intent.instruments();
    let symbols: Vec<String> = instruments.iter().map(|i| i.symbol().to_owned()).collect();
    // Only the open orders that can matter to this order are read: those on its underlyings
    // (closing quantity, coverage). Reservations come from the account row.
    let mut underlyings: Vec<String> = instruments
        .iter()
        .map(|i| i.underlying().to_owned())
        .collect();
    underlyings.sort();
    underlyings.dedup();
    let scope = store::Scope {
        underlyings: &underlyings,
    };
    let (row, account, _, quotes) =
        account_state(conn, user_id, now, Some(scope), &symbols).await?;
    let (spec, requested_id) = to_spec(&intent, &account.positions)?;
    let ids = ClientOrderId::new(user_id, purpose, requested_id, key, lineage)?;
    let decision = match desk.engine().submit(&account, &spec, &quotes.quotes, now) {
        Ok(decision) => decision,
        Err(rejection) => {
            // The rejection is a business answer: audited, committed and replayed.
            audit::record(
                conn,
                AuditEvent::new(
                    Some(user_id),
                    AuditAction::OrderRejected,
                    json!({ "code": rejection.code(), "reason": rejection.to_string(),
                            "purpose": purpose, "client_order_id": ids.first,
                            "order": spec_context(&spec) }),
                ),
            )
            .await
            .context("audit rejection")?;
            return Ok(Placed::Rejected(rejection.into()));
        }
    };

    let open_orders = usize::try_from(row.open_orders).unwrap_or(usize::MAX);
    if matches!(decision, Decision::Rest { .. }) && open_orders >= desk.limits().max_open_orders {
        // Every quote update re-evaluates resting orders: one account must not be able to
        // make that (and the symbol's quote row lock) arbitrarily long.
        return Err(ApiError::invalid(
            ErrorCode::TooManyOpenOrders,
            format!(
                "this account has {open_orders} open orders, the most allowed; cancel some first"
            ),
        ));
    }
    let (status, reserved_cash, execution) = match &decision {
        Decision::Filled(execution) => (OrderStatus::Filled, Decimal::ZERO, Some(execution)),
        Decision::Rest { reserved_cash } => (OrderStatus::New, *reserved_cash, None),
    };
    let mut order = store::NewOrder {
        // Time-ordered (UUIDv7): the order's row, legs and fills go to the right-hand edge of
        // their primary-key indexes instead of a random page of each
        // (docs/benchmarks/history.md, "The soak").
        id: Uuid::now_v7(),
        user_id,
        client_order_id: ids.first.clone(),
        idempotency_key: key.map(|k| k.to_string()),
        purpose,
        spec: &spec,
        status,
        reserved_cash,
        execution,
        at: now,
        expires_at: (status == OrderStatus::New)
            .then(|| spec.expires_at(now))
            .flatten(),
        quote_seq: quotes.sequence,
    };
    // The order's audit rows are written by the order's own statement.
    let events = |order: &store::NewOrder<'_>| {
        let mut events = vec![AuditEvent::new(
            Some(user_id),
            AuditAction::OrderAccepted,
            json!({ "order_id": order.id, "purpose": purpose,
                    "client_order_id": order.client_order_id,
                    "reserved_cash": reserved_cash.to_string(), "order": spec_context(&spec) }),
        )];
        if let Some(execution) = execution {
            events.push(fill_event(user_id, order.id, execution, "submit", None));
        }
        audit::Rows::new(events)
    };
    // The answer is built from what is written, not read back, and stored on the key by the
    // same statement.
    let filled = execution.is_some();
    // The unique index decides whether the id is taken (no pre-check); a taken derived id
    // may belong to an expired key's order, then this lifetime's id is used (second pass).
    for reused in [false, true] {
        if reused {
            order.client_order_id = ids.reuse(conn, user_id, now).await?;
        }
        let pending = completer.prepare(created(&dto::order_response(&order)));
        if let Some(row) = store::insert_order(conn, &order, events(&order), &pending).await? {
            let answer = pending.written(&row).context("complete key")?;
            return Ok(Placed::Order { filled, answer });
        }
    }
    Err(ClientOrderId::duplicate(&order.client_order_id))
}
