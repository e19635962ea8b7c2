//! `GET /api/trading/stream`: the signed-in user's trade updates as server-sent events
//! (`docs/adr/0140-trade-updates-stream.md`).
//!
//! - **The history is the audit log.** Every change of an order writes an audit row in its own
//!   transaction, under the account's row lock, so one user's trade rows commit in id order;
//!   an event's id is its row's id, and `Last-Event-ID: n` resumes with the first row after `n`
//!   (no gap, no duplicate).
//! - **The wake-up is a NOTIFY.** A trigger on `audit_log` (migration
//!   `…_trade_updates_notify.sql`) sends `pg_notify('raptor_trade_updates', user_id)` for those
//!   rows, delivered when their transaction commits. One listener per process ([`TradeStreams`],
//!   on a connection of its own) wakes the user's streams; each then reads its next rows itself.
//!   Reads are pulled: a stream reads only when its reader has taken what it had, so a paused
//!   reader holds at most one page ([`PAGE`]) however many events wait for it in Postgres.
//! - **Bounds**: open streams per user and per process ([`StreamLimits`]); a comment line every
//!   15 s keeps proxies from closing an idle stream; the drain of a shutdown ends every stream.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use chrono::{DateTime, Utc};
use futures_util::Stream;
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;
use sqlx::postgres::PgListener;
use sqlx::PgConnection;
use tokio::sync::{watch, Notify};
use utoipa::ToSchema;
use uuid::Uuid;

use super::dto::OrderResponse;
use super::store;
use crate::auth::AuthUser;
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::state::ApiState;

/// The channel the audit log's trigger notifies, with the user id as payload.
pub const CHANNEL: &str = "raptor_trade_updates";

/// The audit actions that are trade updates (the trigger's list, in the same migration).
pub const TRADE_ACTIONS: &[&str] = &[
    "order.accepted",
    "order.filled",
    "order.canceled",
    "order.expired",
    "order.rejected",
    "order.evaluation_rejected",
    "position.expired",
];

/// Rows one read of a stream takes at most: what a paused reader can hold in this process.
pub const PAGE: i64 = 100;

/// How often an idle stream sends a comment line (below the 60 s idle timeouts of common
/// load balancers).
pub const HEARTBEAT: Duration = Duration::from_secs(15);

/// Open streams at most, per user and per process.
#[derive(Debug, Clone, Copy)]
pub struct StreamLimits {
    /// Per user (`429 rate_limited` past it).
    pub per_user: usize,
    /// Per process (`503 too_many_connections` past it).
    pub per_process: usize,
}

impl Default for StreamLimits {
    fn default() -> Self {
        Self {
            per_user: 5,
            per_process: 1000,
        }
    }
}

/// The listener's `application_name` in `pg_stat_activity`.
pub const LISTENER_NAME: &str = "raptor-listen";

/// Where the listener connects instead of `DATABASE_URL` (`RAPTOR_LISTEN_DATABASE_URL`): a
/// session of its own on the same database, for when `DATABASE_URL` goes through a pooler in
/// transaction mode, which gives the server session to another client after each transaction
/// (a `LISTEN` there would be another client's, or no one's).
#[derive(Clone)]
pub struct ListenTarget(sqlx::postgres::PgConnectOptions);

impl ListenTarget {
    /// The target of a Postgres URL (`None` when it is not one).
    pub fn parse(url: &str) -> Option<Self> {
        url.parse().ok().map(Self)
    }
}

impl std::fmt::Debug for ListenTarget {
    /// Host, port and database: never the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ListenTarget({}:{}/{})",
            self.0.get_host(),
            self.0.get_port(),
            self.0.get_database().unwrap_or_default()
        )
    }
}

/// The streams of this process: who has one open, the listener that wakes them, and the end
/// of them all at shutdown.
pub struct TradeStreams {
    limits: StreamLimits,
    /// The listener's own pool (one connection, opened with the first stream).
    pool: sqlx::PgPool,
    users: Mutex<HashMap<i32, Watched>>,
    open: AtomicUsize,
    closed: watch::Sender<bool>,
    listening: OnceLock<()>,
}

/// One user's open streams.
struct Watched {
    wake: Arc<Notify>,
    open: usize,
}

impl std::fmt::Debug for TradeStreams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TradeStreams")
            .field("limits", &self.limits)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl TradeStreams {
    /// No stream open yet; the listener starts with the first one, on a connection of its own:
    /// to `listen` when given (`RAPTOR_LISTEN_DATABASE_URL`: a direct session when `db` goes
    /// through a transaction pooler), else with `db`'s connect options.
    pub fn new(limits: StreamLimits, db: &sqlx::PgPool, listen: Option<&ListenTarget>) -> Self {
        let timeout = Duration::from_secs(5);
        let pool = match listen {
            Some(target) => raptor_db::pool::side_to(target.0.clone(), LISTENER_NAME, timeout),
            None => raptor_db::pool::side(db, LISTENER_NAME, timeout),
        };
        Self {
            limits,
            pool,
            users: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
            closed: watch::channel(false).0,
            listening: OnceLock::new(),
        }
    }

    /// The listener's pool (closing it stops the listener).
    pub fn listen_pool(&self) -> &sqlx::PgPool {
        &self.pool
    }

    /// Open streams now.
    pub fn open_streams(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }

    /// Ends every stream (the end of a shutdown's drain) and the listener; none opens after.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// A stream of `user_id` may open: its place in the counts, and its wake-up.
    fn admit(self: &Arc<Self>, user_id: i32) -> ApiResult<Admitted> {
        if self.is_closed() {
            return Err(saturated("this server is shutting down; reconnect"));
        }
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        let watched = users.entry(user_id).or_insert_with(|| Watched {
            wake: Arc::new(Notify::new()),
            open: 0,
        });
        if watched.open >= self.limits.per_user {
            return Err(ApiError::TooManyRequests {
                retry_after_secs: 1,
            });
        }
        if self.open.load(Ordering::Acquire) >= self.limits.per_process {
            return Err(saturated(
                "this server holds as many trade streams as it serves; retry shortly",
            ));
        }
        watched.open += 1;
        self.open.fetch_add(1, Ordering::AcqRel);
        Ok(Admitted {
            streams: self.clone(),
            user_id,
            wake: watched.wake.clone(),
        })
    }

    /// Wakes the streams of `user_id` (a notification).
    fn wake(&self, user_id: i32) {
        let users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(watched) = users.get(&user_id) {
            watched.wake.notify_waiters();
        }
    }

    /// Wakes every stream (the listener (re)connected: what it missed is read now).
    fn wake_all(&self) {
        let users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        for watched in users.values() {
            watched.wake.notify_waiters();
        }
    }

    /// Starts the listener once.
    fn listen(self: &Arc<Self>) {
        if self.listening.set(()).is_err() {
            return;
        }
        tokio::spawn(listen(self.clone(), self.pool.clone()));
    }
}

/// `503 too_many_connections` with `message`.
fn saturated(message: &str) -> ApiError {
    ApiError::ServiceUnavailable {
        code: ErrorCode::TooManyConnections,
        message: message.to_owned(),
        retry_after_secs: Some(1),
    }
}

/// A stream's place in the counts; given back when the stream ends.
struct Admitted {
    streams: Arc<TradeStreams>,
    user_id: i32,
    wake: Arc<Notify>,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.streams.open.fetch_sub(1, Ordering::AcqRel);
        let mut users = self
            .streams
            .users
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(watched) = users.get_mut(&self.user_id) {
            watched.open = watched.open.saturating_sub(1);
            if watched.open == 0 {
                users.remove(&self.user_id);
            }
        }
    }
}

/// The listener: `LISTEN raptor_trade_updates` on its own session (never through a pooler in
/// transaction mode, which would give the session away after each statement); each
/// notification wakes its user's streams; every (re)connect wakes them all, so a notification
/// lost while it was down costs a read, not an event.
async fn listen(streams: Arc<TradeStreams>, pool: sqlx::PgPool) {
    let mut closed = streams.closed.subscribe();
    while !streams.is_closed() && !pool.is_closed() {
        let connected = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = match connected.await {
            Ok(listener) => listener,
            Err(err) => {
                tracing::warn!(error = %err, "trade updates: cannot listen; retrying in 1 s");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = closed.changed() => return,
                }
            }
        };
        streams.wake_all();
        loop {
            tokio::select! {
                received = listener.try_recv() => match received {
                    Ok(Some(notification)) => {
                        if let Ok(user_id) = notification.payload().parse::<i32>() {
                            streams.wake(user_id);
                        }
                    }
                    // The connection was lost; the next receive connects and listens again.
                    Ok(None) => streams.wake_all(),
                    Err(err) => {
                        if !pool.is_closed() {
                            tracing::warn!(error = %err, "trade updates: the listener failed");
                        }
                        break;
                    }
                },
                _ = closed.changed() => return,
            }
        }
    }
}

/// What a trade update is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TradeEvent {
    /// An order was accepted (it rests, or fills in the same instant: a `fill` follows).
    New,
    /// An order filled completely.
    Fill,
    /// An order filled in part.
    PartialFill,
    /// An open order was canceled.
    Canceled,
    /// An open order stopped being good (the session's close for a day order, its contract's
    /// last close).
    Expired,
    /// An order was refused (when it was placed: no order exists; when a quote made a resting
    /// order marketable: the order stays open).
    Rejected,
    /// An option position expired: settled in cash, or expired worthless.
    Settled,
}

impl TradeEvent {
    fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Fill => "fill",
            Self::PartialFill => "partial_fill",
            Self::Canceled => "canceled",
            Self::Expired => "expired",
            Self::Rejected => "rejected",
            Self::Settled => "settled",
        }
    }
}

/// One trade update: the `data` of an SSE message whose `event` is its `event` and whose `id`
/// is its `id`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TradeUpdate {
    /// The event's id, increasing: send the last one seen back as `Last-Event-ID` to resume.
    #[schema(example = "4211")]
    pub id: String,
    /// What happened.
    pub event: TradeEvent,
    /// When it happened (the change's commit).
    pub occurred_at: DateTime<Utc>,
    /// The order, as `GET /api/trading/orders/{id}` answers it when the event is read (`null`
    /// for a settlement, and for an order refused when it was placed).
    pub order: Option<OrderResponse>,
    /// The symbol concerned (a settlement's contract, a fill's first leg).
    pub symbol: Option<String>,
    /// A fill's price (the net price per unit of a multi-leg order), a settlement's price.
    #[schema(value_type = Option<String>, example = "190.10")]
    pub price: Option<Decimal>,
    /// A fill's quantity (its first leg's), a settlement's contracts.
    #[schema(value_type = Option<String>, example = "10")]
    pub qty: Option<Decimal>,
    /// The signed quantity of `symbol`'s position right after the event (negative when short,
    /// `0` when flat): a fill's first leg, a settlement (always `0`).
    #[schema(value_type = Option<String>, example = "10")]
    pub position_qty: Option<Decimal>,
    /// Why: a rejection's or evaluation's code, a cancel's or expiry's reason, a settlement's
    /// outcome (`cash`, `worthless`).
    pub reason: Option<String>,
}

/// One audit row of a trade action.
#[derive(sqlx::FromRow)]
struct TradeRow {
    id: i64,
    action: String,
    context: Value,
    created_at: DateTime<Utc>,
}

/// The next rows of `user_id` after `after`, as updates: three statements per page whatever
/// its length (the rows, then their orders with the orders' legs).
async fn read_after(
    conn: &mut PgConnection,
    user_id: i32,
    after: i64,
) -> ApiResult<Vec<TradeUpdate>> {
    let rows: Vec<TradeRow> = raptor_db::query_as(
        "select id, action, context, created_at from audit_log
          where user_id = $1 and id > $2 and action = any($3)
          order by id limit $4",
    )
    .bind(user_id)
    .bind(after)
    .bind(TRADE_ACTIONS)
    .bind(PAGE)
    .fetch_all(&mut *conn)
    .await
    .context("read trade updates")?;
    let mut ids: Vec<Uuid> = rows.iter().filter_map(TradeRow::order_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut orders = HashMap::new();
    for record in store::find_orders(conn, user_id, &ids).await? {
        orders.insert(record.row.id, OrderResponse::try_from(record)?);
    }
    Ok(rows
        .into_iter()
        .map(|row| {
            let order = row.order_id().and_then(|id| orders.get(&id)).cloned();
            update(row, order)
        })
        .collect())
}

impl TradeRow {
    /// The order the row is about (none for a settlement or a refused placement).
    fn order_id(&self) -> Option<Uuid> {
        self.context["order_id"]
            .as_str()
            .and_then(|id| Uuid::parse_str(id).ok())
    }
}

/// A decimal stored as text in an audit row's context.
fn decimal(value: &Value) -> Option<Decimal> {
    value.as_str()?.parse().ok()
}

/// A price as the order's money fields show it: no trailing zeros past the cents
/// (`190.100000` is `190.10`, `1.2345` stays).
fn money(price: Decimal) -> Decimal {
    let mut price = price.normalize();
    if price.scale() < 2 {
        price.rescale(2);
    }
    price
}

fn text(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

/// The update an audit row describes, with its order as it is now. Everything but `order` comes
/// from the row, so an event reads the same whenever it is read.
fn update(row: TradeRow, order: Option<OrderResponse>) -> TradeUpdate {
    let context = &row.context;
    let first_fill = &context["fills"][0];
    let mut update = TradeUpdate {
        id: row.id.to_string(),
        event: TradeEvent::Settled,
        occurred_at: row.created_at,
        order: None,
        symbol: None,
        price: None,
        qty: None,
        position_qty: None,
        reason: None,
    };
    match row.action.as_str() {
        "order.accepted" => update.event = TradeEvent::New,
        "order.filled" => {
            let qty = decimal(&first_fill["qty"]);
            // The paper engine fills an order whole; a fill of less than its first leg's
            // quantity would be partial.
            let leg_qty = order
                .as_ref()
                .and_then(|o| o.legs.first())
                .map(|leg| leg.qty);
            update.event = match (qty, leg_qty) {
                (Some(qty), Some(leg_qty)) if qty < leg_qty => TradeEvent::PartialFill,
                _ => TradeEvent::Fill,
            };
            update.symbol = text(&first_fill["symbol"]);
            update.price = decimal(&context["net_price"]).map(money);
            update.qty = qty.map(|qty| qty.normalize());
            // Absent from rows written before the field existed.
            update.position_qty = decimal(&first_fill["position_qty"]);
        }
        "order.canceled" => {
            update.event = TradeEvent::Canceled;
            update.reason = text(&context["reason"]);
        }
        "order.expired" => {
            update.event = TradeEvent::Expired;
            update.reason = text(&context["reason"]);
        }
        "order.rejected" | "order.evaluation_rejected" => {
            update.event = TradeEvent::Rejected;
            update.reason = text(&context["code"]);
        }
        _ => {
            update.symbol = text(&context["symbol"]);
            update.price = decimal(&context["settlement_price"]).map(money);
            update.qty = decimal(&context["qty"]).map(|qty| qty.abs().normalize());
            // An expired position is closed by its settlement.
            update.position_qty = Some(Decimal::ZERO);
            update.reason = text(&context["outcome"]);
        }
    }
    update.order = order;
    update
}

/// Where a new stream starts: after `Last-Event-ID` when it is one of the user's events still
/// kept, or `0` (the start of the kept history: what a stream opened before the user's first
/// event announces), `410 stream_history_gone` otherwise; without it, after the user's newest
/// event (a stream carries what happens from now on; the lists hold the past).
async fn start(conn: &mut PgConnection, user_id: i32, headers: &HeaderMap) -> ApiResult<i64> {
    let Some(value) = headers.get("last-event-id") else {
        let newest: Option<i64> = raptor_db::query_scalar(
            "select max(id) from audit_log where user_id = $1 and action = any($2)",
        )
        .bind(user_id)
        .bind(TRADE_ACTIONS)
        .fetch_one(&mut *conn)
        .await
        .context("newest trade update")?;
        return Ok(newest.unwrap_or(0));
    };
    let gone = || ApiError::Gone {
        code: ErrorCode::StreamHistoryGone,
        message: "Last-Event-ID is not an event of this stream that is still kept: read the \
                  orders and activities again, then open the stream without it"
            .to_owned(),
    };
    let id: i64 = value
        .to_str()
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .filter(|id| *id >= 0)
        .ok_or_else(gone)?;
    if id == 0 {
        return Ok(0);
    }
    let kept: bool = raptor_db::query_scalar(
        "select exists (select 1 from audit_log
                         where user_id = $1 and id = $2 and action = any($3))",
    )
    .bind(user_id)
    .bind(id)
    .bind(TRADE_ACTIONS)
    .fetch_one(&mut *conn)
    .await
    .context("check Last-Event-ID")?;
    if kept {
        Ok(id)
    } else {
        Err(gone())
    }
}

/// A stream's state between the events it yields.
struct Reader {
    state: ApiState,
    user_id: i32,
    after: i64,
    pending: VecDeque<TradeUpdate>,
    admitted: Admitted,
    closed: watch::Receiver<bool>,
}

impl Reader {
    /// The next update: one already read, else the next page, else the next wake-up. `None`
    /// ends the stream (shutdown, or a read that failed: the client resumes).
    async fn next(&mut self) -> Option<TradeUpdate> {
        loop {
            if *self.closed.borrow() {
                return None;
            }
            if let Some(update) = self.pending.pop_front() {
                return Some(update);
            }
            let wake = self.admitted.wake.clone();
            let woken = wake.notified();
            tokio::pin!(woken);
            // Registered before the read: a commit between the read and the wait still wakes.
            woken.as_mut().enable();
            let read = async {
                let mut conn = raptor_db::conn(&self.state.db).await?;
                let updates = read_after(&mut conn, self.user_id, self.after).await;
                conn.finish().await?;
                updates
            };
            match read.await {
                Ok(updates) if !updates.is_empty() => {
                    if let Some(last) = updates.last().and_then(|u| u.id.parse().ok()) {
                        self.after = last;
                    }
                    self.pending.extend(updates);
                    continue;
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, user.id = self.user_id, "trade updates: read failed; ending the stream");
                    return None;
                }
            }
            tokio::select! {
                () = &mut woken => {}
                _ = self.closed.changed() => return None,
            }
        }
    }
}

/// Stream trade updates
///
/// The user's trade updates as server-sent events, each a `TradeUpdate` with its order. Ids
/// increase: send the last as `Last-Event-ID` to resume with no gap and no duplicate. `410
/// stream_history_gone` when it names no event still kept; `429 rate_limited` past 5 streams of
/// the user; `503 too_many_connections` when the server is full. A comment comes every 15 s; a
/// reader whose socket takes nothing for 60 s is dropped.
#[utoipa::path(get, path = "/api/trading/stream", tag = "trading",
    security(("bearer" = [])),
    params(("Last-Event-ID" = Option<String>, Header,
        description = "The id of the last event received, to resume after it", example = "4211")),
    responses(
        (status = 200, description = "the stream of trade updates, each message's data a TradeUpdate",
            content_type = "text/event-stream", body = TradeUpdate),
    ))]
pub(crate) async fn stream_trade_updates(
    State(state): State<ApiState>,
    user: AuthUser,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let streams = state.trade_streams().clone();
    let admitted = streams.admit(user.id)?;
    streams.listen();
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let after = start(&mut conn, user.id, &headers).await?;
    conn.finish().await.context("finish")?;
    let reader = Reader {
        state: state.clone(),
        user_id: user.id,
        after,
        pending: VecDeque::new(),
        admitted,
        closed: streams.closed.subscribe(),
    };
    // The first message is the position itself (an `id` without data, which sets a client's
    // last event id and dispatches nothing): a connection that drops before the first event
    // still resumes from here, not from whenever it reconnects.
    let position = Event::default().id(after.to_string());
    let events = futures_util::stream::unfold(reader, |mut reader| async move {
        let update = reader.next().await?;
        let event = Event::default()
            .id(update.id.clone())
            .event(update.event.as_str())
            .json_data(&update)
            .unwrap_or_else(|_| Event::default().comment("an update could not be written"));
        Some((Ok::<_, Infallible>(event), reader))
    });
    let events = futures_util::StreamExt::chain(
        futures_util::stream::once(async move { Ok(position) }),
        events,
    );
    Ok(Sse::new(events).keep_alive(KeepAlive::new().interval(HEARTBEAT)))
}
