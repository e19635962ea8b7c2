//! The paper book's operations: place (orders, rolls, closes), cancel, reset, and quote-driven
//! fills. Each runs on the caller's connection (a `Claim` transaction or a plain one), locks the
//! account first, asks the pure engine, then writes the result and its audit rows.

use raptor_engine::{
    AccountState, Decision, Instrument, LegSpec, OrderClass, OrderEvent, OrderSpec, OrderStatus,
    OrderType, Position, PositionIntent, Side, TimeInForce, Transition,
};
use raptor_idempotency::{IdempotencyKey, Policy, Tier1};
use rust_decimal::Decimal;
use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use super::dto::{
    self, invalid_order, AccountResponse, CloseDraft, OrderDraft, OrderResponse, QuoteResponse,
    RollDraft,
};
use super::store::{self, StoredOrder};
use crate::audit::{self, AuditAction, AuditEvent};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::state::ApiState;

/// Namespace of derived `client_order_id`s (UUIDv5 of account, purpose and Idempotency-Key).
const CLIENT_ORDER_ID_NAMESPACE: Uuid = Uuid::from_u128(0x6d1e_0f3a_51c4_4e1b_9a0d_7c55_2b8e_11a7);

/// What the caller asked for, parsed at the boundary (`dto.rs`).
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
                    limit_price: order.limit_price.map(dto::Price::get),
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
                limit_price: roll.limit_price.map(dto::Price::get),
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

/// The order's `client_order_id`: the requested one, or one derived from the Idempotency-Key so
/// that a future live adapter can forward it as the broker's own dedup id (random without a key).
///
/// The derived id is the same for every retry of one key within its retention (also after a
/// released or stale attempt, and also while the kill switch is off, so a retry after the switch
/// comes back cannot execute twice), and different for a key reused after it expired: when the
/// key's first id belongs to an order older than the key's retention, that order's key has
/// expired, and the id comes from the new lifetime's lineage instead ([`ClientOrderId::reuse`]).
struct ClientOrderId {
    first: String,
    /// For a derived id: the id of this lifetime of the key, used when `first` belongs to an
    /// order older than the key's retention.
    lifetime: Option<String>,
    requested: bool,
}

impl ClientOrderId {
    fn new(
        user_id: i32,
        purpose: &str,
        requested: Option<String>,
        key: Option<IdempotencyKey>,
        lineage: Option<Uuid>,
    ) -> ApiResult<Self> {
        if let Some(id) = requested {
            return Ok(Self {
                first: id,
                lifetime: None,
                requested: true,
            });
        }
        let Some(key) = key else {
            return Ok(Self {
                first: Uuid::new_v4().to_string(),
                lifetime: None,
                requested: false,
            });
        };
        let derive = |suffix: String| {
            Uuid::new_v5(
                &CLIENT_ORDER_ID_NAMESPACE,
                format!("{user_id}:{purpose}:{key}{suffix}").as_bytes(),
            )
            .to_string()
        };
        let lifetime = lineage.unwrap_or_else(Uuid::new_v4);
        Ok(Self {
            first: derive(String::new()),
            lifetime: Some(derive(format!(":{lifetime}"))),
            requested: false,
        })
    }

    fn duplicate(id: &str) -> ApiError {
        ApiError::invalid(
            ErrorCode::DuplicateClientOrderId,
            format!("client_order_id {id} is already used on this account"),
        )
    }

    /// After `first` was found taken: the id to use instead, or the duplicate error.
    async fn reuse(
        &self,
        conn: &mut PgConnection,
        user_id: i32,
        now: chrono::DateTime<chrono::Utc>,
    ) -> ApiResult<String> {
        let (false, Some(lifetime)) = (self.requested, &self.lifetime) else {
            return Err(Self::duplicate(&self.first));
        };
        let created = store::client_order_id_created(conn, user_id, &self.first).await?;
        let retention = chrono::Duration::from_std(<Tier1 as Policy>::TTL).unwrap_or_default();
        match created {
            // The key's order exists and its key may still be retained: a second execution.
            Some(created) if now - created < retention => Err(Self::duplicate(&self.first)),
            _ => Ok(lifetime.clone()),
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

/// Accounts swept per transaction by `raptor orders expire` and the schedule.
const ACCOUNTS_PER_SWEEP: i64 = 100;

/// Expires the open orders that stopped being good by `now` (day orders at the session close,
/// orders on options at their last close) of `user_id`, whose account the caller has locked.
/// Each expiry frees its reservation and is audited, in the caller's transaction.
pub(crate) async fn expire_due(
    conn: &mut PgConnection,
    user_id: i32,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<usize> {
    let expired = store::expire_due(conn, user_id, now).await?;
    for order in &expired {
        let reason = if order.time_in_force == "day" {
            "session_close"
        } else {
            "contract_expiry"
        };
        audit::record(
            conn,
            AuditEvent::new(
                Some(order.user_id),
                AuditAction::OrderExpired,
                json!({ "order_id": order.id, "reason": reason,
                        "expires_at": order.expires_at }),
            ),
        )
        .await
        .context("audit expiry")?;
    }
    Ok(expired.len())
}

/// One sweep of every account's due orders, in batches of [`EXPIRY_BATCH`] (each its own
/// transaction, so it never holds many locks): `raptor orders expire` and the schedule.
pub async fn expire_orders(state: &ApiState) -> ApiResult<usize> {
    let mut total = 0;
    loop {
        let now = state.clock.now();
        let mut tx = state.db.begin().await.context("begin")?;
        // Account by account, each locked first: the lock order of the book (an order writer
        // holds its account's row before any of its orders, and the reservation trigger
        // updates that row), so the sweep cannot deadlock with orders or quote updates. An
        // account another transaction holds is skipped: touching it expires its orders anyway.
        let accounts =
            store::lock_accounts_with_due_orders(&mut tx, now, ACCOUNTS_PER_SWEEP).await?;
        for &user_id in &accounts {
            total += expire_due(&mut tx, user_id, now).await?;
        }
        tx.commit().await.context("commit expiry")?;
        if i64::try_from(accounts.len()).unwrap_or(i64::MAX) < ACCOUNTS_PER_SWEEP {
            return Ok(total);
        }
    }
}

/// Expires the caller's due orders before a read, so reads never show a dead order as open.
/// Usually one cheap indexed look; when there is something to expire, the account is locked
/// first (the book's lock order).
pub(crate) async fn expire_for_read(state: &ApiState, user_id: i32) -> ApiResult<()> {
    let now = state.clock.now();
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let due = store::has_due_orders(&mut conn, user_id, now).await?;
    conn.finish().await.context("finish")?;
    if !due {
        return Ok(());
    }
    let mut tx = state.db.begin().await.context("begin")?;
    store::lock_account(&mut tx, user_id).await?;
    expire_due(&mut tx, user_id, now).await?;
    tx.commit().await.context("commit expiry")?;
    Ok(())
}

async fn account_state(
    conn: &mut PgConnection,
    user_id: i32,
    now: chrono::DateTime<chrono::Utc>,
    scope: Option<store::Scope<'_>>,
) -> ApiResult<(store::AccountRow, AccountState, Vec<StoredOrder>)> {
    let mut account = store::lock_account(conn, user_id).await?;
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
    Ok((account, state, book.open))
}

/// What placing made of an intent.
#[derive(Debug)]
pub(crate) enum Placed {
    /// The order (filled or resting).
    Order(Box<OrderResponse>),
    /// The engine refused it: a business answer, audited, so committed and replayed
    /// (`Reply::rejected`).
    Rejected(ApiError),
}

/// Places an order, roll or close for `user_id`. `Err` is a refusal that keeps nothing (a
/// malformed intent, a taken client order id, the open-order limit) or an infrastructure
/// failure.
#[tracing::instrument(skip_all, fields(user.id = user_id, order.purpose = intent.purpose()))]
pub(crate) async fn place(
    conn: &mut PgConnection,
    state: &ApiState,
    user_id: i32,
    intent: Intent,
    key: Option<IdempotencyKey>,
    lineage: Option<Uuid>,
) -> ApiResult<Placed> {
    // Microseconds, as Postgres stores it: the answer is built from these values, and a later
    // read of the rows must show the same.
    let now = chrono::SubsecRound::trunc_subsecs(state.clock.now(), 6);
    let purpose = intent.purpose();
    // Quote rows first (shared), then the account: the lock order of quote updates. Without
    // the share lock, a quote update could commit between this read and this order resting,
    // and the order would miss the quote that makes it marketable.
    let instruments = intent.instruments();
    let symbols: Vec<String> = instruments.iter().map(|i| i.symbol().to_owned()).collect();
    let quotes = store::quotes(conn, &symbols, true).await?;
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
    let (row, account, _) = account_state(conn, user_id, now, Some(scope)).await?;
    let (spec, requested_id) = to_spec(&intent, &account.positions)?;
    let ids = ClientOrderId::new(user_id, purpose, requested_id, key, lineage)?;
    let decision = match state.engine.submit(&account, &spec, &quotes, now) {
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
    if matches!(decision, Decision::Rest { .. }) && open_orders >= state.config.max_open_orders {
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
        id: Uuid::new_v4(),
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
            .then(|| raptor_engine::calendar::order_expires_at(&spec, now))
            .flatten(),
    };
    // The unique index decides whether the id is taken (no pre-check); a taken derived id
    // may belong to an expired key's order, then this lifetime's id is used.
    if !store::insert_order(conn, &order).await? {
        order.client_order_id = ids.reuse(conn, user_id, now).await?;
        if !store::insert_order(conn, &order).await? {
            return Err(ClientOrderId::duplicate(&order.client_order_id));
        }
    }
    let mut events = vec![AuditEvent::new(
        Some(user_id),
        AuditAction::OrderAccepted,
        json!({ "order_id": order.id, "purpose": purpose,
                "client_order_id": order.client_order_id,
                "reserved_cash": reserved_cash.to_string(), "order": spec_context(&spec) }),
    )];
    if let Some(execution) = execution {
        events.push(fill_event(user_id, order.id, execution, "submit"));
    }
    audit::record_many(conn, events)
        .await
        .context("audit order")?;
    // The answer is built from what was written, not read back.
    Ok(Placed::Order(Box::new(dto::order_response(&order))))
}

/// The `order.filled` audit row of an execution.
fn fill_event(
    user_id: i32,
    order_id: Uuid,
    execution: &raptor_engine::Execution,
    trigger: &'static str,
) -> AuditEvent {
    AuditEvent::new(
        Some(user_id),
        AuditAction::OrderFilled,
        json!({
            "order_id": order_id,
            "trigger": trigger,
            "net_price": execution.net_price.to_string(),
            "cash_delta": execution.cash_delta.to_string(),
            "fees": execution.fees.to_string(),
            "realized_pnl": execution.realized_pnl.to_string(),
            "fills": execution.fills.iter().map(|f| json!({
                "leg_index": f.leg_index, "symbol": f.symbol, "side": f.side.as_str(),
                "qty": f.qty.to_string(), "price": f.price.to_string(),
                "realized_pnl": f.realized_pnl.to_string(),
            })).collect::<Vec<_>>(),
        }),
    )
}

/// Cancels an open order; a canceled one is returned unchanged (no new audit row).
#[tracing::instrument(skip_all, fields(user.id = user_id, order.id = %order_id))]
pub(crate) async fn cancel(
    conn: &mut PgConnection,
    state: &ApiState,
    user_id: i32,
    order_id: Uuid,
) -> ApiResult<OrderResponse> {
    store::lock_account(conn, user_id).await?;
    expire_due(conn, user_id, state.clock.now()).await?;
    let order = store::find_order(conn, user_id, order_id, true)
        .await?
        .ok_or(ApiError::NotFound("order"))?;
    let stored = order.row.status.clone();
    let status: OrderStatus = stored
        .parse()
        .map_err(|_| ApiError::Internal(anyhow::anyhow!("bad stored status {stored}")))?;
    match status.apply(OrderEvent::Cancel) {
        Ok(Transition::NoOp) => return OrderResponse::try_from(order),
        Ok(Transition::To(_)) => {
            store::end_open_order(conn, order_id, OrderStatus::Canceled, state.clock.now()).await?;
            audit::record(
                conn,
                AuditEvent::new(
                    Some(user_id),
                    AuditAction::OrderCanceled,
                    json!({ "order_id": order_id, "reason": "requested" }),
                ),
            )
            .await
            .context("audit cancel")?;
        }
        Err(_) => return Err(ApiError::OrderNotCancelable { status: stored }),
    }
    store::find_order(conn, user_id, order_id, false)
        .await?
        .map(OrderResponse::try_from)
        .ok_or(ApiError::NotFound("order"))?
}

/// The account as the reads show it.
pub(crate) async fn account(conn: &mut PgConnection, user_id: i32) -> ApiResult<AccountResponse> {
    let account = store::read_account(conn, user_id).await?;
    let reserved: Decimal = raptor_db::query_scalar(
        "select coalesce(sum(reserved_cash), 0) from paper_orders where user_id = $1 and status = 'new'",
    )
    .bind(user_id)
    .fetch_one(conn)
    .await
    .context("reserved cash")?;
    Ok(AccountResponse {
        mode: dto::stored(&account.mode, "mode")?,
        currency: dto::CurrencyDto::Usd,
        cash: dto::money(account.cash),
        buying_power: dto::money(account.cash - reserved),
        reserved_cash: dto::money(reserved),
        realized_pnl: dto::money(account.realized_pnl),
    })
}

/// Resets the paper account: open orders canceled, positions gone, starting cash.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn reset(
    conn: &mut PgConnection,
    state: &ApiState,
    user_id: i32,
) -> ApiResult<AccountResponse> {
    let now = state.clock.now();
    let (before, account, open) = account_state(conn, user_id, now, None).await?;
    for order in &open {
        store::end_open_order(conn, order.id, OrderStatus::Canceled, now).await?;
        audit::record(
            conn,
            AuditEvent::new(
                Some(user_id),
                AuditAction::OrderCanceled,
                json!({ "order_id": order.id, "reason": "account_reset" }),
            ),
        )
        .await
        .context("audit reset cancel")?;
    }
    let cash = state.config.paper_starting_cash;
    store::reset_account(conn, user_id, cash).await?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::AccountReset,
            json!({
                "previous_cash": before.cash.to_string(),
                "previous_realized_pnl": before.realized_pnl.to_string(),
                "positions_cleared": account.positions.values().filter(|p| !p.qty.is_zero()).count(),
                "orders_canceled": open.len(),
                "cash": cash.to_string(),
            }),
        ),
    )
    .await
    .context("audit reset")?;
    self::account(conn, user_id).await
}

/// Sets a quote and, in the same transaction, fills every resting order it makes marketable.
#[tracing::instrument(skip_all, fields(quote.symbol = symbol))]
pub async fn set_quote(
    state: &ApiState,
    updated_by: Option<i32>,
    symbol: &str,
    bid: Decimal,
    ask: Decimal,
) -> ApiResult<QuoteResponse> {
    dto::instrument(symbol)?;
    let in_range = |p: Decimal| {
        !p.is_sign_negative() && p.scale() <= dto::PRICE_SCALE && p <= raptor_engine::MAX_PRICE
    };
    if !in_range(bid) || !in_range(ask) || ask < bid {
        return Err(ApiError::invalid(
            ErrorCode::InvalidQuote,
            "bid and ask must be between 0 and 1000000000 with at most 6 decimals, ask >= bid",
        ));
    }
    let mut tx = state.db.begin().await.context("begin")?;
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
        filled.extend(fill_resting_for(&mut tx, state, user_id, symbol).await?);
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
    state: &ApiState,
    user_id: i32,
    symbol: &str,
) -> ApiResult<Vec<Uuid>> {
    let now = state.clock.now();
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
        match state
            .engine
            .evaluate_resting(&account, &order.spec, &quotes, now)
        {
            Ok(Some(execution)) => {
                // Applied here so later orders are judged against it; written below, with
                // every other fill of the account, in one statement.
                state.engine.apply(&mut account, &execution);
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
