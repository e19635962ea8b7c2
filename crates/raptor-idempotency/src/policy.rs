//! Per-route options: tier (fail-closed or fail-open), retention, required key, body storage.

use std::time::Duration;

/// What a route does when the idempotency store cannot answer in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Refuse with `503 idempotency_store_unavailable` (orders and positions: a retry is safe, a
    /// duplicate is not).
    FailClosed,
    /// Run the handler without dedup, log a WARNING and count it (billing, profile).
    FailOpen,
}

/// A route's idempotency options, as associated constants so that a route's policy is part of
/// its handler's type: `Idempotent<CreateOrderRequest, Tier1>`.
pub trait Policy: Send + Sync + 'static {
    /// Fail-closed or fail-open.
    const TIER: Tier;
    /// How long a key is remembered (`expires_at = now() + TTL`).
    const TTL: Duration;
    /// Answer `400 idempotency_key_required` when the header is absent.
    const REQUIRE_KEY: bool = false;
    /// Store the response body for replay. Off for responses that would hold personal data: the
    /// replay then carries the status code and headers with a body saying it was not stored.
    const STORE_BODY: bool = true;
}

/// Tier 1 (docs/idempotency.md): order and position writes. Fail-closed, 24 h.
#[derive(Debug, Clone, Copy)]
pub struct Tier1;

impl Policy for Tier1 {
    const TIER: Tier = Tier::FailClosed;
    const TTL: Duration = Duration::from_secs(24 * 60 * 60);
}

/// Tier 2 (docs/idempotency.md): billing and account mutations. Fail-open, 7 days.
#[derive(Debug, Clone, Copy)]
pub struct Tier2;

impl Policy for Tier2 {
    const TIER: Tier = Tier::FailOpen;
    const TTL: Duration = Duration::from_secs(7 * 24 * 60 * 60);
}
