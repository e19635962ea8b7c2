//! Users and their data: creation (CLI), GDPR export and erasure.

mod handlers;
pub mod store;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ApiState;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::export_account))
        .routes(routes!(handlers::erase_account))
}
