//! Trading handlers. The writes under an Idempotency-Key run their book operation inside
//! `Claim::run` with a [`Desk`] (no pool): the claim's transaction is the only connection
//! they have.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use raptor_idempotency::{Answer, Claim, Idempotent, Reply, Tier1};
use uuid::Uuid;

use super::account_writes::AccountWrite;
use super::dto::{
    list_limit, paginate, AccountResponse, ActivityListResponse, ActivityResponse,
    ClosePositionRequest, CreateOrderRequest, Cursor, ListActivitiesQuery, ListOrdersQuery,
    MarketQuoteResponse, OrderListResponse, OrderResponse, PositionResponse, QuoteResponse,
    ResetAccountRequest, RollRequest, SetQuoteRequest,
};
use super::gate::{AccountWriter, OrderWriter, PaperTrader};
use super::ops::{self, Desk, Intent, Placed};
use super::store;
use crate::auth::{AuthUser, Operator, Principal};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::openapi::IdempotencyKeyHeader;
use crate::state::ApiState;

/// The three order-placing routes: parse the request into an intent (a malformed one keeps
/// nothing), place it on the claim's transaction, and answer `201` with `Location` (stored on
/// the key by the order's own statement), or the engine's refusal (committed with its audit
/// row, and replayed). `purpose` (`order`, `roll`,
/// `close`) labels the metrics ([`count_placement`]).
async fn place(
    desk: &Desk,
    claim: Claim,
    trader: PaperTrader,
    purpose: &'static str,
    intent: ApiResult<Intent>,
) -> Response {
    let (key, lineage) = (claim.key(), claim.lineage());
    let mut placement = None;
    let response = claim
        .run_completing(async |tx, completer| {
            let user_id = trader.user_id;
            let placed =
                async { ops::place(tx, desk, user_id, intent?, &completer, key, lineage).await }
                    .await
                    .inspect_err(|err| placement = Some(Placement::Refused(err.code())))?;
            Ok::<_, ApiError>(match placed {
                Placed::Order { filled, answer } => {
                    placement = Some(Placement::Placed { filled });
                    Answer::Completed(answer)
                }
                Placed::Rejected(rejection) => {
                    placement = Some(Placement::Refused(rejection.code()));
                    Answer::Reply(Reply::rejected(&rejection))
                }
            })
        })
        .await;
    if let Some(placement) = placement {
        // A 5xx was not kept (the transaction rolled back, or its commit failed).
        if !response.status().is_server_error() {
            count_placement(purpose, placement);
        }
    }
    response
}

/// What one placement did, for its metrics.
#[derive(Debug, Clone, Copy)]
enum Placement {
    /// Accepted: filled at once, or resting.
    Placed { filled: bool },
    /// Refused by the engine (committed with its audit row) or before it (kept nothing).
    Refused(ErrorCode),
}

/// `raptor_orders_placed_total{purpose, status}` (`filled` or `new`),
/// `raptor_order_fills_total{trigger="submit"}` for an order filled as it was placed, and
/// `raptor_order_rejections_total{purpose, code}` for a refusal that answered a 4xx (an
/// infrastructure failure is not a rejection). A replay counts nothing: it did not place.
fn count_placement(purpose: &'static str, placement: Placement) {
    match placement {
        Placement::Placed { filled } => {
            let status = if filled { "filled" } else { "new" };
            metrics::counter!("raptor_orders_placed_total", "purpose" => purpose, "status" => status)
                .increment(1);
            if filled {
                metrics::counter!("raptor_order_fills_total", "trigger" => "submit").increment(1);
            }
        }
        Placement::Refused(code) => {
            metrics::counter!(
                "raptor_order_rejections_total",
                "purpose" => purpose,
                "code" => code.as_str(),
            )
            .increment(1);
        }
    }
}

/// Place an order
///
/// Simple (equity or option) or multi-leg (`order_class: mleg`, 2-4 option legs, all or none).
/// Marketable orders fill at once at the quote; other limits rest as `new`. Tier 1 (fail-closed):
/// send an `Idempotency-Key`; a retry with it replays the first answer. `403
/// insufficient_buying_power`, `insufficient_qty` or `uncovered_short_option`; `422 invalid_order`,
/// `invalid_symbol`, `quote_unavailable`, `contract_expired` or `duplicate_client_order_id`.
#[utoipa::path(post, path = "/api/trading/orders", tag = "trading",
    security(("bearer" = [])),
    params(IdempotencyKeyHeader),
    request_body = CreateOrderRequest,
    responses(
        (status = 201, description = "accepted (filled or resting); Location names it", body = OrderResponse),
    ))]
pub(crate) async fn create_order(
    State(desk): State<Desk>,
    Idempotent {
        claim, body, auth, ..
    }: Idempotent<CreateOrderRequest, Tier1, OrderWriter>,
) -> Response {
    let intent = body.parse().map(Intent::Order);
    place(&desk, claim, auth.trader(), "order", intent).await
}

/// Roll a short call to another contract
///
/// Buys to close the short call `{symbol}` and sells to open `to_symbol` as one all-or-none two-leg
/// order, at market or at a net `limit_price` (negative for a credit). Tier 1 (fail-closed): send
/// an `Idempotency-Key`; a retry with it replays the first answer. `404 not_found` without that
/// short position; `403 uncovered_short_option` when the new call would not be covered; `422
/// invalid_order`, `quote_unavailable` or `contract_expired`.
#[utoipa::path(post, path = "/api/trading/positions/{symbol}/roll", tag = "trading",
    security(("bearer" = [])),
    params(("symbol" = String, Path, description = "The short call to close"), IdempotencyKeyHeader),
    request_body = RollRequest,
    responses(
        (status = 201, description = "the roll order", body = OrderResponse),
    ))]
pub(crate) async fn roll_position(
    State(desk): State<Desk>,
    ApiPath(symbol): ApiPath<String>,
    Idempotent {
        claim, body, auth, ..
    }: Idempotent<RollRequest, Tier1, OrderWriter>,
) -> Response {
    let intent = body.parse(&symbol).map(Intent::Roll);
    place(&desk, claim, auth.trader(), "roll", intent).await
}

/// Close a position at market
///
/// Closes all of the position (`{}` or no body) or `qty` of it with a market order, buying back a
/// short or selling a long. Tier 1 (fail-closed): send an `Idempotency-Key`; a retry with it
/// replays the first answer. `404 not_found` without a position in `{symbol}`; `422 invalid_order`
/// for a bad `qty`; `422 quote_unavailable` without a usable quote.
#[utoipa::path(post, path = "/api/trading/positions/{symbol}/close", tag = "trading",
    security(("bearer" = [])),
    params(("symbol" = String, Path, description = "The position's symbol"), IdempotencyKeyHeader),
    request_body = ClosePositionRequest,
    responses(
        (status = 201, description = "the closing order", body = OrderResponse),
    ))]
pub(crate) async fn close_position(
    State(desk): State<Desk>,
    ApiPath(symbol): ApiPath<String>,
    Idempotent {
        claim, body, auth, ..
    }: Idempotent<ClosePositionRequest, Tier1, OrderWriter>,
) -> Response {
    let intent = body.parse(&symbol).map(Intent::Close);
    place(&desk, claim, auth.trader(), "close", intent).await
}

/// Reset the paper account
///
/// Starting cash, no positions, every open order canceled, audited; the feed gets a `reset` entry.
/// Tier 1 (fail-closed): send an `Idempotency-Key`, and a retry with it replays the first answer.
/// Body `{}` or none. `403 live_trading_unavailable` on a live account.
#[utoipa::path(post, path = "/api/trading/account/reset", tag = "trading",
    security(("bearer" = [])),
    params(IdempotencyKeyHeader),
    request_body = ResetAccountRequest,
    responses(
        (status = 200, description = "the reset account", body = AccountResponse),
    ))]
pub(crate) async fn reset_account(
    State(desk): State<Desk>,
    Idempotent { claim, auth, .. }: Idempotent<ResetAccountRequest, Tier1, AccountWriter>,
) -> Response {
    let user_id = auth.trader().user_id;
    let reset_id = claim.key().map(|key| ops::reset_id(user_id, key));
    claim
        .run(async |tx| {
            let account = ops::reset(tx, &desk, user_id, reset_id).await?;
            Ok::<_, ApiError>(Reply::json(StatusCode::OK, &account))
        })
        .await
}

/// Cancel an open order
///
/// Cancels a resting order and releases its reservation. Naturally idempotent: a canceled order is
/// answered unchanged, so no Idempotency-Key is needed. `422 order_not_cancelable` for a filled or
/// expired order; `404 not_found`; `400 invalid_path` when `id` is not a UUID.
#[utoipa::path(delete, path = "/api/trading/orders/{id}", tag = "trading",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Order id")),
    responses(
        (status = 200, description = "the canceled order", body = OrderResponse),
    ))]
pub(crate) async fn cancel_order(
    State(state): State<ApiState>,
    trader: PaperTrader,
    ApiPath(id): ApiPath<Uuid>,
    _write: AccountWrite,
) -> ApiResult<Json<OrderResponse>> {
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    let order = ops::cancel(&mut tx, state.desk(), trader.user_id, id).await?;
    tx.commit().await.context("commit cancel")?;
    Ok(Json(order))
}

/// Read the paper account
///
/// Cash, buying power, reserved cash, realized and unrealized P&L, market value and equity (marked
/// at the quotes' mid; positions without a quote at their entry price, flagged), and short options
/// left uncovered. Expired orders and options are settled first.
#[utoipa::path(get, path = "/api/trading/account", tag = "trading",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the account", body = AccountResponse),
    ))]
pub(crate) async fn get_account(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<AccountResponse>> {
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let account = ops::account(&mut conn, user.id).await?;
    conn.finish().await.context("finish")?;
    Ok(Json(account))
}

/// List the account's orders
///
/// The account's orders, newest first, a page at a time: pass `next_cursor` back as `cursor` for
/// the next page (keyset on creation time and id, so orders placed meanwhile neither repeat nor
/// hide older ones). Filters: `status`, `symbol`, `after`, `until`. `400 invalid_query` for a bad
/// parameter or cursor.
#[utoipa::path(get, path = "/api/trading/orders", tag = "trading",
    security(("bearer" = [])),
    params(ListOrdersQuery),
    responses(
        (status = 200, description = "a page of orders", body = OrderListResponse),
    ))]
pub(crate) async fn list_orders(
    State(state): State<ApiState>,
    user: AuthUser,
    ApiQuery(query): ApiQuery<ListOrdersQuery>,
) -> ApiResult<Json<OrderListResponse>> {
    let limit = list_limit(query.limit)?;
    // Postgres text cannot hold NUL: refused here rather than failing the statement.
    if query
        .symbol
        .as_deref()
        .is_some_and(|s| s.is_empty() || s.len() > 64 || s.contains('\0'))
    {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidQuery,
            "symbol must be 1 to 64 characters",
        ));
    }
    let before = query
        .cursor
        .as_deref()
        .map(|text| {
            let cursor = Cursor::decode(text)?;
            let id = Uuid::parse_str(&cursor.id).map_err(|_| {
                ApiError::bad_request(ErrorCode::InvalidQuery, "cursor is not an orders cursor")
            })?;
            Ok::<_, ApiError>((cursor.at, id))
        })
        .transpose()?;
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let filter = store::OrderFilter {
        statuses: query.status.unwrap_or_default().statuses(),
        symbol: query.symbol.as_deref(),
        after: query.after,
        until: query.until,
        before,
    };
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let rows = store::list_orders(&mut conn, user.id, &filter, limit + 1).await?;
    conn.finish().await.context("finish")?;
    let (rows, has_more, next_cursor) = paginate(rows, limit, |order| Cursor {
        at: order.row.created_at,
        id: order.row.id.to_string(),
    });
    let data = rows
        .into_iter()
        .map(OrderResponse::try_from)
        .collect::<ApiResult<_>>()?;
    Ok(Json(OrderListResponse {
        data,
        has_more,
        next_cursor,
    }))
}

/// Read one order
///
/// One of the account's orders, with its legs; an order past its expiry reads as `expired`. `404
/// not_found` for an order of another account or none; `400 invalid_path` when `id` is not a UUID.
#[utoipa::path(get, path = "/api/trading/orders/{id}", tag = "trading",
    security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Order id")),
    responses(
        (status = 200, description = "the order", body = OrderResponse),
    ))]
pub(crate) async fn get_order(
    State(state): State<ApiState>,
    user: AuthUser,
    ApiPath(id): ApiPath<Uuid>,
) -> ApiResult<Json<OrderResponse>> {
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let order = store::find_order(&mut conn, user.id, id, false).await?;
    conn.finish().await.context("finish")?;
    let order = order.ok_or(ApiError::NotFound("order"))?;
    Ok(Json(OrderResponse::try_from(order)?))
}

/// Find an order by its client order id
///
/// The order with this `client_order_id` (the one sent, or the one derived from the
/// Idempotency-Key): how a client that lost an answer finds out what became of its order. `404
/// not_found` when the account has no such order.
#[utoipa::path(get, path = "/api/trading/orders/by-client-order-id/{client_order_id}",
    tag = "trading",
    security(("bearer" = [])),
    params(("client_order_id" = String, Path, description = "The order's client_order_id",
        min_length = 1, max_length = 128)),
    responses(
        (status = 200, description = "the order", body = OrderResponse),
    ))]
pub(crate) async fn get_order_by_client_order_id(
    State(state): State<ApiState>,
    user: AuthUser,
    ApiPath(client_order_id): ApiPath<String>,
) -> ApiResult<Json<OrderResponse>> {
    if client_order_id.contains('\0') {
        return Err(ApiError::NotFound("order"));
    }
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let order = store::find_order_by_client_order_id(&mut conn, user.id, &client_order_id).await?;
    conn.finish().await.context("finish")?;
    let order = order.ok_or(ApiError::NotFound("order"))?;
    Ok(Json(OrderResponse::try_from(order)?))
}

/// List open positions
///
/// The account's open positions with quantity (negative when short), average entry price and
/// realized P&L. Expired options are settled first.
#[utoipa::path(get, path = "/api/trading/positions", tag = "trading",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "positions", body = [PositionResponse]),
    ))]
pub(crate) async fn list_positions(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<Vec<PositionResponse>>> {
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let rows = store::list_positions(&mut conn, user.id).await?;
    conn.finish().await.context("finish")?;
    Ok(Json(rows.into_iter().map(PositionResponse::from).collect()))
}

/// Read one position
///
/// The account's open position in `symbol`. `404 not_found` when the account holds none in it (a
/// flat or never-held symbol).
#[utoipa::path(get, path = "/api/trading/positions/{symbol}", tag = "trading",
    security(("bearer" = [])),
    params(("symbol" = String, Path, description = "The position's symbol", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "the position", body = PositionResponse),
    ))]
pub(crate) async fn get_position(
    State(state): State<ApiState>,
    user: AuthUser,
    ApiPath(symbol): ApiPath<String>,
) -> ApiResult<Json<PositionResponse>> {
    if symbol.contains('\0') {
        return Err(ApiError::NotFound("position"));
    }
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let row = store::find_position(&mut conn, user.id, &symbol).await?;
    conn.finish().await.context("finish")?;
    let row = row.ok_or(ApiError::NotFound("position"))?;
    Ok(Json(PositionResponse::from(row)))
}

/// Read a symbol's quote
///
/// The current bid, ask and update time of `symbol`, for any signed-in caller (an app's display,
/// not an order's price guarantee). `404 quote_unavailable` when no operator has quoted it.
#[utoipa::path(get, path = "/api/trading/quotes/{symbol}", tag = "trading",
    security(("bearer" = [])),
    params(("symbol" = String, Path, description = "Equity or OCC option symbol", min_length = 1, max_length = 64)),
    responses(
        (status = 200, description = "the quote", body = MarketQuoteResponse),
    ))]
pub(crate) async fn get_quote(
    State(state): State<ApiState>,
    _principal: Principal,
    ApiPath(symbol): ApiPath<String>,
) -> ApiResult<Json<MarketQuoteResponse>> {
    let row = if symbol.contains('\0') {
        None
    } else {
        let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
        let row = store::find_quote(&mut conn, &symbol).await?;
        conn.finish().await.context("finish")?;
        row
    };
    let row = row.ok_or_else(|| ApiError::Absent {
        code: ErrorCode::QuoteUnavailable,
        message: format!("there is no quote for {symbol}"),
    })?;
    Ok(Json(MarketQuoteResponse::from(row)))
}

/// List the account's activities
///
/// The account's feed, newest first, paged like the orders (`limit`, `cursor`): fills, cancels,
/// order expiries, option expiries and settlements, and resets, each with its order, symbol,
/// quantity, price, cash effect and time. New types may appear: skip unknown ones. `400
/// invalid_query` for a bad `limit` or `cursor`.
#[utoipa::path(get, path = "/api/trading/activities", tag = "trading",
    security(("bearer" = [])),
    params(ListActivitiesQuery),
    responses(
        (status = 200, description = "a page of activities", body = ActivityListResponse),
    ))]
pub(crate) async fn list_activities(
    State(state): State<ApiState>,
    user: AuthUser,
    ApiQuery(query): ApiQuery<ListActivitiesQuery>,
) -> ApiResult<Json<ActivityListResponse>> {
    let limit = list_limit(query.limit)?;
    let cursor = query
        .cursor
        .as_deref()
        .map(|text| {
            let cursor = Cursor::decode(text)?;
            if !super::dto::is_activity_id(&cursor.id) {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidQuery,
                    "cursor is not an activities cursor",
                ));
            }
            Ok(cursor)
        })
        .transpose()?;
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let before = cursor.as_ref().map(|c| (c.at, c.id.as_str()));
    let rows = store::list_activities(&mut conn, user.id, before, limit + 1).await?;
    conn.finish().await.context("finish")?;
    let (rows, has_more, next_cursor) = paginate(rows, limit, |row| Cursor {
        at: row.occurred_at,
        id: row.id.clone(),
    });
    let data = rows
        .into_iter()
        .map(ActivityResponse::try_from)
        .collect::<ApiResult<_>>()?;
    Ok(Json(ActivityListResponse {
        data,
        has_more,
        next_cursor,
    }))
}

/// Set a symbol's quote (operators)
///
/// Commits the quote as a numbered quote event; the resting orders it makes marketable then fill in
/// short per-account transactions, audited with the event. Accounts reached within a quarter of the
/// request timeout are done; the rest (`pending_accounts`) are swept right after. `422
/// invalid_quote` when bid > ask or a price is negative or out of range, `422 invalid_symbol`.
#[utoipa::path(put, path = "/api/admin/quotes/{symbol}", tag = "admin",
    security(("bearer" = [])),
    params(("symbol" = String, Path, description = "Equity or OCC option symbol")),
    request_body = SetQuoteRequest,
    responses(
        (status = 200, description = "stored; lists the orders this request's sweep filled", body = QuoteResponse),
    ))]
pub(crate) async fn set_quote(
    State(state): State<ApiState>,
    operator: Operator,
    ApiPath(symbol): ApiPath<String>,
    ApiJson(request): ApiJson<SetQuoteRequest>,
) -> ApiResult<Json<QuoteResponse>> {
    // The quote is committed before the sweep: the answer must come before the request
    // timeout could turn it into a 503 for a quote that is set.
    let budget = state.config.request_timeout / 4;
    ops::set_quote(
        &state.db,
        state.desk(),
        Some(operator.id),
        &symbol,
        (request.bid, request.ask),
        Some(budget),
    )
    .await
    .map(Json)
}
