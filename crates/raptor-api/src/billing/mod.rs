//! Billing (Tier 2): Stripe checkout and portal sessions, subscription cancellation, the
//! subscription mirror, operator mirror-sync and the Stripe webhook.
//! (Skeleton: filled in by the billing work.)

mod stripe;

use utoipa_axum::router::OpenApiRouter;

use crate::state::ApiState;

pub use stripe::StripeClient;

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
}
