//! The waitlist: `POST /api/waitlist/signup`. Naturally idempotent (one row per address,
//! case-insensitive), so never instrumented. `dto` holds the wire types, `store` the SQL,
//! `handlers` the route.

pub mod dto;
mod handlers;
mod store;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes};
use crate::state::ApiState;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(handlers::join_waitlist))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[(
    "join_waitlist",
    &[&[E::DatabaseBusy, E::DatabaseUnavailable, E::InvalidEmail]],
)];
