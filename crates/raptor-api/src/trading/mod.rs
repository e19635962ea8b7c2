//! Paper trading: orders, rolls, closes, cancels, account reset, reads, operator quotes and the
//! trade-updates stream (`stream`).
//! `handlers` are the routes; `gate` the checks before a claim (kill switch, account permit);
//! `parse` turns a request into what the book takes; `ops` holds the book's operations (the
//! service layer, named `ops` in every resource), which run with a `desk` (clock, engine,
//! limits: no pool) on the caller's connection; `store` is the SQL; `dto` the wire types.

pub(crate) mod account_writes;
pub(crate) mod desk;
pub mod dto;
pub(crate) mod gate;
mod handlers;
mod ops;
mod parse;
mod store;
pub mod stream;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes, TRADE};
use crate::state::ApiState;

pub use account_writes::{AccountWrite, AccountWrites};
pub use desk::Desk;
pub use gate::{
    AccountWriter, NewOrderGate, OrderGates, OrderWriter, PaperTrader, Writer,
    MBT_NEW_ORDERS_DISABLED,
};
pub use ops::Expired;
pub use store::{lock_account_and_quotes_statement, QUOTE_EVENT};

/// One sweep of every account's due orders (day orders after the session close, orders on
/// options after their last close) and option positions past their last close (settled), a
/// batch of accounts per transaction: `raptor orders expire` and the schedule.
pub async fn expire_orders(state: &ApiState) -> crate::ApiResult<Expired> {
    ops::expire_orders(&state.db, state.desk()).await
}

/// Sets a quote (`raptor quotes set`, `PUT /api/admin/quotes/{symbol}`): commits it as a quote
/// event and sweeps the resting orders it can fill, one account per transaction, for up to
/// `budget` (all of them with `None`); sweepers finish the rest ([`sweep_quotes`]).
pub async fn set_quote(
    state: &ApiState,
    updated_by: Option<i32>,
    symbol: &str,
    bid: rust_decimal::Decimal,
    ask: rust_decimal::Decimal,
    budget: Option<std::time::Duration>,
) -> crate::ApiResult<dto::QuoteResponse> {
    ops::set_quote(
        &state.db,
        state.desk(),
        updated_by,
        symbol,
        (bid, ask),
        budget,
    )
    .await
}

/// Works pending quote sweeps until none is ready: what a replica's sweeper runs. The number
/// of sweeps done (a sweep that failed is put back with a back-off and not counted).
pub async fn sweep_quotes(state: &ApiState) -> crate::ApiResult<usize> {
    let mut done = 0;
    let mut worker = ops::Worker::default();
    while let Some(swept) = worker.next(&state.db, state.desk(), None).await? {
        if matches!(swept, ops::Swept::Filled(_)) {
            done += 1;
        }
    }
    Ok(done)
}

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::create_order, handlers::list_orders))
        .routes(routes!(handlers::get_order, handlers::cancel_order))
        .routes(routes!(handlers::get_order_by_client_order_id))
        .routes(routes!(handlers::roll_position))
        .routes(routes!(handlers::close_position))
        .routes(routes!(handlers::reset_account))
        .routes(routes!(handlers::get_account))
        .routes(routes!(handlers::list_positions))
        .routes(routes!(handlers::get_position))
        .routes(routes!(handlers::get_quote))
        .routes(routes!(handlers::list_activities))
        .routes(routes!(handlers::set_quote))
        .routes(routes!(stream::stream_trade_updates))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    ("get_account", &[&[E::NotFound]]),
    (
        "reset_account",
        &[&[
            E::DuplicateReset,
            E::LiveTradingUnavailable,
            E::NotFound,
            E::RateLimited,
        ]],
    ),
    ("list_orders", &[&[E::NotFound]]),
    ("create_order", &[TRADE]),
    ("get_order", &[&[E::NotFound]]),
    ("get_order_by_client_order_id", &[&[E::NotFound]]),
    (
        "cancel_order",
        &[&[
            E::LiveTradingUnavailable,
            E::NotFound,
            E::OrderNotCancelable,
            E::RateLimited,
        ]],
    ),
    ("list_positions", &[&[E::NotFound]]),
    ("get_position", &[&[E::NotFound]]),
    ("get_quote", &[&[E::QuoteUnavailable]]),
    ("list_activities", &[&[E::NotFound]]),
    ("close_position", &[TRADE, &[E::NotFound]]),
    ("roll_position", &[TRADE, &[E::NotFound]]),
    (
        "stream_trade_updates",
        &[&[E::RateLimited, E::StreamHistoryGone, E::TooManyConnections]],
    ),
];
