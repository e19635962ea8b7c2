//! Paper trading: orders, rolls, closes, cancels, account reset, reads and operator quotes.
//! `book` holds the operations, `store` the SQL, `dto` the wire types, `gate` the pre-claim
//! gates, `handlers` the routes.

mod account_writes;
mod book;
pub mod dto;
mod gate;
mod handlers;
mod store;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes, TRADE};
use crate::state::ApiState;

pub use account_writes::{AccountWrite, AccountWrites};
pub use book::{expire_orders, set_quote};
pub use gate::{AccountWriter, NewOrderGate, OrderGates, OrderWriter, PaperTrader, Writer};

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::create_order, handlers::list_orders))
        .routes(routes!(handlers::get_order, handlers::cancel_order))
        .routes(routes!(handlers::roll_position))
        .routes(routes!(handlers::close_position))
        .routes(routes!(handlers::reset_account))
        .routes(routes!(handlers::get_account))
        .routes(routes!(handlers::list_positions))
        .routes(routes!(handlers::set_quote))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    ("get_account", &[&[E::NotFound]]),
    (
        "reset_account",
        &[&[E::LiveTradingUnavailable, E::NotFound, E::RateLimited]],
    ),
    ("list_orders", &[&[E::NotFound]]),
    ("create_order", &[TRADE]),
    ("get_order", &[&[E::NotFound]]),
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
    ("close_position", &[TRADE, &[E::NotFound]]),
    ("roll_position", &[TRADE, &[E::NotFound]]),
];
