//! Billing (Tier 2): Stripe checkout and portal sessions, subscription cancellation, the
//! subscription mirror, operator mirror-sync and the Stripe webhook. `stripe` is the client,
//! `ops` the operations, `store` the SQL, `dto` the wire types, `gate` the pre-claim gate,
//! `webhook` signature verification and events, `handlers` the routes.

pub mod dto;
pub(crate) mod gate;
mod handlers;
mod ops;
pub(crate) mod store;
pub(crate) mod stripe;
pub use stripe::STRIPE_API_VERSION;
mod webhook;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::codes::{ErrorCode as E, RouteCodes, STRIPE};
use crate::state::ApiState;

pub use gate::{BillingDeps, BillingUser};
pub use stripe::{BillingConfig, StripeClient};
pub use webhook::{signature_header, TOLERANCE_SECS};

pub(crate) fn routes() -> OpenApiRouter<ApiState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::create_checkout_session))
        .routes(routes!(handlers::create_portal_session))
        .routes(routes!(handlers::cancel_subscription))
        .routes(routes!(handlers::get_subscription))
        .routes(routes!(handlers::sync_subscription_mirror))
        .routes(routes!(handlers::receive_stripe_webhook))
}

/// Each operation's own error codes (`crate::codes`), by operationId.
pub(crate) const ROUTE_CODES: &[RouteCodes] = &[
    (
        "create_checkout_session",
        &[STRIPE, &[E::InvalidBillingRequest, E::SubscriptionActive]],
    ),
    ("sync_subscription_mirror", &[&[E::InvalidSubscription]]),
    (
        "create_portal_session",
        &[STRIPE, &[E::InvalidBillingRequest]],
    ),
    ("cancel_subscription", &[STRIPE, &[E::NotFound]]),
    ("get_subscription", &[&[E::NotFound]]),
    // Called by Stripe: no bearer token, its own payload and signature codes.
    (
        "receive_stripe_webhook",
        &[&[
            E::BillingNotConfigured,
            E::DatabaseBusy,
            E::DatabaseUnavailable,
            E::InvalidPayload,
            E::InvalidSignature,
            E::PayloadTooLarge,
        ]],
    ),
];
