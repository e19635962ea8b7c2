//! Billing handlers. The Stripe-calling routes are Tier 2 (fail-open, 7 d) and return
//! `Response`: every outcome goes through `Claim::finish`, which commits or rolls back. The
//! webhook and mirror-sync are idempotent by themselves (dedup table, upsert) and not
//! instrumented.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Json;
use std::time::Duration;

use raptor_idempotency::{Idempotent, Policy, Replay, Reply, Tier, Tier2};

use super::dto::{
    CancelSubscriptionRequest, CheckoutSessionResponse, CreateCheckoutSessionRequest,
    CreatePortalSessionRequest, MirrorSyncRequest, PortalSessionAnswer, SubscriptionResponse,
    WebhookAck,
};
use super::gate::{not_configured, BillingUser};
use super::ops::{self, SyncActor};
use super::stripe::ForwardKeys;
use super::webhook;
use crate::auth::{AuthUser, Principal, Role};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};
use crate::extract::ApiJson;
use crate::openapi::IdempotencyKeyHeader;
use crate::state::ApiState;

/// Start a subscription checkout
///
/// A Stripe Checkout Session for `price_id` (the user's Stripe customer is created on first use);
/// send the user to its `url`. Tier 2: retries with the same Idempotency-Key return the same
/// session. `409 subscription_active` when one is running; `422 invalid_billing_request` for a bad
/// price id or URL; `502`/`504` when Stripe fails; `503 billing_not_configured`.
#[utoipa::path(post, path = "/api/billing/checkout-sessions", tag = "billing",
    security(("bearer" = [])),
    params(IdempotencyKeyHeader),
    request_body = CreateCheckoutSessionRequest,
    responses(
        (status = 201, description = "the Stripe Checkout Session", body = CheckoutSessionResponse),
    ))]
pub(crate) async fn create_checkout_session(
    Idempotent {
        claim,
        body,
        auth: billing,
        ..
    }: Idempotent<CreateCheckoutSessionRequest, Tier2, BillingUser>,
) -> Response {
    let keys = ForwardKeys::new(billing.user_id, claim.key());
    claim
        .run(async |tx| {
            let params = body.parse()?;
            let _permit = billing.permit()?;
            let session =
                ops::create_checkout_session(tx, &billing.stripe, &keys, billing.user_id, &params)
                    .await;
            stripe_answer(session.map(|session| Reply::json(StatusCode::CREATED, &session)))
        })
        .await
}

/// A Stripe-calling operation's answer: Stripe's refusal (a 4xx) is final and keeps what the
/// request wrote before it (the customer made at Stripe for it, with its audit row), so it is
/// committed as a rejection; any other refusal keeps nothing.
fn stripe_answer(result: ApiResult<Reply>) -> ApiResult<Reply> {
    match result {
        Err(err) if !err.status().is_server_error() => Ok(Reply::rejected(&err)),
        other => other,
    }
}

/// Tier 2 without storing the answer: a portal URL signs the user into their billing for a
/// while, so it is a credential and never lands in `idempotency_keys.response_body`. A replay
/// answers `201` with `{"body_stored": false}`; the client asks again with a new key.
pub(crate) struct Tier2Unstored;

impl Policy for Tier2Unstored {
    const TIER: Tier = Tier::FailOpen;
    const TTL: Duration = Tier2::TTL;
    const REPLAY: Replay = Replay::StatusOnly;
}

/// Open the Stripe billing portal
///
/// A Stripe Billing Portal session for managing the subscription (the user's Stripe customer is
/// created on first use). Its URL signs the user in, so it is never stored: a replay answers
/// `body_stored: false`; ask again with a new key. `422 invalid_billing_request` for a bad
/// `return_url`; `502`/`504` when Stripe fails; `503 billing_not_configured`.
#[utoipa::path(post, path = "/api/billing/portal-sessions", tag = "billing",
    security(("bearer" = [])),
    params(IdempotencyKeyHeader),
    request_body = CreatePortalSessionRequest,
    responses(
        (status = 201, description = "the portal session (a replay carries `{\"body_stored\": false}` instead: the URL is a credential and is not kept)", body = PortalSessionAnswer),
    ))]
pub(crate) async fn create_portal_session(
    Idempotent {
        claim,
        body,
        auth: billing,
        ..
    }: Idempotent<CreatePortalSessionRequest, Tier2Unstored, BillingUser>,
) -> Response {
    let keys = ForwardKeys::new(billing.user_id, claim.key());
    claim
        .run(async |tx| {
            let return_url = body.parse()?;
            let _permit = billing.permit()?;
            let session = ops::create_portal_session(
                tx,
                &billing.stripe,
                &keys,
                billing.user_id,
                &return_url,
            )
            .await;
            stripe_answer(session.map(|session| Reply::json(StatusCode::CREATED, &session)))
        })
        .await
}

/// Read the caller's subscription
///
/// The caller's subscription as mirrored from Stripe (the one still running, else the newest):
/// status, price, current period end, cancel at period end. Read from the mirror; Stripe is not
/// called. `404 not_found` when there is none.
#[utoipa::path(get, path = "/api/billing/subscription", tag = "billing",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "the subscription mirror", body = SubscriptionResponse),
    ))]
pub(crate) async fn get_subscription(
    State(state): State<ApiState>,
    user: AuthUser,
) -> ApiResult<Json<SubscriptionResponse>> {
    let mut conn = raptor_db::conn(&state.db).await.context("acquire")?;
    let row = super::store::current_subscription(&mut conn, user.id).await?;
    conn.finish().await.context("finish")?;
    let row = row.ok_or(ApiError::NotFound("subscription"))?;
    Ok(Json(SubscriptionResponse::from(row)))
}

/// Cancel the subscription at period end
///
/// Asks Stripe to cancel the caller's subscription at the end of the paid period
/// (`cancel_at_period_end=true`) and answers the updated mirror. Body `{}` or none. `404 not_found`
/// without a running subscription; `502`/`504` when Stripe fails; `503 billing_not_configured`.
#[utoipa::path(post, path = "/api/billing/subscription/cancel", tag = "billing",
    security(("bearer" = [])),
    params(IdempotencyKeyHeader),
    request_body = CancelSubscriptionRequest,
    responses(
        (status = 200, description = "the subscription mirror, `cancel_at_period_end: true`", body = SubscriptionResponse),
    ))]
pub(crate) async fn cancel_subscription(
    State(state): State<ApiState>,
    Idempotent {
        claim,
        auth: billing,
        ..
    }: Idempotent<CancelSubscriptionRequest, Tier2, BillingUser>,
) -> Response {
    let keys = ForwardKeys::new(billing.user_id, claim.key());
    let now = state.clock.now();
    claim
        .run(async |tx| {
            let _permit = billing.permit()?;
            let row =
                ops::cancel_subscription(tx, &billing.stripe, &keys, billing.user_id, now).await;
            stripe_answer(
                row.map(|row| Reply::json(StatusCode::OK, &SubscriptionResponse::from(row))),
            )
        })
        .await
}

/// Upsert a subscription mirror (operators)
///
/// Writes one subscription's state, as an operator or a service read it from Stripe, into the
/// mirror, upserted by `stripe_subscription_id`. Idempotent by itself: the same body twice leaves
/// one row with the same state. `422 invalid_subscription` for an unknown status, a malformed
/// Stripe id or a `user_id` that names no user.
#[utoipa::path(post, path = "/api/billing/mirror-sync", tag = "billing",
    security(("bearer" = [])),
    request_body = MirrorSyncRequest,
    responses(
        (status = 200, description = "the mirror row", body = SubscriptionResponse),
    ))]
pub(crate) async fn sync_subscription_mirror(
    State(state): State<ApiState>,
    principal: Principal,
    ApiJson(request): ApiJson<MirrorSyncRequest>,
) -> ApiResult<Json<SubscriptionResponse>> {
    let actor = match principal {
        Principal::User {
            id,
            role: Role::Operator,
        } => SyncActor::Operator(id),
        Principal::Service { name } => SyncActor::Service(name),
        Principal::User { .. } => return Err(ApiError::Forbidden),
    };
    let subscription = request.parse(state.clock.now())?;
    let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
    let row = ops::sync_mirror(&mut tx, &subscription, &actor).await?;
    tx.commit().await.context("commit mirror sync")?;
    Ok(Json(row.into()))
}

/// Receive a Stripe event
///
/// Stripe's webhook endpoint: no bearer token, `Stripe-Signature` authenticates the raw body. Each
/// event is recorded and applied once (subscription and customer events update the mirror); a
/// redelivery answers `duplicate: true` and changes nothing. `400 invalid_signature` for a missing,
/// wrong or stale signature, `400 invalid_payload` for a body that is not an event.
#[utoipa::path(post, path = "/api/billing/webhooks/stripe", tag = "billing",
    params(("Stripe-Signature" = String, Header, description = "`t=…,v1=…`: HMAC-SHA256 of `{t}.{body}` with the endpoint's signing secret")),
    request_body(content = Object, description = "a Stripe event", content_type = "application/json"),
    responses(
        (status = 200, description = "received (applied, recorded, or a duplicate)", body = WebhookAck),
    ))]
pub(crate) async fn receive_stripe_webhook(
    State(state): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WebhookAck>> {
    let secret = state
        .config
        .billing
        .webhook_secret
        .as_ref()
        .map(secrecy::ExposeSecret::expose_secret)
        .ok_or_else(|| not_configured("STRIPE_WEBHOOK_SECRET"))?;
    let body = body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(rejection.body_text()),
        _ => ApiError::bad_request(ErrorCode::InvalidPayload, rejection.body_text()),
    })?;
    let signature = headers
        .get("stripe-signature")
        .and_then(|value| value.to_str().ok());
    webhook::verify(signature, &body, secret, state.clock.now())
        .inspect_err(|_| count_webhook("unknown", "bad_signature"))?;
    let event = webhook::parse(&body).inspect_err(|_| count_webhook("unknown", "rejected"))?;
    let applied = async {
        let mut tx = raptor_db::begin(&state.db).await.context("begin")?;
        let ack = ops::apply_event(&mut tx, &event).await?;
        tx.commit().await.context("commit webhook")?;
        Ok::<_, ApiError>(ack)
    }
    .await;
    let outcome = match &applied {
        Ok(ack) if ack.duplicate => "duplicate",
        Ok(_) => "processed",
        Err(_) => "failed",
    };
    count_webhook(event.metric_type(), outcome);
    applied.map(Json)
}

/// `raptor_stripe_webhook_events_total{type, outcome}`: `bad_signature` (a missing, wrong or
/// stale `Stripe-Signature`; `type="unknown"`), `rejected` (signed, but not an event), `processed` (recorded, and applied when it concerns us), `duplicate` (a
/// redelivery) or `failed` (the database; Stripe delivers it again).
fn count_webhook(kind: &'static str, outcome: &'static str) {
    metrics::counter!("raptor_stripe_webhook_events_total", "type" => kind, "outcome" => outcome)
        .increment(1);
}
