//! The gate of the Stripe-calling routes, run as an extractor before the idempotency claim
//! (authenticate, then gates, then the claim): without `STRIPE_SECRET_KEY` they answer
//! `503 billing_not_configured` and no key row is created.

use axum::extract::FromRef;
use axum::http::request::Parts;

use super::stripe::StripeClient;
use crate::auth::AuthUser;
use crate::codes::ErrorCode;
use crate::error::{ApiError, ApiResult};
use raptor_idempotency::{Authenticate, Lent, Scope};
use sqlx::PgPool;

/// An authenticated user on a deployment where billing is configured.
#[derive(Debug, Clone)]
pub struct BillingUser {
    /// `users.id`.
    pub user_id: i32,
    /// The configured Stripe client.
    pub stripe: StripeClient,
    /// The permits of the Stripe-calling requests in flight ([`BillingUser::permit`]).
    pub(crate) permits: std::sync::Arc<tokio::sync::Semaphore>,
}

impl BillingUser {
    /// A slot among the Stripe-calling requests in flight, taken by the claim's winner (so
    /// duplicates are still answered by the claim): while Stripe is slow these requests hold
    /// pooled connections, and they must not take every one of them. None free: `503
    /// billing_busy`, which releases the key, so the retry runs.
    pub(crate) fn permit(&self) -> ApiResult<tokio::sync::OwnedSemaphorePermit> {
        self.permits
            .clone()
            .try_acquire_owned()
            .map_err(|_| ApiError::ServiceUnavailable {
                code: ErrorCode::BillingBusy,
                message: "too many billing requests are waiting on Stripe; retry shortly"
                    .to_owned(),
                retry_after_secs: Some(1),
            })
    }
}

/// `503 billing_not_configured` (no Retry-After: retrying will not help).
pub(crate) fn not_configured(what: &str) -> ApiError {
    ApiError::ServiceUnavailable {
        code: ErrorCode::BillingNotConfigured,
        message: format!("billing is not configured on this deployment ({what} is not set)"),
        retry_after_secs: None,
    }
}

/// What the billing gate needs of the API's state: the Stripe client (when configured) and
/// the permits of Stripe-calling requests.
#[derive(Debug, Clone)]
pub struct BillingDeps {
    /// `None` without `STRIPE_SECRET_KEY`.
    pub stripe: Option<StripeClient>,
    /// `BillingConfig::concurrency` permits.
    pub permits: std::sync::Arc<tokio::sync::Semaphore>,
}

impl<S> Authenticate<S> for BillingUser
where
    S: Send + Sync,
    PgPool: FromRef<S>,
    BillingDeps: FromRef<S>,
{
    type Rejection = ApiError;

    async fn authenticate(parts: &mut Parts, state: &S) -> ApiResult<(Self, Lent)> {
        let (user, lent) = AuthUser::authenticate(parts, state).await?;
        let deps = BillingDeps::from_ref(state);
        let stripe = deps
            .stripe
            .ok_or_else(|| not_configured("STRIPE_SECRET_KEY"))?;
        Ok((
            Self {
                user_id: user.id,
                stripe,
                permits: deps.permits,
            },
            lent,
        ))
    }

    fn scope(&self) -> Scope {
        Scope {
            user_id: Some(self.user_id),
        }
    }
}
