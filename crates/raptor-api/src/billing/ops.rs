//! The billing operations: Stripe calls and mirror writes, on the caller's transaction (the
//! claim's, for the Tier 2 routes). A Stripe failure is returned before anything is committed:
//! a 5xx-class error rolls the whole transaction back (docs/idempotency.md).

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use sqlx::PgConnection;

use super::dto::{CheckoutParams, CheckoutSessionResponse, PortalSessionResponse, WebhookAck};
use super::store::{self, EventRecord, SubscriptionRow, SubscriptionState};
use super::stripe::{CheckoutRequest, ForwardKeys, Operation, StripeClient, Subscription};
use super::webhook::{Change, ParsedEvent};
use crate::audit::{self, AuditAction, AuditEvent};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult, ResultExt};

/// The user's Stripe customer: ours if recorded, else created at Stripe and recorded in this
/// transaction (with its audit row).
async fn ensure_customer(
    conn: &mut PgConnection,
    stripe: &StripeClient,
    user_id: i32,
) -> ApiResult<String> {
    store::lock_user_billing(conn, user_id).await?;
    if let Some(customer) = store::find_customer(conn, user_id).await? {
        return Ok(customer);
    }
    let email = store::user_email(conn, user_id).await?;
    let customer = stripe
        .create_customer(&ForwardKeys::customer_key(user_id, &email), &email, user_id)
        .await?;
    store::insert_customer(conn, user_id, &customer.id).await?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::BillingCustomerCreated,
            json!({ "stripe_customer_id": customer.id }),
        ),
    )
    .await
    .context("audit customer")?;
    Ok(customer.id)
}

/// Creates a Checkout Session (subscription mode) for the user, creating their customer first
/// when they have none.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn create_checkout_session(
    conn: &mut PgConnection,
    stripe: &StripeClient,
    keys: &ForwardKeys,
    user_id: i32,
    params: &CheckoutParams,
) -> ApiResult<CheckoutSessionResponse> {
    if let Some(open) = store::open_subscription_id(conn, user_id).await? {
        // A second checkout would start a second, parallel subscription.
        return Err(ApiError::Conflict {
            code: ErrorCode::SubscriptionActive,
            message: format!(
                "subscription {open} is still active; manage it in the billing portal instead"
            ),
        });
    }
    let customer = ensure_customer(conn, stripe, user_id).await?;
    let request = CheckoutRequest {
        customer: &customer,
        price_id: &params.price_id,
        success_url: &params.success_url,
        cancel_url: &params.cancel_url,
        user_id,
    };
    let session = stripe
        .create_checkout_session(&keys.key(Operation::CreateCheckoutSession), &request)
        .await?;
    let url = session.url.ok_or_else(|| ApiError::Upstream {
        status: axum::http::StatusCode::BAD_GATEWAY,
        code: ErrorCode::StripeUnavailable,
        message: "Stripe returned a checkout session without a URL".to_owned(),
        outcome_unknown: false,
    })?;
    // No URLs or email in the audit row: the ids say what happened.
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::BillingCheckoutSessionCreated,
            json!({ "checkout_session_id": session.id, "price_id": params.price_id }),
        ),
    )
    .await
    .context("audit checkout session")?;
    Ok(CheckoutSessionResponse {
        id: session.id,
        url,
    })
}

/// Creates a Billing Portal session for the user, creating their customer first when they have
/// none.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn create_portal_session(
    conn: &mut PgConnection,
    stripe: &StripeClient,
    keys: &ForwardKeys,
    user_id: i32,
    return_url: &str,
) -> ApiResult<PortalSessionResponse> {
    let customer = ensure_customer(conn, stripe, user_id).await?;
    let session = stripe
        .create_portal_session(
            &keys.key(Operation::CreatePortalSession),
            &customer,
            return_url,
        )
        .await?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::BillingPortalSessionCreated,
            json!({ "stripe_customer_id": customer }),
        ),
    )
    .await
    .context("audit portal session")?;
    Ok(PortalSessionResponse { url: session.url })
}

fn timestamp(seconds: Option<i64>) -> Option<DateTime<Utc>> {
    seconds.and_then(|s| Utc.timestamp_opt(s, 0).single())
}

fn state_of(
    subscription: &Subscription,
    user_id: Option<i32>,
    source_at: DateTime<Utc>,
) -> SubscriptionState {
    SubscriptionState {
        stripe_subscription_id: subscription.id.clone(),
        stripe_customer_id: subscription.customer.clone(),
        user_id,
        status: subscription.status.clone(),
        price_id: subscription.price_id().map(str::to_owned),
        current_period_end: timestamp(subscription.period_end()),
        cancel_at_period_end: subscription.cancel_at_period_end,
        canceled_at: timestamp(subscription.canceled_at),
        source_at,
    }
}

/// Cancels the user's subscription at the end of its period and mirrors Stripe's answer.
/// `404` when the user has no subscription that can be canceled.
#[tracing::instrument(skip_all, fields(user.id = user_id))]
pub(crate) async fn cancel_subscription(
    conn: &mut PgConnection,
    stripe: &StripeClient,
    keys: &ForwardKeys,
    user_id: i32,
    now: DateTime<Utc>,
) -> ApiResult<SubscriptionRow> {
    let current = store::lock_open_subscription(conn, user_id)
        .await?
        .ok_or(ApiError::NotFound("subscription"))?;
    let answer = stripe
        .cancel_subscription_at_period_end(
            &keys.key(Operation::CancelSubscription),
            &current.stripe_subscription_id,
        )
        .await?;
    if answer.id != current.stripe_subscription_id {
        return Err(ApiError::Upstream {
            status: axum::http::StatusCode::BAD_GATEWAY,
            code: ErrorCode::StripeUnavailable,
            message: "Stripe answered for another subscription".to_owned(),
            outcome_unknown: false,
        });
    }
    let row = store::sync_subscription(conn, &state_of(&answer, current.user_id, now)).await?;
    audit::record(
        conn,
        AuditEvent::new(
            Some(user_id),
            AuditAction::BillingSubscriptionCancelRequested,
            json!({
                "stripe_subscription_id": row.stripe_subscription_id,
                "status": row.status,
                "cancel_at_period_end": row.cancel_at_period_end,
                "current_period_end": row.current_period_end,
            }),
        ),
    )
    .await
    .context("audit cancel")?;
    Ok(row)
}

/// Who asked for a mirror sync (for the audit row).
#[derive(Debug, Clone)]
pub(crate) enum SyncActor {
    /// An operator (`users.id`).
    Operator(i32),
    /// A service principal (its name).
    Service(String),
}

/// Upserts one subscription's mirror as read from Stripe by an operator or a service.
#[tracing::instrument(skip_all, fields(subscription.id = %state.stripe_subscription_id))]
pub(crate) async fn sync_mirror(
    conn: &mut PgConnection,
    state: &SubscriptionState,
    actor: &SyncActor,
) -> ApiResult<SubscriptionRow> {
    let row = store::sync_subscription(conn, state).await?;
    let actor = match actor {
        SyncActor::Operator(id) => json!({ "operator_id": id }),
        SyncActor::Service(name) => json!({ "service": name }),
    };
    audit::record(
        conn,
        AuditEvent::new(
            row.user_id,
            AuditAction::BillingSubscriptionSynced,
            json!({
                "stripe_subscription_id": row.stripe_subscription_id,
                "status": row.status,
                "cancel_at_period_end": row.cancel_at_period_end,
                "by": actor,
            }),
        ),
    )
    .await
    .context("audit sync")?;
    Ok(row)
}

/// Records a verified webhook event and applies it, once: a redelivery finds the event row and
/// changes nothing. Unknown types, and events about an erased user's customer, are recorded
/// (`applied = false`) and acknowledged.
#[tracing::instrument(skip_all, fields(stripe.event_id = %event.id, stripe.event_type = %event.kind))]
pub(crate) async fn apply_event(
    conn: &mut PgConnection,
    event: &ParsedEvent,
) -> ApiResult<WebhookAck> {
    let record = EventRecord {
        event_id: &event.id,
        kind: &event.kind,
        created: event.created,
        livemode: event.livemode,
    };
    if !store::record_event(conn, record).await? {
        tracing::info!("duplicate Stripe event; already processed");
        return Ok(WebhookAck {
            received: true,
            duplicate: true,
        });
    }
    let customer = match &event.change {
        Change::Subscription(subscription) => Some(subscription.customer.as_str()),
        Change::CheckoutCompleted(session) => session.customer.as_deref(),
        Change::Ignored => None,
    };
    if let Some(customer) = customer {
        if store::customer_erased(conn, customer).await? {
            // A person we erased: the event is acknowledged and recorded, and nothing of it is
            // mirrored (that would bring their billing rows back).
            tracing::info!("Stripe event for an erased user's customer; recorded, not applied");
            return Ok(WebhookAck {
                received: true,
                duplicate: false,
            });
        }
    }
    let applied = match &event.change {
        Change::Subscription(subscription) => {
            let state = state_of(subscription, None, event.created);
            store::apply_subscription(conn, &state)
                .await?
                .map(|row| (row.user_id, Some(row.stripe_subscription_id)))
        }
        Change::CheckoutCompleted(session) => {
            let user_id = session
                .client_reference_id
                .as_deref()
                .and_then(|id| id.parse::<i32>().ok());
            match (user_id, &session.customer) {
                (Some(user_id), Some(customer)) => store::link_customer(conn, user_id, customer)
                    .await?
                    .then(|| (Some(user_id), session.subscription.clone())),
                _ => None,
            }
        }
        Change::Ignored => None,
    };
    match applied {
        Some((user_id, subscription_id)) => {
            store::mark_event_applied(conn, &event.id).await?;
            audit::record(
                conn,
                AuditEvent::new(
                    user_id,
                    AuditAction::BillingWebhookApplied,
                    json!({
                        "event_id": event.id,
                        "type": event.kind,
                        "stripe_subscription_id": subscription_id,
                    }),
                ),
            )
            .await
            .context("audit webhook")?;
        }
        None => tracing::info!("Stripe event recorded; nothing to apply"),
    }
    Ok(WebhookAck {
        received: true,
        duplicate: false,
    })
}
