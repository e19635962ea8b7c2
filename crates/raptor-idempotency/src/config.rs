//! The mechanism's settings (the server maps them from the environment).

use std::time::Duration;

use crate::policy::RequireKey;
use crate::seal::ResponseKeys;

/// Settings of the mechanism (the server maps them from the environment).
#[derive(Debug, Clone)]
pub struct IdempotencyConfig {
    /// An `in_flight` row older than this is an abandoned attempt (`IDEMPOTENCY_STALE_AFTER_SECS`).
    pub stale_after: Duration,
    /// The claim's deadline before a fail-closed route answers 503 (`IDEMPOTENCY_STORE_TIMEOUT_MS`).
    pub store_timeout: Duration,
    /// `FLAG_IDEMPOTENCY_MIDDLEWARE` from the environment: the value when no override is stored.
    pub flag_default: bool,
    /// `RAPTOR_RESPONSE_KEYS`: stored response bodies are sealed under the first key and opened
    /// with any of them; none configured means they are stored as plain JSON.
    pub response_keys: ResponseKeys,
    /// `IDEMPOTENCY_REQUIRE_KEY`: which routes answer `400 idempotency_key_required` without a
    /// key.
    pub require_key: RequireKey,
}

impl Default for IdempotencyConfig {
    fn default() -> Self {
        Self {
            stale_after: Duration::from_secs(30),
            store_timeout: Duration::from_millis(2000),
            flag_default: true,
            response_keys: ResponseKeys::none(),
            require_key: RequireKey::None,
        }
    }
}
