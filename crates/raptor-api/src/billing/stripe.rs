//! A small Stripe API client: form-encoded calls with a timeout and no retries of its own.
//! (Skeleton.)

use crate::state::BillingConfig;

/// The Stripe client.
#[derive(Clone, Debug)]
pub struct StripeClient {}

impl StripeClient {
    /// A client when `STRIPE_SECRET_KEY` is set, else `None`.
    pub fn from_config(config: &BillingConfig) -> Option<Self> {
        config.secret_key.as_ref().map(|_| Self {})
    }
}
