//! Postgres: the URL and pool of business transactions, the idempotency store's own pool, the
//! timeouts every session carries and how they reach Postgres (directly or through PgBouncer).

use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};

use super::Secret;

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

/// `DATABASE_URL`, `RAPTOR_DB_POOL_SIZE`, `RAPTOR_DB_LOCK_TIMEOUT_MS`,
/// `RAPTOR_DB_STATEMENT_TIMEOUT_MS`, `RAPTOR_DB_STATEMENT_CACHE`, `RAPTOR_DB_SESSION_SETTINGS`,
/// `RAPTOR_DB_POOL_MODE`, `IDEMPOTENCY_STORE_DATABASE_URL`, `RAPTOR_LISTEN_DATABASE_URL`.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Postgres connection URL (required by every command that touches the database).
    #[arg(
        long,
        env = "DATABASE_URL",
        value_name = "DATABASE_URL",
        global = true,
        hide_env_values = true
    )]
    pub database_url: Option<Secret>,

    /// Maximum Postgres connections in the pool.
    #[arg(long, env = "RAPTOR_DB_POOL_SIZE", value_name = "RAPTOR_DB_POOL_SIZE",
          default_value_t = 20, value_parser = clap::value_parser!(u32).range(2..), global = true)]
    pub db_pool_size: u32,

    /// Postgres `lock_timeout` of every business transaction, in ms (below the request
    /// timeout); when it fires the request answers 503 database_busy and rolls back. Default:
    /// 5000, or a third of RAPTOR_REQUEST_TIMEOUT_SECS when that is less.
    #[arg(long, env = "RAPTOR_DB_LOCK_TIMEOUT_MS", value_name = "RAPTOR_DB_LOCK_TIMEOUT_MS",
          value_parser = clap::value_parser!(u64).range(1..=3_600_000), global = true)]
    pub db_lock_timeout_ms: Option<u64>,

    /// Postgres `statement_timeout` of every business statement, in ms (below the request
    /// timeout); when it fires the request answers 503 database_busy and rolls back. Default:
    /// 10000, or half of RAPTOR_REQUEST_TIMEOUT_SECS when that is less.
    #[arg(long, env = "RAPTOR_DB_STATEMENT_TIMEOUT_MS", value_name = "RAPTOR_DB_STATEMENT_TIMEOUT_MS",
          value_parser = clap::value_parser!(u64).range(1..=3_600_000), global = true)]
    pub db_statement_timeout_ms: Option<u64>,

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

    /// Postgres URL of the trade-updates listener's one session (`LISTEN`): the same database
    /// as DATABASE_URL, reached directly (or through a pooler in session mode). Required with
    /// RAPTOR_DB_POOL_MODE=transaction: PgBouncer in transaction mode cannot hold a `LISTEN`.
    /// Unset: DATABASE_URL.
    #[arg(
        long,
        env = "RAPTOR_LISTEN_DATABASE_URL",
        value_name = "RAPTOR_LISTEN_DATABASE_URL",
        global = true,
        hide_env_values = true,
        value_parser = parse_postgres_url
    )]
    pub listen_database_url: Option<Secret>,
}

/// A Postgres URL, checked when the settings are read (kept secret: it may hold a password).
fn parse_postgres_url(text: &str) -> Result<Secret, String> {
    text.parse::<sqlx::postgres::PgConnectOptions>()
        .map_err(|err| format!("not a Postgres URL: {err}"))?;
    Ok(Secret::from_str(text).unwrap_or_else(|never| match never {}))
}

impl DatabaseArgs {
    /// `DATABASE_URL`, required by every command that touches the database.
    pub fn url(&self) -> anyhow::Result<&str> {
        self.database_url
            .as_ref()
            .map(Secret::expose)
            .context("DATABASE_URL is required (e.g. postgres://postgres@127.0.0.1:5432/raptor)")
    }

    /// Whether the pools' session settings come from the roles (PgBouncer).
    pub fn role_settings(&self) -> bool {
        self.db_session_settings == SessionSettings::Role
    }

    /// `RAPTOR_DB_LOCK_TIMEOUT_MS`, or its default for a request timeout of `request_ms`.
    pub fn lock_timeout_ms(&self, request_ms: u64) -> u64 {
        self.db_lock_timeout_ms
            .unwrap_or_else(|| super::follow(5_000, request_ms, 3))
    }

    /// `RAPTOR_DB_STATEMENT_TIMEOUT_MS`, or its default for a request timeout of `request_ms`.
    pub fn statement_timeout_ms(&self, request_ms: u64) -> u64 {
        self.db_statement_timeout_ms
            .unwrap_or_else(|| super::follow(10_000, request_ms, 2))
    }

    /// The pools' settings ([`raptor_db::pool`]) for a request timeout of `request_ms`; the
    /// store pool waits `store_timeout` at most.
    pub fn pool_settings(
        &self,
        request_ms: u64,
        store_timeout: Duration,
    ) -> anyhow::Result<raptor_db::PoolSettings> {
        Ok(raptor_db::PoolSettings {
            url: self.url()?.to_owned(),
            size: self.db_pool_size,
            lock_timeout: Duration::from_millis(self.lock_timeout_ms(request_ms)),
            statement_timeout: Duration::from_millis(self.statement_timeout_ms(request_ms)),
            statement_cache: usize::try_from(self.db_statement_cache).unwrap_or(usize::MAX),
            // Just above the request timeout: no request of ours is idle in a transaction
            // longer than it runs.
            idle_in_transaction: Duration::from_millis(request_ms.saturating_add(5_000)),
            session_settings: match self.db_session_settings {
                SessionSettings::Connect => raptor_db::SessionSettings::Connect,
                SessionSettings::Role => raptor_db::SessionSettings::Role,
            },
            store: raptor_db::StoreSettings {
                url: self
                    .idempotency_store_database_url
                    .as_ref()
                    .map(|url| url.expose().to_owned()),
                timeout: store_timeout,
            },
        })
    }
}
