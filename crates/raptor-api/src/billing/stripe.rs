//! A small Stripe API client: form-encoded `POST`s with a deadline and no retries of its own
//! (the client retries with its Idempotency-Key; we forward a key derived from it, so
//! Stripe replays instead of executing twice). Errors map to the API's envelope; the secret key
//! never reaches a log line or a response.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use raptor_idempotency::IdempotencyKey;
use secrecy::{ExposeSecret, SecretString};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use uuid::Uuid;

use crate::codes::ErrorCode;
use crate::error::ApiError;

/// Stripe settings. Without a secret key the billing routes answer
/// `503 billing_not_configured`; without a webhook secret the webhook route does.
#[derive(Clone, Debug)]
pub struct BillingConfig {
    /// `STRIPE_API_BASE`, e.g. `https://api.stripe.com`.
    pub api_base: String,
    /// `STRIPE_SECRET_KEY` (redacted by `Debug`, wiped when dropped).
    pub secret_key: Option<SecretString>,
    /// `STRIPE_WEBHOOK_SECRET`: the `whsec_…` signing secret of the webhook endpoint.
    pub webhook_secret: Option<SecretString>,
    /// `STRIPE_TIMEOUT_MS`: the deadline of one Stripe call (below the request timeout).
    pub timeout: Duration,
    /// `RAPTOR_BILLING_CONCURRENCY`: Stripe-calling requests in flight at once in this process
    /// (each holds a pooled connection while Stripe answers); past it, `503 billing_busy`.
    pub concurrency: usize,
}

impl Default for BillingConfig {
    fn default() -> Self {
        Self {
            api_base: "https://api.stripe.com".to_owned(),
            secret_key: None,
            webhook_secret: None,
            timeout: Duration::from_secs(10),
            concurrency: 4,
        }
    }
}

/// The Stripe API version every call names (`Stripe-Version`), so a change of the account's
/// default version in Stripe's dashboard cannot change what our calls send and receive. The
/// subscription reader accepts both places its period end has had (`Subscription::period_end`).
pub const STRIPE_API_VERSION: &str = "2025-03-31.basil";

/// The namespace of forwarded Idempotency-Keys (UUIDv5 over `"{user}:{operation}:{key}"`).
const FORWARD_NAMESPACE: Uuid = Uuid::from_u128(0x7b1c_52e4_0f3a_4d6e_9a87_b111_0c0d_e5a1);

/// The Stripe operations of one request. Each gets its own forwarded key: Stripe refuses a key
/// reused with other parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    /// `POST /v1/checkout/sessions`.
    CreateCheckoutSession,
    /// `POST /v1/billing_portal/sessions`.
    CreatePortalSession,
    /// `POST /v1/subscriptions/{id}` with `cancel_at_period_end=true`.
    CancelSubscription,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Self::CreateCheckoutSession => "checkout_session.create",
            Self::CreatePortalSession => "portal_session.create",
            Self::CancelSubscription => "subscription.cancel",
        }
    }
}

/// Derives the `Idempotency-Key` forwarded to Stripe from the client's `Idempotency-Key`.
///
/// With a key the forwarded one is `UUIDv5(namespace, "{user}:{operation}:{key}")`: the same
/// for every attempt of the client's key, whether the attempt was tracked, ran untracked
/// because the store could not be reached (fail-open), or ran with the kill switch off, and
/// whether an earlier attempt's outcome at Stripe was lost (a timeout releases the key, and
/// the retry sends Stripe the same key, so Stripe replays instead of executing twice). It is
/// never the client's raw key. Stripe keeps a key for 24 hours and our key rows live 7 days,
/// so a key reused after its row expired cannot meet a stored Stripe answer. Without a client
/// key each call gets a fresh random key: there is no retry identity to preserve.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ForwardKeys {
    seed: Option<(i32, IdempotencyKey)>,
}

impl ForwardKeys {
    /// Keys for `user_id`'s request that carried `key` (`Claim::key`).
    pub(crate) fn new(user_id: i32, key: Option<IdempotencyKey>) -> Self {
        Self {
            seed: key.map(|key| (user_id, key)),
        }
    }

    /// The key of creating `user_id`'s customer: derived from the user and the email sent, not
    /// from the request, so that every request of the user (whatever its own key) within
    /// Stripe's idempotency window replays the same customer instead of creating another one
    /// after a lost answer (the client's next key must not leave an orphan customer behind).
    pub(crate) fn customer_key(user_id: i32, email: &str) -> String {
        Uuid::new_v5(
            &FORWARD_NAMESPACE,
            format!("customer:{user_id}:{email}").as_bytes(),
        )
        .to_string()
    }

    /// The key of `operation`.
    pub(crate) fn key(&self, operation: Operation) -> String {
        match self.seed {
            Some((user_id, key)) => Uuid::new_v5(
                &FORWARD_NAMESPACE,
                format!("{user_id}:{}:{key}", operation.as_str()).as_bytes(),
            ),
            None => Uuid::new_v4(),
        }
        .to_string()
    }
}

/// A Stripe customer (the fields we use).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Customer {
    /// `cus_…`.
    pub(crate) id: String,
}

/// A Checkout Session (the fields we use).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct CheckoutSession {
    /// `cs_…`.
    pub(crate) id: String,
    /// Where to send the user.
    pub(crate) url: Option<String>,
}

/// A Billing Portal session (the fields we use).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct PortalSession {
    /// Where to send the user.
    pub(crate) url: String,
}

/// A subscription, as Stripe returns it from the API and in webhook events.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Subscription {
    /// `sub_…`.
    pub(crate) id: String,
    /// The customer's id (an expanded customer object is accepted too).
    #[serde(deserialize_with = "id_or_object")]
    pub(crate) customer: String,
    /// `active`, `trialing`, `past_due`, `canceled`, …
    pub(crate) status: String,
    #[serde(default)]
    pub(crate) items: Option<SubscriptionItems>,
    /// Unix seconds (older API versions; newer ones carry it on the item).
    #[serde(default)]
    pub(crate) current_period_end: Option<i64>,
    #[serde(default)]
    pub(crate) cancel_at_period_end: bool,
    /// Unix seconds.
    #[serde(default)]
    pub(crate) canceled_at: Option<i64>,
}

/// `items` of a subscription.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SubscriptionItems {
    #[serde(default)]
    pub(crate) data: Vec<SubscriptionItem>,
}

/// One subscription item.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SubscriptionItem {
    #[serde(default)]
    pub(crate) price: Option<Price>,
    #[serde(default)]
    pub(crate) current_period_end: Option<i64>,
}

/// A price (the id only).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Price {
    pub(crate) id: String,
}

impl Subscription {
    /// The first item's price id.
    pub(crate) fn price_id(&self) -> Option<&str> {
        let item = self.items.as_ref()?.data.first()?;
        item.price.as_ref().map(|price| price.id.as_str())
    }

    /// The period end, from the subscription or (newer API versions) its first item.
    pub(crate) fn period_end(&self) -> Option<i64> {
        self.current_period_end.or_else(|| {
            self.items
                .as_ref()
                .and_then(|items| items.data.first())
                .and_then(|item| item.current_period_end)
        })
    }
}

/// Accepts `"cus_…"` or `{"id": "cus_…", …}`.
pub(crate) fn id_or_object<'de, D>(deserializer: D) -> Result<String, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum IdOrObject {
        Id(String),
        Object { id: String },
    }
    Ok(match IdOrObject::deserialize(deserializer)? {
        IdOrObject::Id(id) | IdOrObject::Object { id } => id,
    })
}

/// Stripe's error body: `{"error": {"type", "code", "message", "param"}}`.
#[derive(Debug, Default, Deserialize)]
struct StripeErrorBody {
    #[serde(default)]
    error: StripeError,
}

#[derive(Debug, Default, Deserialize)]
struct StripeError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    param: Option<String>,
}

/// The Stripe client: one connection pool, the secret key, the per-call deadline.
#[derive(Clone)]
pub struct StripeClient {
    http: reqwest::Client,
    api_base: Arc<str>,
    secret_key: SecretString,
}

impl std::fmt::Debug for StripeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripeClient")
            .field("api_base", &self.api_base)
            .field("secret_key", &self.secret_key)
            .finish_non_exhaustive()
    }
}

impl StripeClient {
    /// A client when `STRIPE_SECRET_KEY` is set, else `None` (the billing routes then answer
    /// `503 billing_not_configured`).
    pub fn from_config(config: &BillingConfig) -> Option<Self> {
        let secret_key = config.secret_key.clone()?;
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .build();
        match http {
            Ok(http) => Some(Self {
                http,
                api_base: config.api_base.trim_end_matches('/').into(),
                secret_key,
            }),
            Err(err) => {
                tracing::error!(error = %err, "could not build the Stripe HTTP client; billing disabled");
                None
            }
        }
    }

    /// `POST /v1/customers`: a customer for one of our users.
    pub(crate) async fn create_customer(
        &self,
        idempotency_key: &str,
        email: &str,
        user_id: i32,
    ) -> Result<Customer, ApiError> {
        let form = [
            ("email", email.to_owned()),
            ("metadata[user_id]", user_id.to_string()),
        ];
        timed(
            "create_customer",
            self.post("/v1/customers", idempotency_key, &form),
        )
        .await
    }

    /// `POST /v1/checkout/sessions` in subscription mode for one price.
    pub(crate) async fn create_checkout_session(
        &self,
        idempotency_key: &str,
        request: &CheckoutRequest<'_>,
    ) -> Result<CheckoutSession, ApiError> {
        let form = [
            ("mode", "subscription".to_owned()),
            ("customer", request.customer.to_owned()),
            ("line_items[0][price]", request.price_id.to_owned()),
            ("line_items[0][quantity]", "1".to_owned()),
            ("success_url", request.success_url.to_owned()),
            ("cancel_url", request.cancel_url.to_owned()),
            ("client_reference_id", request.user_id.to_string()),
        ];
        timed(
            "create_checkout_session",
            self.post("/v1/checkout/sessions", idempotency_key, &form),
        )
        .await
    }

    /// `POST /v1/billing_portal/sessions`.
    pub(crate) async fn create_portal_session(
        &self,
        idempotency_key: &str,
        customer: &str,
        return_url: &str,
    ) -> Result<PortalSession, ApiError> {
        let form = [
            ("customer", customer.to_owned()),
            ("return_url", return_url.to_owned()),
        ];
        timed(
            "create_portal_session",
            self.post("/v1/billing_portal/sessions", idempotency_key, &form),
        )
        .await
    }

    /// Cancels a subscription at the end of the paid period (`cancel_at_period_end=true`), as
    /// a consumer app does: the user keeps what they paid for and can resume until then. An
    /// immediate cancel (`DELETE /v1/subscriptions/{id}`) is an operator's decision, not the
    /// app's.
    pub(crate) async fn cancel_subscription_at_period_end(
        &self,
        idempotency_key: &str,
        subscription_id: &str,
    ) -> Result<Subscription, ApiError> {
        let path = format!("/v1/subscriptions/{}", path_segment(subscription_id));
        let form = [("cancel_at_period_end", "true".to_owned())];
        timed(
            "cancel_subscription",
            self.post(&path, idempotency_key, &form),
        )
        .await
    }

    /// One Stripe call, a span of its own (a client span when exported) whose `traceparent`
    /// the request carries.
    #[tracing::instrument(
        name = "stripe.call",
        skip_all,
        fields(stripe.path = path, http.status_code, otel.kind = "client")
    )]
    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        idempotency_key: &str,
        form: &[(&str, String)],
    ) -> Result<T, ApiError> {
        let response = self
            .http
            .post(format!("{}{path}", self.api_base))
            .bearer_auth(self.secret_key.expose_secret())
            .header("Stripe-Version", STRIPE_API_VERSION)
            .header("Idempotency-Key", idempotency_key)
            .headers(crate::trace_context::outgoing_headers())
            .form(form)
            .send()
            .await
            .map_err(|err| transport_error(&err))?;
        let status = response.status();
        tracing::Span::current().record("http.status_code", status.as_u16());
        let retry_after = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<u64>().ok());
        let bytes = response
            .bytes()
            .await
            .map_err(|err| transport_error(&err))?;
        if status.is_success() {
            return serde_json::from_slice(&bytes).map_err(|err| {
                tracing::warn!(error = %err, "unreadable Stripe answer");
                unavailable("Stripe sent an answer we could not read")
            });
        }
        Err(self.status_error(status.as_u16(), retry_after, &bytes))
    }

    fn status_error(&self, status: u16, retry_after: Option<u64>, body: &[u8]) -> ApiError {
        let error = serde_json::from_slice::<StripeErrorBody>(body)
            .unwrap_or_default()
            .error;
        tracing::warn!(
            stripe.status = status,
            stripe.error_type = error.kind.as_deref(),
            stripe.error_code = error.code.as_deref(),
            stripe.param = error.param.as_deref(),
            "Stripe refused the call"
        );
        match status {
            // Rate limited, or a concurrent call with the same key in progress: nothing happened
            // on our side and a retry with the same key executes (a 503 releases the key).
            429 | 409 => ApiError::ServiceUnavailable {
                code: ErrorCode::StripeUnavailable,
                message: "Stripe is busy; retry shortly with the same Idempotency-Key".to_owned(),
                retry_after_secs: Some(retry_after.unwrap_or(1).clamp(1, 60)),
            },
            // Our credentials: not the client's fault and not something they can fix. Stripe
            // refused before doing anything: a known outcome, the key fails.
            401 | 403 => ApiError::Upstream {
                status: StatusCode::BAD_GATEWAY,
                code: ErrorCode::StripeUnavailable,
                message: "Stripe refused the service's credentials".to_owned(),
                outcome_unknown: false,
            },
            400..=499 => {
                let mut message = error
                    .message
                    .unwrap_or_else(|| format!("Stripe refused the request ({status})"));
                if let Some(param) = error.param {
                    message = format!("{message} (param: {param})");
                }
                ApiError::invalid(
                    ErrorCode::BillingRequestRejected,
                    // Stripe masks keys in its messages; make sure of it anyway.
                    message.replace(self.secret_key.expose_secret(), "***"),
                )
            }
            _ => unavailable("Stripe failed to answer"),
        }
    }
}

/// Runs one Stripe call, recording its duration in
/// `raptor_stripe_request_duration_seconds{operation, outcome}`: `ok`, `timeout` (no answer
/// in time), `busy` (429/409), `rejected` (another 4xx: the request's fault) or `error`
/// (credentials refused, a 5xx, an unreadable answer, Stripe unreachable).
async fn timed<T>(
    operation: &'static str,
    call: impl std::future::Future<Output = Result<T, ApiError>>,
) -> Result<T, ApiError> {
    let started = std::time::Instant::now();
    let result = call.await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(err) => match err.code() {
            ErrorCode::StripeTimeout => "timeout",
            ErrorCode::BillingRequestRejected => "rejected",
            _ if err.status() == StatusCode::SERVICE_UNAVAILABLE => "busy",
            _ => "error",
        },
    };
    metrics::histogram!(
        "raptor_stripe_request_duration_seconds",
        "operation" => operation,
        "outcome" => outcome,
    )
    .record(started.elapsed().as_secs_f64());
    result
}

/// The parameters of a checkout session.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckoutRequest<'a> {
    pub(crate) customer: &'a str,
    pub(crate) price_id: &'a str,
    pub(crate) success_url: &'a str,
    pub(crate) cancel_url: &'a str,
    pub(crate) user_id: i32,
}

/// A 502 whose outcome at Stripe is unknown (a 5xx, an unreadable answer, a lost connection):
/// the key is released and the retry sends Stripe the same key.
fn unavailable(message: &str) -> ApiError {
    ApiError::Upstream {
        status: StatusCode::BAD_GATEWAY,
        code: ErrorCode::StripeUnavailable,
        message: message.to_owned(),
        outcome_unknown: true,
    }
}

fn transport_error(err: &reqwest::Error) -> ApiError {
    // `reqwest::Error`'s Display names the URL but never headers, so the key stays out.
    if err.is_timeout() {
        tracing::warn!(error = %err, "Stripe call timed out");
        ApiError::Upstream {
            status: StatusCode::GATEWAY_TIMEOUT,
            code: ErrorCode::StripeTimeout,
            message: "Stripe did not answer in time; nothing was changed here, and a retry \
                      with the same Idempotency-Key is safe"
                .to_owned(),
            outcome_unknown: true,
        }
    } else {
        tracing::warn!(error = %err, "Stripe call failed");
        unavailable("could not reach Stripe")
    }
}

/// Percent-encodes an id for use as one path segment (ids come from our own mirror, but a
/// stray `/` or `?` must not change the call).
fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stripe_secrets_never_reach_a_log_line() {
        let config = BillingConfig {
            secret_key: Some("sk_test_hunter2".into()),
            webhook_secret: Some("whsec_hunter3".into()),
            ..BillingConfig::default()
        };
        let client = StripeClient::from_config(&config).expect("configured");
        let printed = format!("{config:?} {client:?}");
        assert!(!printed.contains("hunter"), "{printed}");
    }

    #[test]
    fn forwarded_keys_are_stable_per_client_key_and_distinct_per_operation_and_user() {
        let client_key = IdempotencyKey::parse(&Uuid::new_v4().to_string()).expect("key");
        let keys = ForwardKeys::new(7, Some(client_key));
        let checkout = keys.key(Operation::CreateCheckoutSession);
        assert_eq!(checkout, keys.key(Operation::CreateCheckoutSession));
        assert_eq!(
            checkout,
            ForwardKeys::new(7, Some(client_key)).key(Operation::CreateCheckoutSession),
            "every attempt of one key, tracked or not, forwards the same key"
        );
        assert_ne!(checkout, keys.key(Operation::CreatePortalSession));
        assert_ne!(
            checkout,
            client_key.to_string(),
            "never the client's raw key"
        );
        let other_user = ForwardKeys::new(8, Some(client_key));
        assert_ne!(checkout, other_user.key(Operation::CreateCheckoutSession));
        let other_key = IdempotencyKey::parse(&Uuid::new_v4().to_string()).expect("key");
        let other = ForwardKeys::new(7, Some(other_key));
        assert_ne!(checkout, other.key(Operation::CreateCheckoutSession));
        let keyless = ForwardKeys::new(7, None);
        assert_ne!(
            keyless.key(Operation::CreateCheckoutSession),
            keyless.key(Operation::CreateCheckoutSession)
        );
        // The customer's key follows the user (and the email sent), not the request.
        let customer = ForwardKeys::customer_key(7, "a@example.com");
        assert_eq!(customer, ForwardKeys::customer_key(7, "a@example.com"));
        assert_ne!(customer, ForwardKeys::customer_key(8, "a@example.com"));
        assert_ne!(customer, ForwardKeys::customer_key(7, "b@example.com"));
    }

    #[test]
    fn path_segments_are_escaped() {
        assert_eq!(path_segment("sub_123"), "sub_123");
        assert_eq!(path_segment("a/b?c"), "a%2Fb%3Fc");
    }

    #[test]
    fn customer_may_be_expanded() {
        let sub: Subscription = serde_json::from_value(serde_json::json!({
            "id": "sub_1", "customer": {"id": "cus_1"}, "status": "active",
            "items": {"data": [{"price": {"id": "price_1"}, "current_period_end": 5}]}
        }))
        .expect("subscription");
        assert_eq!(sub.customer, "cus_1");
        assert_eq!(sub.price_id(), Some("price_1"));
        assert_eq!(sub.period_end(), Some(5));
    }
}
