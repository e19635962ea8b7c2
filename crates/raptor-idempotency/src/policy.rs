//! Per-route options: tier (fail-closed or fail-open), retention, required key, body storage;
//! and the deployment-wide [`RequireKey`] level that can require keys per tier.

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

/// Which instrumented routes must carry an `Idempotency-Key` (`IDEMPOTENCY_REQUIRE_KEY`), on
/// top of routes whose [`Policy::REQUIRE_KEY`] says so. A required key that is absent is
/// `400 idempotency_key_required`. Keys are optional by default, so unmodified clients keep
/// working; `raptor_idempotency_keyless_requests_total` shows who would be refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequireKey {
    /// Only routes whose policy requires a key (`none`, the default).
    #[default]
    None,
    /// Also every fail-closed (Tier 1) route: orders, rolls, closes, reset (`tier1`).
    Tier1,
    /// Every instrumented route (`all`).
    All,
}

impl RequireKey {
    /// Whether a route of `tier` must carry a key at this level.
    pub fn covers(self, tier: Tier) -> bool {
        match self {
            Self::None => false,
            Self::Tier1 => tier == Tier::FailClosed,
            Self::All => true,
        }
    }
}

/// A route's idempotency options, as associated constants so that a route's policy is part of
/// its handler's type: `Idempotent<CreateOrderRequest, Tier1>`.
pub trait Policy: Send + Sync + 'static {
    /// Fail-closed or fail-open.
    const TIER: Tier;
    /// How long a key is remembered (`expires_at = now() + TTL`).
    const TTL: Duration;
    /// Answer `400 idempotency_key_required` when the header is absent, whatever the
    /// configured [`RequireKey`] level.
    const REQUIRE_KEY: bool = false;
    /// Store the response body for replay. Off for successes that would hold personal data or a
    /// credential: their replay then carries the status code and headers with a body saying it
    /// was not stored. A 4xx's body is stored either way (it holds neither).
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_cover_tiers() {
        assert!(!RequireKey::None.covers(Tier::FailClosed));
        assert!(!RequireKey::None.covers(Tier::FailOpen));
        assert!(RequireKey::Tier1.covers(Tier::FailClosed));
        assert!(!RequireKey::Tier1.covers(Tier::FailOpen));
        assert!(RequireKey::All.covers(Tier::FailClosed));
        assert!(RequireKey::All.covers(Tier::FailOpen));
    }
}
