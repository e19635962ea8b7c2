//! Sign-up and sessions (email magic links, no passwords): register, verify, login, logout.
//! (Skeleton: filled in by the onboarding work.)

mod limits;

use utoipa_axum::router::OpenApiRouter;

use crate::state::ApiState;

pub use limits::AuthLimiter;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
}
