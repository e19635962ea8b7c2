//! Operator tooling: run-time flags. (Quotes live with trading.)

mod handlers;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::state::ApiState;

pub use handlers::{FlagResponse, SetFlagRequest};

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new().routes(routes!(handlers::set_flag))
}
