//! Users and their data: creation (CLI and sign-up), the profile, GDPR export and erasure.
//! `dto` holds the wire types and the [`dto::Email`] value, `store` the SQL, `handlers` the
//! routes.

pub mod dto;
mod export;
mod handlers;
pub mod store;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ApiState;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::get_profile, handlers::update_profile))
        .routes(routes!(handlers::export_account))
        .routes(routes!(handlers::erase_account))
}
