//! Wire types of the billing routes, and their parsing into checked values (`parse` once at the
//! boundary, so handlers and Stripe calls never re-check). Timestamps are RFC 3339 strings.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::store::{SubscriptionRow, SubscriptionState};
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult};

const MAX_ID: usize = 255;
const MAX_URL: usize = 2048;

/// `POST /api/billing/checkout-sessions`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateCheckoutSessionRequest {
    /// The Stripe price to subscribe to.
    #[schema(example = "price_1PremiumMonthly")]
    pub price_id: String,
    /// Where Stripe sends the user after paying (an absolute http or https URL, at most 2048
    /// characters).
    #[schema(
        example = "https://app.example.com/billing/success",
        format = "uri",
        max_length = 2048
    )]
    pub success_url: String,
    /// Where Stripe sends the user when they go back (an absolute http or https URL, at most
    /// 2048 characters).
    #[schema(
        example = "https://app.example.com/billing",
        format = "uri",
        max_length = 2048
    )]
    pub cancel_url: String,
}

/// A checked [`CreateCheckoutSessionRequest`].
#[derive(Debug, Clone)]
pub(crate) struct CheckoutParams {
    pub(crate) price_id: String,
    pub(crate) success_url: String,
    pub(crate) cancel_url: String,
}

impl CreateCheckoutSessionRequest {
    /// Checks every field (`422 invalid_billing_request`).
    pub(crate) fn parse(self) -> ApiResult<CheckoutParams> {
        Ok(CheckoutParams {
            price_id: stripe_id("price_id", self.price_id, ErrorCode::InvalidBillingRequest)?,
            success_url: url("success_url", self.success_url)?,
            cancel_url: url("cancel_url", self.cancel_url)?,
        })
    }
}

/// `201` of `POST /api/billing/checkout-sessions`: the Stripe Checkout Session.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CheckoutSessionResponse {
    /// The session's id (`cs_…`).
    #[schema(example = "cs_test_a1b2c3")]
    pub id: String,
    /// Where to send the user.
    pub url: String,
}

/// `POST /api/billing/portal-sessions`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePortalSessionRequest {
    /// Where the portal sends the user back (an absolute http or https URL, at most 2048
    /// characters).
    #[schema(
        example = "https://app.example.com/settings",
        format = "uri",
        max_length = 2048
    )]
    pub return_url: String,
}

impl CreatePortalSessionRequest {
    /// The checked return URL (`422 invalid_billing_request`).
    pub(crate) fn parse(self) -> ApiResult<String> {
        url("return_url", self.return_url)
    }
}

/// `201` of `POST /api/billing/portal-sessions`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct PortalSessionResponse {
    /// Where to send the user.
    pub url: String,
}

/// A replay of an answer whose body was not stored (the portal's URL is a credential).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UnstoredReplay {
    /// Always `false`: ask again with a new key.
    #[schema(value_type = bool, example = false)]
    pub body_stored: bool,
    /// Always `true`.
    #[schema(example = true)]
    pub idempotency_replayed: bool,
}

/// `201` of `POST /api/billing/portal-sessions`: the session, or on a replay the marker that
/// its URL was not kept (documentation only: the handler answers a `PortalSessionResponse`,
/// the idempotency layer the marker).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(untagged)]
pub enum PortalSessionAnswer {
    /// A fresh answer.
    Session(PortalSessionResponse),
    /// A replay.
    Unstored(UnstoredReplay),
}

/// `POST /api/billing/subscription/cancel`: `{}` or no body.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelSubscriptionRequest {}

/// `POST /api/billing/mirror-sync`: one subscription's state, as an operator or a service read it
/// from Stripe. Upserted by `stripe_subscription_id`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MirrorSyncRequest {
    /// `sub_…`.
    #[schema(example = "sub_1Q2w3E")]
    pub stripe_subscription_id: String,
    /// `cus_…`.
    #[schema(example = "cus_R4t5Y6")]
    pub stripe_customer_id: String,
    /// One of Stripe's statuses: `incomplete`, `incomplete_expired`, `trialing`, `active`,
    /// `past_due`, `canceled`, `unpaid`, `paused`.
    #[schema(example = "active")]
    pub status: String,
    /// The subscribed price.
    pub price_id: Option<String>,
    /// End of the paid period (RFC 3339).
    pub current_period_end: Option<DateTime<Utc>>,
    /// Cancels when the period ends.
    #[serde(default)]
    pub cancel_at_period_end: bool,
    /// When it was canceled (RFC 3339).
    pub canceled_at: Option<DateTime<Utc>>,
    /// Our user; when absent, resolved from `billing_customers` by the customer id.
    pub user_id: Option<i32>,
}

/// Stripe's subscription statuses.
pub(crate) const STATUSES: [&str; 8] = [
    "incomplete",
    "incomplete_expired",
    "trialing",
    "active",
    "past_due",
    "canceled",
    "unpaid",
    "paused",
];

impl MirrorSyncRequest {
    /// Checks every field (`422 invalid_subscription`); `source_at` is the time of the sync.
    pub(crate) fn parse(self, source_at: DateTime<Utc>) -> ApiResult<SubscriptionState> {
        const CODE: ErrorCode = ErrorCode::InvalidSubscription;
        if !STATUSES.contains(&self.status.as_str()) {
            return Err(ApiError::invalid(
                CODE,
                format!("status must be one of {}", STATUSES.join(", ")),
            ));
        }
        if self.user_id.is_some_and(|id| id <= 0) {
            return Err(ApiError::invalid(CODE, "user_id must be positive"));
        }
        Ok(SubscriptionState {
            stripe_subscription_id: stripe_id(
                "stripe_subscription_id",
                self.stripe_subscription_id,
                CODE,
            )?,
            stripe_customer_id: stripe_id("stripe_customer_id", self.stripe_customer_id, CODE)?,
            user_id: self.user_id,
            status: self.status,
            price_id: self
                .price_id
                .map(|price| stripe_id("price_id", price, CODE))
                .transpose()?,
            current_period_end: self.current_period_end,
            cancel_at_period_end: self.cancel_at_period_end,
            canceled_at: self.canceled_at,
            source_at,
        })
    }
}

/// Our mirror of one Stripe subscription.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubscriptionResponse {
    /// `sub_…`.
    pub stripe_subscription_id: String,
    /// `cus_…`.
    pub stripe_customer_id: String,
    /// Our user, when known.
    #[schema(required = true)]
    pub user_id: Option<i32>,
    /// Stripe's status (`active`, `trialing`, `past_due`, `canceled`, …).
    pub status: String,
    /// The subscribed price.
    #[schema(required = true)]
    pub price_id: Option<String>,
    /// End of the paid period (RFC 3339).
    #[schema(required = true)]
    pub current_period_end: Option<DateTime<Utc>>,
    /// The subscription ends when the period does.
    pub cancel_at_period_end: bool,
    /// When it was canceled (RFC 3339).
    #[schema(required = true)]
    pub canceled_at: Option<DateTime<Utc>>,
    /// Stripe time of the state this mirror holds (RFC 3339): older events never overwrite it.
    pub source_at: DateTime<Utc>,
    /// Last change of the mirror row (RFC 3339).
    pub updated_at: DateTime<Utc>,
}

impl From<SubscriptionRow> for SubscriptionResponse {
    fn from(row: SubscriptionRow) -> Self {
        Self {
            stripe_subscription_id: row.stripe_subscription_id,
            stripe_customer_id: row.stripe_customer_id,
            user_id: row.user_id,
            status: row.status,
            price_id: row.price_id,
            current_period_end: row.current_period_end,
            cancel_at_period_end: row.cancel_at_period_end,
            canceled_at: row.canceled_at,
            source_at: row.source_at,
            updated_at: row.updated_at,
        }
    }
}

/// `200` of the webhook.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookAck {
    /// Always `true`.
    pub received: bool,
    /// The event had been processed before; nothing changed.
    pub duplicate: bool,
}

fn stripe_id(field: &str, value: String, code: ErrorCode) -> ApiResult<String> {
    let value = value.trim().to_owned();
    if value.is_empty() || value.len() > MAX_ID || value.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            code,
            format!("{field} must be 1 to {MAX_ID} printable characters"),
        ));
    }
    Ok(value)
}

fn url(field: &str, value: String) -> ApiResult<String> {
    let rest = value
        .strip_prefix("https://")
        .or_else(|| value.strip_prefix("http://"));
    let host = rest.map(|rest| rest.split(['/', '?', '#']).next().unwrap_or_default());
    let valid = value.len() <= MAX_URL
        && host.is_some_and(|host| !host.is_empty())
        && !value.chars().any(|c| c.is_control() || c.is_whitespace());
    if !valid {
        return Err(ApiError::invalid(
            ErrorCode::InvalidBillingRequest,
            format!("{field} must be an http(s) URL of at most {MAX_URL} characters"),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert!(url("u", "https://app.example.com/x?y=1".into()).is_ok());
        assert!(url("u", "http://localhost:3000".into()).is_ok());
        for bad in [
            "",
            "ftp://x",
            "https://",
            "https:///path",
            "https://a b",
            "javascript:alert(1)",
        ] {
            assert!(url("u", bad.into()).is_err(), "{bad}");
        }
        assert!(url("u", format!("https://a/{}", "x".repeat(2048))).is_err());
    }

    #[test]
    fn ids_are_checked() {
        assert!(stripe_id("p", "price_1".into(), ErrorCode::InvalidBillingRequest).is_ok());
        assert!(stripe_id("p", " ".into(), ErrorCode::InvalidBillingRequest).is_err());
        assert!(stripe_id("p", "x".repeat(256), ErrorCode::InvalidBillingRequest).is_err());
        assert!(stripe_id("p", "a\0b".into(), ErrorCode::InvalidBillingRequest).is_err());
    }
}
