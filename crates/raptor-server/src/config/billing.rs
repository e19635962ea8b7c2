//! Stripe: where its API is, the keys, a call's deadline and how many calls run at once.

use std::time::Duration;

use clap::Args;

use super::Secret;

/// `RAPTOR_BILLING_CONCURRENCY`, `STRIPE_TIMEOUT_MS`, `STRIPE_API_BASE`, `STRIPE_SECRET_KEY`,
/// `STRIPE_WEBHOOK_SECRET`.
#[derive(Debug, Clone, Args)]
pub struct BillingArgs {
    /// Stripe-calling requests in flight at once in this process; past it, 503 billing_busy.
    #[arg(long, env = "RAPTOR_BILLING_CONCURRENCY", value_name = "RAPTOR_BILLING_CONCURRENCY",
          default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000), global = true)]
    pub billing_concurrency: u32,

    /// Deadline of one Stripe API call in milliseconds (must be below the request timeout).
    /// Default: 10000, or half of RAPTOR_REQUEST_TIMEOUT_SECS when that is less.
    #[arg(long, env = "STRIPE_TIMEOUT_MS", value_name = "STRIPE_TIMEOUT_MS",
          value_parser = clap::value_parser!(u64).range(1..=600_000), global = true)]
    pub stripe_timeout_ms: Option<u64>,

    /// Stripe API base URL (billing routes).
    #[arg(
        long,
        env = "STRIPE_API_BASE",
        value_name = "STRIPE_API_BASE",
        default_value = "https://api.stripe.com",
        global = true
    )]
    pub stripe_api_base: String,

    /// Stripe secret key; without it the billing routes answer 503 billing_not_configured.
    #[arg(
        long,
        env = "STRIPE_SECRET_KEY",
        value_name = "STRIPE_SECRET_KEY",
        global = true,
        hide_env_values = true
    )]
    pub stripe_secret_key: Option<Secret>,

    /// Stripe webhook signing secret (`whsec_…`) of `POST /api/billing/webhooks/stripe`.
    #[arg(
        long,
        env = "STRIPE_WEBHOOK_SECRET",
        value_name = "STRIPE_WEBHOOK_SECRET",
        global = true,
        hide_env_values = true
    )]
    pub stripe_webhook_secret: Option<Secret>,
}

impl BillingArgs {
    /// `STRIPE_TIMEOUT_MS`, or its default for a request timeout of `request_ms`.
    pub fn timeout_ms(&self, request_ms: u64) -> u64 {
        self.stripe_timeout_ms
            .unwrap_or_else(|| super::follow(10_000, request_ms, 2))
    }

    /// The billing routes' settings (blank keys are unset) for a request timeout of
    /// `request_ms`.
    pub fn config(&self, request_ms: u64) -> raptor_api::BillingConfig {
        let secret = |s: &Option<Secret>| {
            s.as_ref()
                .map(|s| s.expose().trim())
                .filter(|s| !s.is_empty())
                .map(secrecy::SecretString::from)
        };
        raptor_api::BillingConfig {
            api_base: self.stripe_api_base.trim().trim_end_matches('/').to_owned(),
            secret_key: secret(&self.stripe_secret_key),
            webhook_secret: secret(&self.stripe_webhook_secret),
            timeout: Duration::from_millis(self.timeout_ms(request_ms)),
            concurrency: usize::try_from(self.billing_concurrency).unwrap_or(usize::MAX),
        }
    }
}
