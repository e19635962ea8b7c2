//! The Idempotency-Key mechanism: when an attempt is stale, how long a claim may take, which
//! routes require a key, the keys that seal stored answers, the kill switch and the cleanup
//! schedule.

use std::time::Duration;

use clap::{Args, ValueEnum};
use raptor_idempotency::{IdempotencyConfig, RequireKey, ResponseKeys};

use super::{parse_flag, Secret};

/// `IDEMPOTENCY_REQUIRE_KEY`: which instrumented routes refuse a request without a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RequireKeyLevel {
    /// Keys are optional (unless a route's own policy requires one).
    None,
    /// Required on Tier 1 (fail-closed) routes: orders, rolls, closes, account reset.
    Tier1,
    /// Required on every instrumented route.
    All,
}

impl From<RequireKeyLevel> for RequireKey {
    fn from(level: RequireKeyLevel) -> Self {
        match level {
            RequireKeyLevel::None => Self::None,
            RequireKeyLevel::Tier1 => Self::Tier1,
            RequireKeyLevel::All => Self::All,
        }
    }
}

/// `IDEMPOTENCY_STALE_AFTER_SECS`, `IDEMPOTENCY_STORE_TIMEOUT_MS`, `IDEMPOTENCY_REQUIRE_KEY`,
/// `RAPTOR_RESPONSE_KEYS`, `FLAG_IDEMPOTENCY_MIDDLEWARE`,
/// `RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS`.
#[derive(Debug, Clone, Args)]
pub struct IdempotencyArgs {
    /// An in-flight idempotency key older than this is abandoned (must be >= the request
    /// timeout). Default: 30, or RAPTOR_REQUEST_TIMEOUT_SECS when that is more.
    #[arg(long, env = "IDEMPOTENCY_STALE_AFTER_SECS", value_name = "IDEMPOTENCY_STALE_AFTER_SECS",
          value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub idempotency_stale_after_secs: Option<u64>,

    /// How long a claim may take before fail-closed routes answer 503, in ms (below the
    /// request timeout). Default: 2000, or a quarter of RAPTOR_REQUEST_TIMEOUT_SECS when that is
    /// less (a request claims its key and records its answer, and its own work needs the rest).
    #[arg(long, env = "IDEMPOTENCY_STORE_TIMEOUT_MS", value_name = "IDEMPOTENCY_STORE_TIMEOUT_MS",
          value_parser = clap::value_parser!(u64).range(1..=600_000), global = true)]
    pub idempotency_store_timeout_ms: Option<u64>,

    /// Answer 400 idempotency_key_required to a request without an Idempotency-Key on: no
    /// route (none), Tier 1 routes (tier1: orders, rolls, closes, reset) or every instrumented
    /// route (all). Watch raptor_idempotency_keyless_requests_total before raising it.
    #[arg(
        long,
        env = "IDEMPOTENCY_REQUIRE_KEY",
        value_name = "IDEMPOTENCY_REQUIRE_KEY",
        value_enum,
        default_value = "none",
        global = true
    )]
    pub idempotency_require_key: RequireKeyLevel,

    /// Keys that encrypt stored idempotent responses at rest: `kid:base64key,…`, each key 32
    /// bytes (`openssl rand -base64 32`); the first encrypts, all decrypt. Unset: responses are
    /// stored as plain JSON (serve warns). Rotate by putting a new key first, then run
    /// `raptor idempotency reencrypt` before removing the old one.
    #[arg(
        long,
        env = "RAPTOR_RESPONSE_KEYS",
        value_name = "RAPTOR_RESPONSE_KEYS",
        global = true,
        hide_env_values = true
    )]
    pub response_keys: Option<Secret>,

    /// Idempotency kill switch default (1 on, 0 passthrough); operators can override it at run time.
    #[arg(long, env = "FLAG_IDEMPOTENCY_MIDDLEWARE", value_name = "FLAG_IDEMPOTENCY_MIDDLEWARE",
          default_value = "1", value_parser = parse_flag, action = clap::ArgAction::Set, global = true)]
    pub flag_idempotency_middleware: bool,

    /// Run `idempotency cleanup` inside `serve` every N seconds (bounded batches, SKIP
    /// LOCKED); 0 turns it off.
    #[arg(long, env = "RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS",
          value_name = "RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(0..), global = true)]
    pub idempotency_cleanup_interval_secs: u64,
}

impl IdempotencyArgs {
    /// The keys of `RAPTOR_RESPONSE_KEYS` (none when unset or blank). The error names the
    /// variable and the entry, never the key material.
    pub fn response_keys(&self) -> anyhow::Result<ResponseKeys> {
        let text = self.response_keys.as_ref().map_or("", Secret::expose);
        Ok(ResponseKeys::parse(text)?)
    }

    /// `IDEMPOTENCY_STORE_TIMEOUT_MS`, or its default for a request timeout of `request_ms`.
    pub fn store_timeout_ms(&self, request_ms: u64) -> u64 {
        self.idempotency_store_timeout_ms
            .unwrap_or_else(|| super::follow(2_000, request_ms, 4))
    }

    /// How long a claim may take, for a request timeout of `request_secs`.
    pub fn store_timeout(&self, request_secs: u64) -> Duration {
        Duration::from_millis(self.store_timeout_ms(request_secs.saturating_mul(1000)))
    }

    /// `IDEMPOTENCY_STALE_AFTER_SECS`, or its default for a request timeout of
    /// `request_secs`.
    pub fn stale_after_secs(&self, request_secs: u64) -> u64 {
        self.idempotency_stale_after_secs
            .unwrap_or(request_secs.max(30))
    }

    /// The idempotency service's settings for a request timeout of `request_secs`.
    pub fn config(&self, request_secs: u64) -> anyhow::Result<IdempotencyConfig> {
        Ok(IdempotencyConfig {
            stale_after: Duration::from_secs(self.stale_after_secs(request_secs)),
            store_timeout: self.store_timeout(request_secs),
            flag_default: self.flag_idempotency_middleware,
            response_keys: self.response_keys()?,
            require_key: self.idempotency_require_key.into(),
        })
    }
}
