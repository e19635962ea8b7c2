//! Configuration: environment only (a `.env` file is read in development). Every variable is a
//! clap argument with `env = "…"`, so `raptor --help` documents them all, grouped under one
//! heading per concern, and a bad value is a clear start-up error naming the variable.
//!
//! Each group is a file: `server` (HTTP), `database` (pools and their session settings),
//! `idempotency`, `trading` (the paper book), `sessions` (sign-up and sign-in), `billing`
//! (Stripe), `mail` (sign-in email) and `traces` (OpenTelemetry's `OTEL_*`). This module holds
//! what spans groups: the checks between settings and the typed settings the API and the pools
//! are built from.

mod billing;
mod database;
mod idempotency;
mod mail;
mod server;
mod sessions;
mod traces;
mod trading;

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use raptor_api::sessions::SessionKey;
use raptor_api::ApiConfig;
use raptor_db::PoolSettings;
use raptor_idempotency::{IdempotencyConfig, ResponseKeys};
use sqlx::PgPool;

pub use billing::BillingArgs;
pub use database::{DatabaseArgs, PoolMode, SessionSettings};
pub use idempotency::{IdempotencyArgs, RequireKeyLevel};
pub use mail::MailArgs;
pub use server::{ForwardedHeaderArg, LogFormat, RaptorEnv, ServerArgs};
pub use sessions::SessionArgs;
pub use traces::{OtlpProtocolArg, SamplerArg, TraceArgs, TracesExporterArg};
pub use trading::TradingArgs;

/// A secret setting: `secrecy`'s string (wiped from memory when dropped, redacted by `Debug`),
/// read by clap from the environment like any other value.
#[derive(Clone)]
pub struct Secret(secrecy::SecretString);

impl Secret {
    /// The secret itself.
    pub fn expose(&self) -> &str {
        secrecy::ExposeSecret::expose_secret(&self.0)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(secrecy::SecretString::from(s)))
    }
}

/// Whether `url` is an absolute http(s) URL with a host part, printable ASCII only: the check
/// shared by the URL settings (each adds its own rules).
fn is_http_url(url: &str) -> bool {
    (url.starts_with("https://") || url.starts_with("http://"))
        && url.len() > "https://".len()
        && url.chars().all(|c| c.is_ascii_graphic())
}

/// A boolean flag as the environment writes it: `1`/`0`, `true`/`false`, `on`/`off`.
fn parse_flag(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        other => Err(format!("expected 1 or 0 (true/false), got {other:?}")),
    }
}

/// The default of a timeout that must end before the request does: `default` ms, or the
/// request timeout (`request_ms`) divided by `share` when that is less (at least 1 ms).
fn follow(default: u64, request_ms: u64, share: u64) -> u64 {
    default.min(request_ms / share).max(1)
}

/// Every setting, by group (each a `--help` heading).
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// The HTTP server.
    #[command(flatten, next_help_heading = "Server")]
    pub server: ServerArgs,
    /// Postgres.
    #[command(flatten, next_help_heading = "Database")]
    pub database: DatabaseArgs,
    /// The Idempotency-Key mechanism.
    #[command(flatten, next_help_heading = "Idempotency")]
    pub idempotency: IdempotencyArgs,
    /// The paper book.
    #[command(flatten, next_help_heading = "Paper trading")]
    pub trading: TradingArgs,
    /// Sign-up and sign-in.
    #[command(flatten, next_help_heading = "Sessions")]
    pub sessions: SessionArgs,
    /// Stripe.
    #[command(flatten, next_help_heading = "Billing")]
    pub billing: BillingArgs,
    /// Sign-in email.
    #[command(flatten, next_help_heading = "Mail")]
    pub mail: MailArgs,
    /// Traces (OpenTelemetry).
    #[command(flatten, next_help_heading = "Traces")]
    pub traces: TraceArgs,
}

impl Config {
    /// The request timeout in milliseconds.
    pub fn request_ms(&self) -> u64 {
        self.server.request_timeout_secs.saturating_mul(1000)
    }

    /// Checks relations between settings. Timeouts that must end before the request are
    /// checked only when set explicitly (their defaults follow the request timeout), and every
    /// such conflict is listed in one error.
    pub fn validate(&self) -> anyhow::Result<()> {
        let (server, database, keys) = (&self.server, &self.database, &self.idempotency);
        if database.db_session_settings == SessionSettings::Role
            && database.idempotency_store_database_url.is_none()
        {
            bail!(
                "RAPTOR_DB_SESSION_SETTINGS=role needs IDEMPOTENCY_STORE_DATABASE_URL: the \
                 idempotency store's settings (synchronous_commit=off, short timeouts) come from \
                 a role of its own"
            );
        }
        if database.db_pool_mode == PoolMode::Transaction && !database.role_settings() {
            bail!(
                "RAPTOR_DB_POOL_MODE=transaction needs RAPTOR_DB_SESSION_SETTINGS=role: a \
                 transaction pooler does not forward the startup options that `connect` sends"
            );
        }
        if database.db_pool_mode == PoolMode::Transaction && database.listen_database_url.is_none()
        {
            bail!(
                "RAPTOR_DB_POOL_MODE=transaction needs RAPTOR_LISTEN_DATABASE_URL (Postgres' own \
                 address): the trade-updates listener's LISTEN would go through the pooler, which \
                 hands its session to other clients, whose queries then fail on its notifications"
            );
        }
        if let Some(metrics) = server.metrics_addr {
            if metrics == server.addr && metrics.port() != 0 {
                bail!(
                    "RAPTOR_METRICS_ADDR ({metrics}) must differ from RAPTOR_ADDR: it is a \
                     listener of its own (unset it to serve /metrics on the API listener)"
                );
            }
        }
        let request_ms = self.request_ms();
        let mut conflicts: Vec<String> = keys
            .idempotency_stale_after_secs
            .filter(|stale| *stale < server.request_timeout_secs)
            .map(|stale| {
                format!(
                    "IDEMPOTENCY_STALE_AFTER_SECS ({stale}) must be at least it: an attempt must \
                     not be declared stale while it may still be running"
                )
            })
            .into_iter()
            .collect();
        conflicts.extend(
            [
                (
                    "STRIPE_TIMEOUT_MS",
                    self.billing.stripe_timeout_ms,
                    "a Stripe call must give up before the request does",
                ),
                (
                    "IDEMPOTENCY_STORE_TIMEOUT_MS",
                    keys.idempotency_store_timeout_ms,
                    "a claim must give up before the request does",
                ),
                (
                    "RAPTOR_DB_LOCK_TIMEOUT_MS",
                    database.db_lock_timeout_ms,
                    "the database must give up before the request does",
                ),
                (
                    "RAPTOR_DB_STATEMENT_TIMEOUT_MS",
                    database.db_statement_timeout_ms,
                    "the database must give up before the request does",
                ),
            ]
            .into_iter()
            .filter_map(|(name, value, why)| {
                let value = value.filter(|v| *v >= request_ms)?;
                Some(format!("{name} ({value}) must be below it: {why}"))
            }),
        );
        if !conflicts.is_empty() {
            bail!(
                "settings conflict with RAPTOR_REQUEST_TIMEOUT_SECS ({} s); unset them to take \
                 defaults that follow it, or lower them: {}",
                server.request_timeout_secs,
                conflicts.join("; ")
            );
        }
        keys.response_keys()?;
        self.mail.validate()?;
        let base = self.billing.stripe_api_base.trim();
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            bail!("STRIPE_API_BASE must be an http(s) URL, got {base:?}");
        }
        Ok(())
    }

    /// What `raptor serve` refuses to start without in production (`RAPTOR_ENV`), every
    /// problem in one message; nothing in development.
    pub fn check_production(&self) -> anyhow::Result<()> {
        if self.server.environment == RaptorEnv::Development {
            return Ok(());
        }
        let mut missing = Vec::new();
        if self.mail.smtp_url.is_none() {
            missing.push("RAPTOR_SMTP_URL is not set: sign-in email cannot be sent");
        }
        if self.idempotency.response_keys()?.current_kid().is_none() {
            missing.push(
                "RAPTOR_RESPONSE_KEYS is not set: stored responses would be kept in plain text",
            );
        }
        if self.sessions.session_key.is_none() {
            missing.push(
                "RAPTOR_SESSION_KEY is not set: a retried sign-in on another replica would get \
                 another session",
            );
        }
        if self.billing.stripe_secret_key.is_some() && self.billing.stripe_webhook_secret.is_none()
        {
            missing.push(
                "STRIPE_SECRET_KEY is set without STRIPE_WEBHOOK_SECRET: Stripe's webhooks could \
                 not be verified",
            );
        }
        if !missing.is_empty() {
            bail!(
                "RAPTOR_ENV=production (the default) refuses to start: {} (set them, or \
                 RAPTOR_ENV=development on a developer's machine)",
                missing.join("; ")
            );
        }
        Ok(())
    }

    /// Warnings for a production start: a database URL whose TLS does not verify the server
    /// (`sslmode` weaker than `verify-ca`) to a host that is not this machine.
    pub fn production_warnings(&self) -> Vec<String> {
        if self.server.environment == RaptorEnv::Development {
            return Vec::new();
        }
        let mut urls = vec![("DATABASE_URL", self.database.url().ok().map(str::to_owned))];
        urls.push((
            "IDEMPOTENCY_STORE_DATABASE_URL",
            self.database
                .idempotency_store_database_url
                .as_ref()
                .map(|url| url.expose().to_owned()),
        ));
        urls.push((
            "RAPTOR_LISTEN_DATABASE_URL",
            self.database
                .listen_database_url
                .as_ref()
                .map(|url| url.expose().to_owned()),
        ));
        urls.into_iter()
            .filter_map(|(name, url)| {
                let url = url?;
                let options: sqlx::postgres::PgConnectOptions = url.parse().ok()?;
                let weak = !matches!(
                    options.get_ssl_mode(),
                    sqlx::postgres::PgSslMode::VerifyCa | sqlx::postgres::PgSslMode::VerifyFull
                );
                let host = options.get_host();
                let local = host.starts_with('/')
                    || host == "localhost"
                    || host
                        .trim_start_matches('[')
                        .trim_end_matches(']')
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                (weak && !local).then(|| {
                    format!(
                        "{name} reaches {host} with sslmode weaker than verify-ca: the server's \
                         certificate is not checked, so anyone on the path can pose as it"
                    )
                })
            })
            .collect()
    }

    /// The API's settings.
    pub fn api(&self) -> ApiConfig {
        let trading = &self.trading;
        ApiConfig {
            new_orders_disabled: trading.mbt_new_orders_disabled,
            paper_starting_cash: trading.paper_starting_cash,
            request_timeout: Duration::from_secs(self.server.request_timeout_secs),
            cors_origins: self.server.cors_origins(),
            fees: trading.fees(),
            max_open_orders: usize::try_from(trading.max_open_orders).unwrap_or(usize::MAX),
            account_write_concurrency: usize::try_from(trading.account_write_concurrency)
                .unwrap_or(usize::MAX),
            account_write_wait: Duration::from_millis(trading.account_write_wait_ms),
            session_ttl: self.sessions.ttl(),
            session_key: self
                .sessions
                .session_key
                .clone()
                .unwrap_or_else(SessionKey::random),
            auth_limits: self.sessions.limits(),
            billing: self.billing.config(self.request_ms()),
            docs_assets: self.server.docs_assets.clone(),
            trusted_proxies: self.server.trusted_proxies(),
            public_url: self.mail.public_url(self.server.addr),
            metrics_on_api_listener: self.server.metrics_addr.is_none(),
            trade_streams: trading.trade_streams(),
            trade_streams_listen: self
                .database
                .listen_database_url
                .as_ref()
                .and_then(|url| raptor_api::trading::stream::ListenTarget::parse(url.expose())),
            ..ApiConfig::default()
        }
    }

    /// The keys of `RAPTOR_RESPONSE_KEYS` ([`IdempotencyArgs::response_keys`]).
    pub fn response_keys(&self) -> anyhow::Result<ResponseKeys> {
        self.idempotency.response_keys()
    }

    /// The idempotency settings.
    pub fn idempotency(&self) -> anyhow::Result<IdempotencyConfig> {
        self.idempotency.config(self.server.request_timeout_secs)
    }

    /// The pools' settings ([`raptor_db::pool`]).
    pub fn pool_settings(&self) -> anyhow::Result<PoolSettings> {
        self.database.pool_settings(
            self.request_ms(),
            self.idempotency
                .store_timeout(self.server.request_timeout_secs),
        )
    }

    /// Whether the pools' session settings come from the roles (PgBouncer).
    pub fn role_settings(&self) -> bool {
        self.database.role_settings()
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

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn a_secret_is_usable_and_never_printed() {
        let url = "postgres://raptor:hunter2@db.internal/raptor";
        let secret: Secret = url.parse().expect("any text");
        assert_eq!(secret.expose(), url);
        let printed = format!("{secret:?} {:?}", Some(secret.clone()));
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(printed.contains("REDACTED"), "{printed}");
    }
}
