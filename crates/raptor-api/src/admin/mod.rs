//! Operator tooling: run-time flags. (Quotes live with trading.)

mod handlers;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes};
use crate::state::ApiState;

pub use handlers::{FlagResponse, SetFlagRequest};

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(handlers::set_flag))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    ("set_flag", &[&[E::NotFound]]),
    ("set_quote", &[&[E::InvalidQuote, E::InvalidSymbol]]),
];
