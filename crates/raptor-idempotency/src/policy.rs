//! Per-route options: tier (fail-closed or fail-open), retention, required key, what is
//! stored for replay;
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
/// its handler's type: `Idempotent<CreateOrderRequest, Tier1, Auth>`.
pub trait Policy: Send + Sync + 'static {
    /// Fail-closed or fail-open.
    const TIER: Tier;
    /// How long a key is remembered (`expires_at = now() + TTL`).
    const TTL: Duration;
    /// Answer `400 idempotency_key_required` when the header is absent, whatever the
    /// configured [`RequireKey`] level.
    const REQUIRE_KEY: bool = false;
    /// What a completed key keeps of its response, and so what a retry gets.
    const REPLAY: Replay = Replay::Stored;
}

/// What a completed key keeps of its response (docs/idempotency.md, "What is stored").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// The response is stored (sealed when keys are configured) and replayed. The default.
    Stored,
    /// A success's body is a credential (a billing portal URL signs the user in): only its
    /// status and headers are stored, and the replay says `{"body_stored": false}`. A 4xx's
    /// body is stored (it holds no credential).
    StatusOnly,
    /// The response holds personal data (the profile), so nothing of it is stored (no body,
    /// not even an error's), and a retry of a completed key runs the handler again (the design
    /// record's rule). Only for routes whose effect is the same when repeated (a profile patch
    /// sets values). The key row still makes concurrent duplicates wait (409) and refuses
    /// another body (422).
    ReExecute,
}

impl Replay {
    /// Whether the body of a `status` answer is kept on the key row.
    pub fn stores_body(self, status: axum::http::StatusCode) -> bool {
        match self {
            Self::Stored => true,
            Self::StatusOnly => status.is_client_error(),
            Self::ReExecute => false,
        }
    }
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
    fn what_each_replay_policy_stores() {
        use axum::http::StatusCode;
        assert!(Replay::Stored.stores_body(StatusCode::CREATED));
        assert!(Replay::Stored.stores_body(StatusCode::FORBIDDEN));
        assert!(!Replay::StatusOnly.stores_body(StatusCode::CREATED));
        assert!(Replay::StatusOnly.stores_body(StatusCode::UNPROCESSABLE_ENTITY));
        assert!(!Replay::ReExecute.stores_body(StatusCode::OK));
        assert!(!Replay::ReExecute.stores_body(StatusCode::UNPROCESSABLE_ENTITY));
    }

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
