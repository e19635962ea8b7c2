//! Trading handlers. The writes under an Idempotency-Key run their book operation inside
//! `Claim::run` with a [`Desk`] (no pool): the claim's transaction is the only connection
//! they have.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use raptor_idempotency::{Claim, Idempotent, Reply, Tier1};
use uuid::Uuid;

use super::account_writes::AccountWrite;
use super::dto::{
    AccountResponse, ClosePositionRequest, CreateOrderRequest, ListOrdersQuery, OrderResponse,
    PositionResponse, QuoteResponse, ResetAccountRequest, RollRequest, SetQuoteRequest, LIST_LIMIT,
};
use super::gate::{AccountWriter, OrderWriter, PaperTrader};
use super::ops::{self, Desk, Intent, Placed};
use super::store;
use crate::auth::{AuthUser, Operator};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::extract::{ApiJson, ApiPath, ApiQuery};
use crate::openapi::IdempotencyKeyHeader;
use crate::state::ApiState;

fn created(order: OrderResponse) -> Reply {
    let location = format!("/api/trading/orders/{}", order.id);
    Reply::json(StatusCode::CREATED, &order).with_location(location)
}

/// The three order-placing routes: parse the request into an intent (a malformed one keeps
/// nothing), place it on the claim's transaction, and answer `201` with `Location`, or the
/// engine's refusal (committed with its audit row, and replayed).
async fn place(
    desk: &Desk,
    claim: Claim,
    trader: PaperTrader,
    intent: ApiResult<Intent>,
) -> Response {
    let (key, lineage) = (claim.key(), claim.lineage());
    claim
        .run(async |tx| {
            let placed = ops::place(tx, desk, trader.user_id, intent?, key, lineage).await?;
            Ok::<_, ApiError>(match placed {
                Placed::Order(order) => created(*order),
                Placed::Rejected(rejection) => Reply::rejected(&rejection),
            })
        })
        .await
}

/// Place an order: simple (equity or option) or multi-leg (`order_class: "mleg"`, 2-4 legs, all
/// or none). Marketable orders fill at once at the quote; other limits rest as `new`.
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
    place(&desk, claim, auth.trader(), intent).await
}

/// Roll a short call: buy-to-close `{symbol}` and sell-to-open `to_symbol` as one all-or-none
/// two-leg order.
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
    place(&desk, claim, auth.trader(), intent).await
}

/// Close a position at market: all of it (`{}`) or `qty`.
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
    place(&desk, claim, auth.trader(), intent).await
}

/// Reset the paper account: starting cash, no positions, open orders canceled.
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
    claim
        .run(async |tx| {
            let account = ops::reset(tx, &desk, auth.trader().user_id).await?;
            Ok::<_, ApiError>(Reply::json(StatusCode::OK, &account))
        })
        .await
}

/// Cancel an open order. Naturally idempotent: a canceled order is returned unchanged.
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
    let mut tx = state.db.begin().await.context("begin")?;
    let order = ops::cancel(&mut tx, state.desk(), trader.user_id, id).await?;
    tx.commit().await.context("commit cancel")?;
    Ok(Json(order))
}

/// The paper account: cash, buying power, realized P&L, mode.
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

/// The account's orders, newest first.
#[utoipa::path(get, path = "/api/trading/orders", tag = "trading",
    security(("bearer" = [])),
    params(ListOrdersQuery),
    responses(
        (status = 200, description = "orders", body = [OrderResponse]),
    ))]
pub(crate) async fn list_orders(
    State(state): State<ApiState>,
    user: AuthUser,
    ApiQuery(query): ApiQuery<ListOrdersQuery>,
) -> ApiResult<Json<Vec<OrderResponse>>> {
    ops::expire_for_read(&state.db, state.desk(), user.id).await?;
    let statuses = query.status.unwrap_or_default().statuses();
    let limit = query.limit.unwrap_or(100);
    if !LIST_LIMIT.contains(&limit) {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidQuery,
            format!("limit must be between 1 and 500, not {limit}"),
        ));
    }
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let orders = store::list_orders(&mut conn, user.id, statuses, limit).await?;
    conn.finish().await.context("finish")?;
    let orders = orders
        .into_iter()
        .map(OrderResponse::try_from)
        .collect::<ApiResult<_>>()?;
    Ok(Json(orders))
}

/// One order.
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

/// Open positions (negative qty when short).
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

/// Set a symbol's quote (operators). It commits as a numbered quote event; the resting orders
/// it makes marketable then fill in short per-account transactions, audited with the event:
/// those this request reaches within a quarter of the request timeout are listed, the rest
/// (`pending_accounts`) are swept right after by the servers.
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
