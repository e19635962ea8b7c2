//! Operator tooling: run-time flags, and what support staff do for a user (`support`: the
//! command line's token and session revocation, a user's summary, the audit trail). (Quotes live
//! with trading.)

mod handlers;
pub mod support;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes};
use crate::state::ApiState;

pub use handlers::{AuditListQuery, AuditListResponse, FlagResponse, SetFlagRequest};

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::set_flag))
        .routes(routes!(handlers::list_audit))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    ("list_audit", &[&[E::InvalidQuery]]),
    ("set_flag", &[&[E::NotFound]]),
    ("set_quote", &[&[E::InvalidQuote, E::InvalidSymbol]]),
];
