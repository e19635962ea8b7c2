//! Users and their data: creation (CLI and sign-up), the profile, GDPR export and erasure.
//! `dto` holds the wire types and the [`dto::Email`] value, `store` the SQL, `handlers` the
//! routes.

pub mod dto;
mod export;
pub(crate) mod export_limits;
mod handlers;
pub mod store;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes};
use crate::state::ApiState;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::get_profile, handlers::update_profile))
        .routes(routes!(handlers::export_account))
        .routes(routes!(handlers::erase_account))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    ("erase_account", &[&[E::SubscriptionActive]]),
    ("export_account", &[&[E::RateLimited]]),
    ("get_profile", &[&[E::NotFound]]),
    (
        "update_profile",
        &[&[
            E::InvalidDisplayName,
            E::InvalidMarketingOptIn,
            E::InvalidTimeZone,
            E::NotFound,
        ]],
    ),
];
