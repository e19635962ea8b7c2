//! Configuration: environment only (a `.env` file is read in development). Every variable is a
//! clap argument with `env = "…"`, so `raptor --help` documents them all and a bad value is a
//! clear start-up error naming the variable.
//!
//! `DATABASE_URL`, `RAPTOR_ADDR`, `RAPTOR_REQUEST_TIMEOUT_SECS`, `IDEMPOTENCY_STALE_AFTER_SECS`,
//! `IDEMPOTENCY_STORE_TIMEOUT_MS`, `FLAG_IDEMPOTENCY_MIDDLEWARE`, `MBT_NEW_ORDERS_DISABLED`,
//! `RAPTOR_PAPER_STARTING_CASH`, `RAPTOR_FEE_PER_CONTRACT`, `RAPTOR_FEE_PER_SHARE`,
//! `RAPTOR_FEE_MIN_PER_ORDER`, `RAPTOR_DB_POOL_SIZE`, `RAPTOR_CORS_ORIGINS`,
//! `RAPTOR_LOG_FORMAT`, `RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS`, `RAPTOR_MAX_OPEN_ORDERS`,
//! `RAPTOR_ORDER_EXPIRY_INTERVAL_SECS`, `RAPTOR_DB_LOCK_TIMEOUT_MS`, `RAPTOR_DB_STATEMENT_TIMEOUT_MS`,
//! `RAPTOR_ACCOUNT_WRITE_CONCURRENCY`, `RAPTOR_ACCOUNT_WRITE_WAIT_MS`, `RAPTOR_SHUTDOWN_DRAIN_SECS`,
//! `RAPTOR_SESSION_TTL_DAYS`, `RAPTOR_SESSION_KEY`,
//! `RAPTOR_AUTH_EMAIL_PER_HOUR`, `RAPTOR_AUTH_IP_PER_MINUTE`, `RAPTOR_BILLING_CONCURRENCY`,
//! `STRIPE_API_BASE`,
//! `STRIPE_SECRET_KEY`, `STRIPE_WEBHOOK_SECRET`, `STRIPE_TIMEOUT_MS`, `RAPTOR_RESPONSE_KEYS`,
//! `IDEMPOTENCY_REQUIRE_KEY`, `RAPTOR_DOCS_ASSETS`, `RAPTOR_DB_STATEMENT_CACHE`,
//! `RAPTOR_DB_SESSION_SETTINGS`, `RAPTOR_DB_POOL_MODE`, `IDEMPOTENCY_STORE_DATABASE_URL`.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use raptor_api::sessions::SessionKey;
use raptor_api::ApiConfig;
use raptor_db::{PoolSettings, StoreSettings};
use raptor_idempotency::{IdempotencyConfig, RequireKey, ResponseKeys};
use rust_decimal::Decimal;
use sqlx::PgPool;

/// A secret string: usable, never printed by `Debug`.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    /// The secret itself.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// Log output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (production).
    Json,
    /// Human-readable (development).
    Pretty,
}

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

/// `RAPTOR_DB_SESSION_SETTINGS`: how the pools' session settings (`lock_timeout`,
/// `statement_timeout`, and the store pool's `synchronous_commit=off`) reach Postgres.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SessionSettings {
    /// Sent as the startup `options` parameter of every connection (a direct connection).
    Connect,
    /// Nothing is sent: the settings are the roles' own (`ALTER ROLE … SET`), checked against
    /// the configuration at start-up. For PgBouncer in transaction pooling mode, which does
    /// not forward startup options (docs/SCALING.md).
    Role,
}

/// `RAPTOR_DB_POOL_MODE`: what a pooled connection is on the Postgres side
/// ([`raptor_db::mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PoolMode {
    /// A server session of its own (Postgres directly, or PgBouncer session pooling): named,
    /// cached statements, lone statements in autocommit.
    Session,
    /// A server session for one transaction at a time (PgBouncer transaction pooling): unnamed
    /// statements, every one inside a transaction block. Needs `RAPTOR_DB_SESSION_SETTINGS=role`.
    Transaction,
}

/// A boolean flag as the environment writes it: `1`/`0`, `true`/`false`, `on`/`off`.
fn parse_session_key(text: &str) -> Result<SessionKey, String> {
    SessionKey::parse(text).map_err(|err| err.to_string())
}

fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        other => Err(format!("expected 1 or 0 (true/false), got {other:?}")),
    }
}

fn parse_origin(text: &str) -> Result<String, String> {
    let origin = text.trim();
    if origin.is_empty() {
        return Ok(String::new());
    }
    let well_formed = (origin.starts_with("http://") || origin.starts_with("https://"))
        && !origin.contains('*')
        && !origin.ends_with('/')
        && origin.chars().all(|c| c.is_ascii_graphic());
    if well_formed {
        Ok(origin.to_owned())
    } else {
        Err(format!(
            "{origin:?} is not an origin like https://app.example.com (no wildcards)"
        ))
    }
}

fn parse_fee(text: &str) -> Result<Decimal, String> {
    let fee = Decimal::from_str_exact(text.trim()).map_err(|e| format!("not a decimal: {e}"))?;
    if fee.is_sign_negative() {
        return Err("must be >= 0".into());
    }
    Ok(fee)
}

fn parse_cash(text: &str) -> Result<Decimal, String> {
    let cash = Decimal::from_str_exact(text.trim()).map_err(|e| format!("not a decimal: {e}"))?;
    if cash.is_sign_negative() || cash.scale() > 2 {
        return Err("must be >= 0 with at most 2 decimal places".into());
    }
    Ok(cash)
}

/// Every setting.
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Postgres connection URL (required by every command that touches the database).
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    pub database_url: Option<Secret>,

    /// Address `raptor serve` listens on.
    #[arg(
        long,
        env = "RAPTOR_ADDR",
        value_name = "RAPTOR_ADDR",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub addr: SocketAddr,

    /// Request timeout in seconds; a request past it is answered 503 and rolled back.
    #[arg(long, env = "RAPTOR_REQUEST_TIMEOUT_SECS", value_name = "RAPTOR_REQUEST_TIMEOUT_SECS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600), global = true)]
    pub request_timeout_secs: u64,

    /// An in-flight idempotency key older than this is abandoned (must be >= the request timeout).
    #[arg(long, env = "IDEMPOTENCY_STALE_AFTER_SECS", value_name = "IDEMPOTENCY_STALE_AFTER_SECS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400), global = true)]
    pub idempotency_stale_after_secs: u64,

    /// How long a claim may take before fail-closed routes answer 503.
    #[arg(long, env = "IDEMPOTENCY_STORE_TIMEOUT_MS", value_name = "IDEMPOTENCY_STORE_TIMEOUT_MS",
          default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=600_000), global = true)]
    pub idempotency_store_timeout_ms: u64,

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

    /// Refuse new orders, rolls and closes with 503 (cancels still work).
    #[arg(long, env = "MBT_NEW_ORDERS_DISABLED", value_name = "MBT_NEW_ORDERS_DISABLED",
          default_value = "0", value_parser = parse_flag, action = clap::ArgAction::Set, global = true)]
    pub mbt_new_orders_disabled: bool,

    /// Cash of a new or reset paper account.
    #[arg(long, env = "RAPTOR_PAPER_STARTING_CASH", value_name = "RAPTOR_PAPER_STARTING_CASH",
          default_value = "100000.00", value_parser = parse_cash, global = true)]
    pub paper_starting_cash: Decimal,

    /// Paper commission per option contract (Alpaca paper: 0).
    #[arg(long, env = "RAPTOR_FEE_PER_CONTRACT", value_name = "RAPTOR_FEE_PER_CONTRACT",
          default_value = "0", value_parser = parse_fee, global = true)]
    pub fee_per_contract: Decimal,

    /// Paper commission per share (Alpaca paper: 0).
    #[arg(long, env = "RAPTOR_FEE_PER_SHARE", value_name = "RAPTOR_FEE_PER_SHARE",
          default_value = "0", value_parser = parse_fee, global = true)]
    pub fee_per_share: Decimal,

    /// Minimum commission of an order that is charged anything.
    #[arg(long, env = "RAPTOR_FEE_MIN_PER_ORDER", value_name = "RAPTOR_FEE_MIN_PER_ORDER",
          default_value = "0", value_parser = parse_fee, global = true)]
    pub fee_min_per_order: Decimal,

    /// Maximum Postgres connections in the pool.
    #[arg(long, env = "RAPTOR_DB_POOL_SIZE", value_name = "RAPTOR_DB_POOL_SIZE",
          default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..), global = true)]
    pub db_pool_size: u32,

    /// Allowed CORS origins for the Antlers web app, comma-separated (none by default); each a
    /// full origin such as `https://app.example.com` (no `*`).
    #[arg(
        long,
        env = "RAPTOR_CORS_ORIGINS",
        value_name = "RAPTOR_CORS_ORIGINS",
        value_delimiter = ',',
        value_parser = parse_origin,
        global = true
    )]
    pub cors_origins: Vec<String>,

    /// Log format.
    #[arg(
        long,
        env = "RAPTOR_LOG_FORMAT",
        value_name = "RAPTOR_LOG_FORMAT",
        value_enum,
        default_value = "pretty",
        global = true
    )]
    pub log_format: LogFormat,

    /// Run `idempotency cleanup` inside `serve` every N seconds (bounded batches, SKIP
    /// LOCKED); 0 turns it off.
    #[arg(long, env = "RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS",
          value_name = "RAPTOR_IDEMPOTENCY_CLEANUP_INTERVAL_SECS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(0..), global = true)]
    pub idempotency_cleanup_interval_secs: u64,

    /// On SIGTERM/SIGINT, answer `/readyz` 503 for this many seconds while still serving, so
    /// load balancers stop routing here; then stop accepting and let requests in flight finish.
    #[arg(long, env = "RAPTOR_SHUTDOWN_DRAIN_SECS", value_name = "RAPTOR_SHUTDOWN_DRAIN_SECS",
          default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=300), global = true)]
    pub shutdown_drain_secs: u64,

    /// Postgres `lock_timeout` of every business transaction, in ms (below the request
    /// timeout); when it fires the request answers 503 database_busy and rolls back.
    #[arg(long, env = "RAPTOR_DB_LOCK_TIMEOUT_MS", value_name = "RAPTOR_DB_LOCK_TIMEOUT_MS",
          default_value_t = 5_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000), global = true)]
    pub db_lock_timeout_ms: u64,

    /// Postgres `statement_timeout` of every business statement, in ms (below the request
    /// timeout); when it fires the request answers 503 database_busy and rolls back.
    #[arg(long, env = "RAPTOR_DB_STATEMENT_TIMEOUT_MS", value_name = "RAPTOR_DB_STATEMENT_TIMEOUT_MS",
          default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000), global = true)]
    pub db_statement_timeout_ms: u64,

    /// Prepared statements cached per connection (sqlx's statement cache), at least 1. No 0:
    /// with its cache off sqlx still names every statement and never closes it, so each
    /// execution would leave one more prepared statement on the server session. For PgBouncer
    /// in transaction pooling use RAPTOR_DB_POOL_MODE=transaction (unnamed statements).
    #[arg(long, env = "RAPTOR_DB_STATEMENT_CACHE", value_name = "RAPTOR_DB_STATEMENT_CACHE",
          default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000), global = true)]
    pub db_statement_cache: u64,

    /// Where the pools' session settings come from: `connect` sends them with every connection
    /// (startup options); `role` sends nothing and checks at start-up that the roles of
    /// DATABASE_URL and IDEMPOTENCY_STORE_DATABASE_URL carry them (`ALTER ROLE … SET`), for
    /// PgBouncer in transaction pooling mode.
    #[arg(
        long,
        env = "RAPTOR_DB_SESSION_SETTINGS",
        value_name = "RAPTOR_DB_SESSION_SETTINGS",
        value_enum,
        default_value = "connect",
        global = true
    )]
    pub db_session_settings: SessionSettings,

    /// `session` when each pooled connection is a Postgres session of its own (direct, or
    /// PgBouncer session pooling); `transaction` behind PgBouncer in transaction pooling mode:
    /// statements are unnamed and each runs inside a transaction block, at the cost of more
    /// round trips (docs/SCALING.md). `transaction` needs RAPTOR_DB_SESSION_SETTINGS=role.
    #[arg(
        long,
        env = "RAPTOR_DB_POOL_MODE",
        value_name = "RAPTOR_DB_POOL_MODE",
        value_enum,
        default_value = "session",
        global = true
    )]
    pub db_pool_mode: PoolMode,

    /// Postgres URL of the idempotency store's own pool (claims, settling keys, the flag): the
    /// same database as DATABASE_URL, usually another role. Unset: DATABASE_URL. Required with
    /// RAPTOR_DB_SESSION_SETTINGS=role.
    #[arg(
        long,
        env = "IDEMPOTENCY_STORE_DATABASE_URL",
        value_name = "IDEMPOTENCY_STORE_DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    pub idempotency_store_database_url: Option<Secret>,

    /// Concurrent writes per account in one process (orders, rolls, closes, resets, cancels).
    #[arg(long, env = "RAPTOR_ACCOUNT_WRITE_CONCURRENCY", value_name = "RAPTOR_ACCOUNT_WRITE_CONCURRENCY",
          default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1000), global = true)]
    pub account_write_concurrency: u32,

    /// How long a write waits for its account's turn before 429 rate_limited, in ms.
    #[arg(long, env = "RAPTOR_ACCOUNT_WRITE_WAIT_MS", value_name = "RAPTOR_ACCOUNT_WRITE_WAIT_MS",
          default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(0..=600_000), global = true)]
    pub account_write_wait_ms: u64,

    /// Expire day orders after the session close (and orders on expired options) inside
    /// `serve` every N seconds; 0 turns the schedule off (`raptor orders expire` still works,
    /// and touching an account expires its orders anyway).
    #[arg(long, env = "RAPTOR_ORDER_EXPIRY_INTERVAL_SECS", value_name = "RAPTOR_ORDER_EXPIRY_INTERVAL_SECS",
          default_value_t = 60, value_parser = clap::value_parser!(u64).range(0..=86_400), global = true)]
    pub order_expiry_interval_secs: u64,

    /// Open (resting) orders allowed per account; past it, 422 too_many_open_orders.
    #[arg(long, env = "RAPTOR_MAX_OPEN_ORDERS", value_name = "RAPTOR_MAX_OPEN_ORDERS",
          default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=100_000), global = true)]
    pub max_open_orders: u32,

    /// Lifetime in days of a session made by sign-up or login.
    #[arg(long, env = "RAPTOR_SESSION_TTL_DAYS", value_name = "RAPTOR_SESSION_TTL_DAYS",
          default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650), global = true)]
    pub session_ttl_days: u64,

    /// The server key a sign-in link's session token is derived with (32 bytes, base64:
    /// `openssl rand -base64 32`), so that every verification of one link answers the same
    /// session. The same on every replica. Unset: a random key per process (serve warns: a
    /// retried verification on another replica gets a session of its own).
    #[arg(long, env = "RAPTOR_SESSION_KEY", value_name = "RAPTOR_SESSION_KEY",
          value_parser = parse_session_key, global = true, hide_env_values = true)]
    pub session_key: Option<SessionKey>,

    /// Register and login requests allowed per email address per hour (then 429).
    #[arg(long, env = "RAPTOR_AUTH_EMAIL_PER_HOUR", value_name = "RAPTOR_AUTH_EMAIL_PER_HOUR",
          default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub auth_email_per_hour: u32,

    /// Register and login requests allowed per client IP address per minute (then 429).
    #[arg(long, env = "RAPTOR_AUTH_IP_PER_MINUTE", value_name = "RAPTOR_AUTH_IP_PER_MINUTE",
          default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub auth_ip_per_minute: u32,

    /// Stripe-calling requests in flight at once in this process; past it, 503 billing_busy.
    #[arg(long, env = "RAPTOR_BILLING_CONCURRENCY", value_name = "RAPTOR_BILLING_CONCURRENCY",
          default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1000), global = true)]
    pub billing_concurrency: u32,

    /// Deadline of one Stripe API call in milliseconds (must be below the request timeout).
    #[arg(long, env = "STRIPE_TIMEOUT_MS", value_name = "STRIPE_TIMEOUT_MS",
          default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=600_000), global = true)]
    pub stripe_timeout_ms: u64,

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

    /// Directory of Swagger UI's files (the `swagger-ui-dist` npm package, installed by
    /// `npm ci --omit=dev`) served at `/docs/assets/`; relative paths are from the working
    /// directory. When it holds no Swagger UI, `/docs` answers a plain route list instead.
    #[arg(
        long,
        env = "RAPTOR_DOCS_ASSETS",
        value_name = "RAPTOR_DOCS_ASSETS",
        default_value = raptor_api::state::DEFAULT_DOCS_ASSETS,
        global = true
    )]
    pub docs_assets: std::path::PathBuf,
}

impl Config {
    /// Checks relations between settings.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.db_session_settings == SessionSettings::Role
            && self.idempotency_store_database_url.is_none()
        {
            bail!(
                "RAPTOR_DB_SESSION_SETTINGS=role needs IDEMPOTENCY_STORE_DATABASE_URL: the \
                 idempotency store's settings (synchronous_commit=off, short timeouts) come from \
                 a role of its own"
            );
        }
        if self.db_pool_mode == PoolMode::Transaction && !self.role_settings() {
            bail!(
                "RAPTOR_DB_POOL_MODE=transaction needs RAPTOR_DB_SESSION_SETTINGS=role: a \
                 transaction pooler does not forward the startup options that `connect` sends"
            );
        }
        if self.idempotency_stale_after_secs < self.request_timeout_secs {
            bail!(
                "IDEMPOTENCY_STALE_AFTER_SECS ({}) must be >= RAPTOR_REQUEST_TIMEOUT_SECS ({}): \
                 an attempt must not be declared stale while it may still be running",
                self.idempotency_stale_after_secs,
                self.request_timeout_secs
            );
        }
        if self.stripe_timeout_ms >= self.request_timeout_secs.saturating_mul(1000) {
            bail!(
                "STRIPE_TIMEOUT_MS ({}) must be below RAPTOR_REQUEST_TIMEOUT_SECS ({} s): a Stripe \
                 call must give up before the request does",
                self.stripe_timeout_ms,
                self.request_timeout_secs
            );
        }
        let request_ms = self.request_timeout_secs.saturating_mul(1000);
        for (name, value) in [
            ("RAPTOR_DB_LOCK_TIMEOUT_MS", self.db_lock_timeout_ms),
            (
                "RAPTOR_DB_STATEMENT_TIMEOUT_MS",
                self.db_statement_timeout_ms,
            ),
        ] {
            if value >= request_ms {
                bail!(
                    "{name} ({value}) must be below RAPTOR_REQUEST_TIMEOUT_SECS ({} s): the \
                     database must give up before the request does",
                    self.request_timeout_secs
                );
            }
        }
        self.response_keys()?;
        let base = self.stripe_api_base.trim();
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            bail!("STRIPE_API_BASE must be an http(s) URL, got {base:?}");
        }
        Ok(())
    }

    /// The API's settings.
    pub fn api(&self) -> ApiConfig {
        ApiConfig {
            new_orders_disabled: self.mbt_new_orders_disabled,
            paper_starting_cash: self.paper_starting_cash,
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            cors_origins: self
                .cors_origins
                .iter()
                .map(|o| o.trim().to_owned())
                .filter(|o| !o.is_empty())
                .collect(),
            fees: raptor_engine::FeeSchedule {
                per_contract: self.fee_per_contract,
                per_share: self.fee_per_share,
                min_per_order: self.fee_min_per_order,
            },
            max_open_orders: usize::try_from(self.max_open_orders).unwrap_or(usize::MAX),
            account_write_concurrency: usize::try_from(self.account_write_concurrency)
                .unwrap_or(usize::MAX),
            account_write_wait: Duration::from_millis(self.account_write_wait_ms),
            session_ttl: Duration::from_secs(self.session_ttl_days * 24 * 60 * 60),
            session_key: self.session_key.clone().unwrap_or_else(SessionKey::random),
            auth_limits: raptor_api::AuthLimits {
                per_email_per_hour: self.auth_email_per_hour,
                per_ip_per_minute: self.auth_ip_per_minute,
            },
            billing: raptor_api::BillingConfig {
                api_base: self.stripe_api_base.trim().trim_end_matches('/').to_owned(),
                secret_key: self
                    .stripe_secret_key
                    .as_ref()
                    .map(|s| s.expose().trim().to_owned())
                    .filter(|s| !s.is_empty()),
                webhook_secret: self
                    .stripe_webhook_secret
                    .as_ref()
                    .map(|s| s.expose().trim().to_owned())
                    .filter(|s| !s.is_empty()),
                timeout: Duration::from_millis(self.stripe_timeout_ms),
                concurrency: usize::try_from(self.billing_concurrency).unwrap_or(usize::MAX),
            },
            docs_assets: self.docs_assets.clone(),
            ..ApiConfig::default()
        }
    }

    /// The keys of `RAPTOR_RESPONSE_KEYS` (none when unset or blank). The error names the
    /// variable and the entry, never the key material.
    pub fn response_keys(&self) -> anyhow::Result<ResponseKeys> {
        let text = self.response_keys.as_ref().map_or("", Secret::expose);
        Ok(ResponseKeys::parse(text)?)
    }

    /// The idempotency settings.
    pub fn idempotency(&self) -> anyhow::Result<IdempotencyConfig> {
        Ok(IdempotencyConfig {
            stale_after: Duration::from_secs(self.idempotency_stale_after_secs),
            store_timeout: Duration::from_millis(self.idempotency_store_timeout_ms),
            flag_default: self.flag_idempotency_middleware,
            response_keys: self.response_keys()?,
            require_key: self.idempotency_require_key.into(),
        })
    }

    fn database_url(&self) -> anyhow::Result<&str> {
        self.database_url
            .as_ref()
            .map(Secret::expose)
            .context("DATABASE_URL is required (e.g. postgres://postgres@127.0.0.1:5432/raptor)")
    }

    /// The pools' settings ([`raptor_db::pool`]).
    pub fn pool_settings(&self) -> anyhow::Result<PoolSettings> {
        Ok(PoolSettings {
            url: self.database_url()?.to_owned(),
            size: self.db_pool_size,
            lock_timeout: Duration::from_millis(self.db_lock_timeout_ms),
            statement_timeout: Duration::from_millis(self.db_statement_timeout_ms),
            statement_cache: usize::try_from(self.db_statement_cache).unwrap_or(usize::MAX),
            session_settings: match self.db_session_settings {
                SessionSettings::Connect => raptor_db::SessionSettings::Connect,
                SessionSettings::Role => raptor_db::SessionSettings::Role,
            },
            store: StoreSettings {
                url: self
                    .idempotency_store_database_url
                    .as_ref()
                    .map(|url| url.expose().to_owned()),
                timeout: Duration::from_millis(self.idempotency_store_timeout_ms),
            },
        })
    }

    /// Whether the pools' session settings come from the roles (PgBouncer).
    pub fn role_settings(&self) -> bool {
        self.db_session_settings == SessionSettings::Role
    }

    /// Connects the business pool ([`raptor_db::pool::business`]).
    pub async fn pool(&self) -> anyhow::Result<PgPool> {
        raptor_db::pool::business(&self.pool_settings()?).await
    }

    /// The idempotency store's own pool ([`raptor_db::pool::store`]).
    pub fn store_pool(&self, pool: &PgPool) -> anyhow::Result<PgPool> {
        raptor_db::pool::store(&self.pool_settings()?, pool)
    }
}
