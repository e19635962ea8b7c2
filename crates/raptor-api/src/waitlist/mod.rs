//! The waitlist: `POST /api/waitlist/signup`. (Skeleton.)

use utoipa_axum::router::OpenApiRouter;

use crate::state::ApiState;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
}
