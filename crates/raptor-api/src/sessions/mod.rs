//! Sign-up and sessions (email magic links, no passwords): register, verify, login, logout,
//! and their rate limits. `dto` holds the wire types, `store` the SQL, `limits` the limiters,
//! `handlers` the routes.

pub mod dto;
mod handlers;
pub(crate) mod key;
pub(crate) mod limits;
mod store;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes};
use crate::state::ApiState;

pub use handlers::REVERIFY_GRACE;
pub use key::{SessionKey, SessionKeyError, SESSION_KEY_LEN};
pub use limits::{AuthLimiter, AuthLimits};

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::register))
        .routes(routes!(handlers::verify_link))
        .routes(routes!(handlers::login))
        .routes(routes!(handlers::logout))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    ("login", &[&[E::InvalidEmail, E::RateLimited]]),
    ("logout", &[]),
    ("register", &[&[E::InvalidEmail, E::RateLimited]]),
    ("verify_link", &[&[E::InvalidToken]]),
];
