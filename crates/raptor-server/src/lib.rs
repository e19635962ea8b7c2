#![doc = include_str!("../README.md")]

pub mod config;
mod edge;
pub mod telemetry;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use clap::{Parser, Subcommand};
use raptor_api::accounts::store as accounts;
use raptor_api::auth::Role;
use raptor_api::{ApiState, SystemClock};
use rust_decimal::Decimal;
use serde_json::json;
use tokio::net::TcpListener;

pub use config::{Config, PoolMode, RaptorEnv};

/// Raptor write API.
#[derive(Debug, Parser)]
#[command(name = "raptor", version, about)]
pub struct Cli {
    /// Settings (environment variables; flags override them).
    #[command(flatten)]
    pub config: Config,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands (README: "Other commands").
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply pending migrations, then serve HTTP until SIGTERM/SIGINT.
    Serve,
    /// Apply pending migrations and exit.
    Migrate,
    /// Users.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Service principals.
    #[command(subcommand, name = "service-tokens")]
    ServiceTokens(ServiceTokensCommand),
    /// Operator quotes.
    #[command(subcommand)]
    Quotes(QuotesCommand),
    /// The paper book's orders.
    #[command(subcommand)]
    Orders(OrdersCommand),
    /// The idempotency store.
    #[command(subcommand)]
    Idempotency(IdempotencyCommand),
    /// Data subject rights.
    #[command(subcommand)]
    Gdpr(GdprCommand),
    /// Sign-in email.
    #[command(subcommand)]
    Mail(MailCommand),
    /// Print the OpenAPI document.
    Openapi,
    /// Exit 0 when the server on RAPTOR_ADDR answers `GET /readyz` with 200 (the container's
    /// HEALTHCHECK: the image needs no curl).
    Healthcheck,
}

/// `raptor users …`
#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Create a user and its paper account; prints `{"user_id", "token"}` (the token expires
    /// like a session).
    Create {
        /// Email address.
        #[arg(long)]
        email: String,
        /// `user` or `operator`.
        #[arg(long, default_value = "user", value_parser = ["user", "operator"])]
        role: String,
        /// Days the printed token is valid (default: RAPTOR_SESSION_TTL_DAYS, like a session
        /// from sign-in). Operators' tokens expire too; service tokens do not.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=3650))]
        ttl_days: Option<u64>,
    },
}

/// `raptor service-tokens …`
#[derive(Debug, Subcommand)]
pub enum ServiceTokensCommand {
    /// Create a service token; prints `{"token"}`.
    Create {
        /// The service's name.
        #[arg(long)]
        name: String,
    },
}

/// `raptor quotes …`
#[derive(Debug, Subcommand)]
pub enum QuotesCommand {
    /// Set a symbol's bid and ask (fills resting limits it makes marketable).
    Set {
        /// Equity or OCC option symbol.
        symbol: String,
        /// Bid.
        #[arg(long)]
        bid: Decimal,
        /// Ask.
        #[arg(long)]
        ask: Decimal,
    },
}

/// `raptor orders …`
#[derive(Debug, Subcommand)]
pub enum OrdersCommand {
    /// Expire every open order that stopped being good (day orders after the session close,
    /// orders on expired options) and settle option positions past their expiration's close;
    /// prints `{"expired": N, "settled": N, "awaiting_quote": N}`.
    Expire,
}

/// `raptor idempotency …`
#[derive(Debug, Subcommand)]
pub enum IdempotencyCommand {
    /// Delete expired keys in batches; prints `{"deleted": N}`.
    Cleanup {
        /// Rows per delete statement.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..))]
        batch_size: i64,
    },
    /// Encrypt stored responses that are plain or under an older key with the current (first)
    /// key of RAPTOR_RESPONSE_KEYS, in batches; prints `{"reencrypted": N, "unreadable": M}`
    /// (unreadable rows are left as they are and logged).
    Reencrypt {
        /// Rows per transaction.
        #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(i64).range(1..))]
        batch_size: i64,
    },
}

/// `raptor gdpr …`
#[derive(Debug, Subcommand)]
pub enum GdprCommand {
    /// Erase a user and everything of theirs.
    Erase {
        /// `users.id`.
        #[arg(long)]
        user_id: i32,
    },
}

/// `raptor mail …`
#[derive(Debug, Subcommand)]
pub enum MailCommand {
    /// One pass of the mail relay (what `serve` runs every RAPTOR_MAIL_RELAY_INTERVAL_MS):
    /// sends every due message of `email_outbox`; prints `{"sent", "retried", "given_up"}`.
    Relay {
        /// Messages handled at most.
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
        limit: u64,
    },
}

/// The commit this binary was built from (`build.rs`: `RAPTOR_GIT_SHA` at build time, `git
/// rev-parse`, or `unknown`), in `raptor_build_info{git_sha}`.
pub const GIT_SHA: &str = env!("RAPTOR_GIT_SHA");

/// The `raptor` binary's whole `main`: reads `.env` (development), parses the command line,
/// starts telemetry and runs the command (the tests' copy of the binary runs this too).
pub async fn main() -> std::process::ExitCode {
    // Development convenience only: a missing .env is fine.
    let _ = dotenvy::dotenv();
    let cli = Cli::parse();
    // Only `serve` exports traces; the one-shot commands log.
    let traces = matches!(cli.command, Command::Serve).then_some(&cli.config.traces);
    let telemetry = match telemetry::init(cli.config.server.log_format, traces) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("raptor: {err:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut stdout = std::io::stdout();
    let result = run(cli, &mut stdout).await;
    // The end of the graceful shutdown: the spans still queued are exported.
    telemetry.shutdown().await;
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("raptor: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs one command; its JSON result is written to `out` (stdout in the binary).
pub async fn run(cli: Cli, out: &mut (dyn std::io::Write + Send)) -> anyhow::Result<()> {
    let Cli { config, command } = cli;
    // `migrate`, `openapi` and `healthcheck` use none of the settings checked against each
    // other (migrate connects without the pools' timeouts).
    if !matches!(
        command,
        Command::Migrate | Command::Openapi | Command::Healthcheck
    ) {
        config.validate()?;
    }
    // Process-wide, and session unless asked: only `transaction` is ever set (before the
    // first statement), so a command run in-process never switches a running server back.
    if config.database.db_pool_mode == PoolMode::Transaction {
        raptor_db::set_pool_mode(raptor_db::PoolMode::Transaction);
    }
    match command {
        Command::Openapi => {
            write!(
                out,
                "{}",
                raptor_api::openapi::to_json(&raptor_api::openapi())
            )?;
            Ok(())
        }
        Command::Healthcheck => {
            let status = readyz_status(config.server.addr).await?;
            writeln!(out, "{}", json!({ "readyz": status }))?;
            if status == 200 {
                Ok(())
            } else {
                anyhow::bail!("readyz answered {status}")
            }
        }
        Command::Migrate => {
            let settings = config.pool_settings()?;
            raptor_db::pool::ensure_database(&settings).await?;
            raptor_db::pool::migrate(&settings).await?;
            writeln!(out, "{}", json!({ "migrated": true }))?;
            Ok(())
        }
        Command::Serve => {
            config.check_production()?;
            for warning in config.production_warnings() {
                tracing::warn!("{warning}");
            }
            // Before anything records a metric: the histograms' buckets follow the timeout.
            raptor_api::metrics::install(Duration::from_secs(config.server.request_timeout_secs));
            raptor_api::metrics::record_build_info(env!("CARGO_PKG_VERSION"), GIT_SHA);
            let settings = config.pool_settings()?;
            if !config.role_settings() {
                raptor_db::pool::ensure_database(&settings).await?;
                raptor_db::pool::migrate(&settings).await?;
            }
            let pool = raptor_db::pool::business(&settings).await?;
            let store = raptor_db::pool::store(&settings, &pool)?;
            raptor_db::pool::check_store(&settings, &store).await?;
            if config.role_settings() {
                raptor_db::pool::check_role_settings(&settings, &pool, &store).await?;
            }
            raptor_db::pool::check_sessions(&settings, &pool, &store).await?;
            let listener = TcpListener::bind(config.server.addr)
                .await
                .with_context(|| format!("could not bind RAPTOR_ADDR {}", config.server.addr))?;
            let metrics_listener = match config.server.metrics_addr {
                Some(addr) => Some(
                    TcpListener::bind(addr)
                        .await
                        .with_context(|| format!("could not bind RAPTOR_METRICS_ADDR {addr}"))?,
                ),
                None => None,
            };
            let cleanup = (config.idempotency.idempotency_cleanup_interval_secs > 0).then(|| {
                spawn_cleanup(
                    pool.clone(),
                    Duration::from_secs(config.idempotency.idempotency_cleanup_interval_secs),
                )
            });
            let idempotency = config.idempotency()?;
            if config.sessions.session_key.is_none() {
                tracing::warn!(
                    "RAPTOR_SESSION_KEY is not set: a random key is used, so a retried sign-in \
                     verification that reaches another replica (or this one after a restart) \
                     gets a session of its own; set the same key on every replica"
                );
            }
            match idempotency.response_keys.current_kid() {
                Some(kid) => tracing::info!(kid, "stored idempotent responses are encrypted"),
                None => tracing::warn!(
                    "RAPTOR_RESPONSE_KEYS is not set: stored idempotent responses are written \
                     in plain text (readable by anyone with access to the database)"
                ),
            }
            let state = ApiState::with_store_pool(
                pool,
                store,
                config.api(),
                idempotency,
                Arc::new(SystemClock),
            );
            let expiry = (config.trading.order_expiry_interval_secs > 0).then(|| {
                spawn_order_expiry(
                    state.clone(),
                    Duration::from_secs(config.trading.order_expiry_interval_secs),
                )
            });
            let sweeper = (config.trading.quote_sweep_interval_ms > 0).then(|| {
                spawn_quote_sweeper(
                    state.clone(),
                    Duration::from_millis(config.trading.quote_sweep_interval_ms),
                )
            });
            let relay = config
                .mail
                .relay(config.server.environment == RaptorEnv::Development)?;
            if relay.is_smtp() {
                if config.mail.plain_remote() {
                    tracing::warn!(
                        "RAPTOR_SMTP_URL sends in clear (smtp:// without tls=required) to \
                         another host: use smtps:// or ?tls=required outside a local relay"
                    );
                }
                tracing::info!("sign-in email is sent through RAPTOR_SMTP_URL");
            } else {
                tracing::warn!(
                    "RAPTOR_SMTP_URL is not set: sign-in email is not sent; each message's link \
                     is logged instead (development)"
                );
            }
            let mail = config
                .mail
                .relay_interval()
                .map(|every| spawn_mail_relay(state.db.clone(), relay, every));
            let upkeep = raptor_api::metrics::spawn_upkeep(Duration::from_secs(5));
            let metrics_server = match metrics_listener {
                Some(listener) => {
                    tracing::info!(addr = %listener.local_addr()?, "metrics listening (GET /metrics)");
                    let app = raptor_api::metrics::router(state.clone());
                    Some(tokio::spawn(serve(listener, app, std::future::pending())))
                }
                None => None,
            };
            tracing::info!(addr = %listener.local_addr()?, "raptor listening");
            let drain = Duration::from_secs(config.server.shutdown_drain_secs);
            let signal = drain_on(state.clone(), shutdown_signal(), drain);
            let edge = Edge {
                header_read_timeout: Duration::from_secs(config.server.header_read_timeout_secs),
                keepalive_timeout: Duration::from_secs(config.server.keepalive_timeout_secs),
                max_header_bytes: MAX_HEADER_BYTES,
                max_connections: usize::try_from(config.server.max_connections)
                    .unwrap_or(usize::MAX),
            };
            serve_state_with(listener, state, edge, signal).await?;
            upkeep.abort();
            // Scraped until the API stops (a last scrape during the drain sees it draining).
            if let Some(task) = metrics_server {
                task.abort();
            }
            // A sweep cut short rolls back and stays queued for the next sweeper.
            // A message being sent when aborted rolls back: it stays due (docs: at least once).
            if let Some(task) = mail {
                task.abort();
            }
            if let Some(task) = sweeper {
                task.abort();
            }
            if let Some(task) = expiry {
                task.abort();
            }
            if let Some(task) = cleanup {
                task.abort();
            }
            tracing::info!("raptor stopped");
            Ok(())
        }
        Command::Users(UsersCommand::Create {
            email,
            role,
            ttl_days,
        }) => {
            let pool = config.pool().await?;
            let role = Role::parse(&role).context("role must be user or operator")?;
            let days = ttl_days.unwrap_or(config.sessions.session_ttl_days);
            let ttl = Duration::from_secs(days.saturating_mul(24 * 60 * 60));
            let mut tx = raptor_db::begin(&pool).await?;
            let created = accounts::create_user(
                &mut tx,
                &email,
                role,
                config.trading.paper_starting_cash,
                ttl,
            )
            .await
            .map_err(api_error)?;
            tx.commit().await?;
            writeln!(
                out,
                "{}",
                json!({ "user_id": created.user_id, "token": created.token })
            )?;
            Ok(())
        }
        Command::ServiceTokens(ServiceTokensCommand::Create { name }) => {
            let pool = config.pool().await?;
            let mut tx = raptor_db::begin(&pool).await?;
            let token = accounts::create_service_token(&mut tx, &name)
                .await
                .map_err(api_error)?;
            tx.commit().await?;
            writeln!(out, "{}", json!({ "token": token }))?;
            Ok(())
        }
        Command::Quotes(QuotesCommand::Set { symbol, bid, ask }) => {
            let state = command_state(&config).await?;
            let quote = raptor_api::trading::set_quote(&state, None, &symbol, bid, ask, None)
                .await
                .map_err(api_error)?;
            writeln!(out, "{}", serde_json::to_string(&quote)?)?;
            Ok(())
        }
        Command::Orders(OrdersCommand::Expire) => {
            let state = command_state(&config).await?;
            let expired = raptor_api::trading::expire_orders(&state)
                .await
                .map_err(api_error)?;
            writeln!(
                out,
                "{}",
                json!({ "expired": expired.orders, "settled": expired.settled,
                        "awaiting_quote": expired.awaiting_quote })
            )?;
            Ok(())
        }
        Command::Idempotency(IdempotencyCommand::Cleanup { batch_size }) => {
            let pool = config.pool().await?;
            let deleted = raptor_idempotency::cleanup::delete_expired(&pool, batch_size).await?;
            writeln!(out, "{}", json!({ "deleted": deleted }))?;
            Ok(())
        }
        Command::Idempotency(IdempotencyCommand::Reencrypt { batch_size }) => {
            let keys = config.response_keys()?;
            let pool = config.pool().await?;
            let done = raptor_idempotency::seal::reencrypt(&pool, &keys, batch_size).await?;
            writeln!(
                out,
                "{}",
                json!({ "reencrypted": done.reencrypted, "unreadable": done.unreadable })
            )?;
            Ok(())
        }
        Command::Mail(MailCommand::Relay { limit }) => {
            let relay = config
                .mail
                .relay(config.server.environment == RaptorEnv::Development)?;
            let pool = config.pool().await?;
            let pass = relay.run_pass(&pool, limit).await?;
            writeln!(out, "{}", serde_json::to_string(&pass)?)?;
            Ok(())
        }
        Command::Gdpr(GdprCommand::Erase { user_id }) => {
            let pool = config.pool().await?;
            let mut tx = raptor_db::begin(&pool).await?;
            let erased = accounts::erase(&mut tx, user_id).await.map_err(api_error)?;
            tx.commit().await?;
            writeln!(out, "{erased}")?;
            Ok(())
        }
    }
}

/// The API state of a one-shot command (quotes, order expiry): the configured pool and the
/// system clock.
async fn command_state(config: &Config) -> anyhow::Result<ApiState> {
    let pool = config.pool().await?;
    let store = config.store_pool(&pool)?;
    Ok(ApiState::with_store_pool(
        pool,
        store,
        config.api(),
        config.idempotency()?,
        Arc::new(SystemClock),
    ))
}

/// Runs the retention cleanup ([`raptor_api::retention::delete_expired`]: expired keys, sent
/// outbox messages, spent sign-in links, old Stripe event ids) every `every`, in batches of
/// 1,000 rows.
pub fn spawn_cleanup(pool: sqlx::PgPool, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let done = raptor_api::retention::delete_expired(&pool, 1000).await;
            raptor_api::metrics::record_schedule_run("cleanup", done.is_ok());
            match done {
                Ok(deleted) => tracing::info!(
                    idempotency_keys = deleted.idempotency_keys,
                    email_outbox = deleted.email_outbox,
                    sign_in_links = deleted.sign_in_links,
                    stripe_events = deleted.stripe_events,
                    quote_events = deleted.quote_events,
                    "retention cleanup"
                ),
                Err(err) => tracing::warn!(error = %err, "retention cleanup failed"),
            }
        }
    })
}

/// Expires due orders every `every` (day orders at the close, even on accounts nobody touches).
pub fn spawn_order_expiry(state: ApiState, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let expired = raptor_api::trading::expire_orders(&state).await;
            raptor_api::metrics::record_schedule_run("order_expiry", expired.is_ok());
            match expired {
                Ok(done) if done == raptor_api::trading::Expired::default() => {}
                Ok(done) => tracing::info!(
                    expired = done.orders,
                    settled = done.settled,
                    awaiting_quote = done.awaiting_quote,
                    "expired open orders and settled expired option positions"
                ),
                Err(err) => tracing::warn!(error = %err, "order expiry failed"),
            }
        }
    })
}

/// Works pending quote sweeps ([`raptor_api::trading::sweep_quotes`]) until none is ready, then
/// waits `every`: each sweep is one account's transaction, taken with `SKIP LOCKED`, so the
/// sweepers of every replica share the work.
pub fn spawn_quote_sweeper(state: ApiState, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let swept = raptor_api::trading::sweep_quotes(&state).await;
            raptor_api::metrics::record_schedule_run("quote_sweep", swept.is_ok());
            match swept {
                Ok(0) => {}
                Ok(swept) => tracing::debug!(swept, "quote sweeps"),
                Err(err) => tracing::warn!(error = %err, "quote sweep failed; retried"),
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// Sends due sign-in email ([`raptor_api::mail::Relay::run_pass`]) until none is due, then
/// waits `every`: each message is its own transaction, taken with `SKIP LOCKED`, so the relays
/// of every replica share the queue and never send one message twice.
pub fn spawn_mail_relay(
    pool: sqlx::PgPool,
    relay: raptor_api::mail::Relay,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let pass = relay.run_pass(&pool, 100).await;
            raptor_api::metrics::record_schedule_run("mail_relay", pass.is_ok());
            if !matches!(&pass, Ok(pass) if pass.total() == 100) {
                // Once per idle wait, not per full batch.
                if let Err(err) = raptor_api::mail::Relay::sample_backlog(&pool).await {
                    tracing::warn!(error = %err, "could not read the mail queue's size");
                }
            }
            match pass {
                Ok(pass) if pass.total() == 100 => continue,
                Ok(pass) if pass.total() > 0 => tracing::debug!(
                    sent = pass.sent,
                    retried = pass.retried,
                    given_up = pass.given_up,
                    "mail relay"
                ),
                Ok(_) => {}
                Err(err) => tracing::warn!(error = %err, "mail relay failed; retried"),
            }
            tokio::time::sleep(every).await;
        }
    })
}

/// `GET /readyz` on `addr` (an unspecified address means this host), its status code.
async fn readyz_status(addr: std::net::SocketAddr) -> anyhow::Result<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut target = addr;
    if target.ip().is_unspecified() {
        target.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let check = async {
        let mut stream = tokio::net::TcpStream::connect(target).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n")
            .await?;
        let mut head = [0u8; 32];
        let read = stream.read(&mut head).await?;
        Ok::<_, std::io::Error>(String::from_utf8_lossy(&head[..read]).into_owned())
    };
    let head = tokio::time::timeout(Duration::from_secs(3), check)
        .await
        .context("readyz timed out")?
        .with_context(|| format!("could not reach {target}"))?;
    head.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP answer: {head:?}"))
}

fn api_error(err: raptor_api::ApiError) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: {}",
        err.code(),
        err.to_body()["message"].as_str().unwrap_or_default()
    )
}

/// How long `serve` waits, once the last request is answered, for the work spawned off
/// requests that the process still owes (key releases and settlements, queued sign-in links).
pub const BACKGROUND_DRAIN: Duration = Duration::from_secs(10);

/// Serves `state`'s API on `listener` until `shutdown` resolves, lets in-flight requests
/// finish, then waits up to [`BACKGROUND_DRAIN`] for the work they spawned
/// ([`raptor_idempotency::Idempotency::drain`]), so that exiting the process does not leave a
/// released key in flight or a login link unqueued.
pub async fn serve_state(
    listener: TcpListener,
    state: ApiState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_state_with(listener, state, Edge::default(), shutdown).await
}

/// [`serve_state`] with the connection limits of `edge`.
pub async fn serve_state_with(
    listener: TcpListener,
    state: ApiState,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = raptor_api::app(state.clone());
    let served = serve_with(listener, app, edge, shutdown).await;
    state.idempotency.drain(BACKGROUND_DRAIN).await;
    served
}

/// How the server treats slow or oversized clients at the connection level, before a request
/// reaches the router.
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    /// A connection whose request head (request line and headers) is not complete this long
    /// after the connection opened, or after the previous response on it, is closed
    /// (`RAPTOR_HEADER_READ_TIMEOUT_SECS`).
    pub header_read_timeout: Duration,
    /// A keep-alive connection with no byte of a next request this long after the previous
    /// response is closed (`RAPTOR_KEEPALIVE_TIMEOUT_SECS`); the header read timeout, which
    /// also runs from the previous response, bounds it.
    pub keepalive_timeout: Duration,
    /// Request heads larger than this are answered `431 request_headers_too_large` (a problem
    /// body) and the connection is closed.
    pub max_header_bytes: usize,
    /// Open connections this process holds at most (`RAPTOR_MAX_CONNECTIONS`); one past it is
    /// answered `503 too_many_connections` with `Connection: close` and never served.
    pub max_connections: usize,
}

/// The bound on a request's head: request line and headers together.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;

impl Default for Edge {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
            max_header_bytes: MAX_HEADER_BYTES,
            max_connections: 4096,
        }
    }
}

/// Serves `app` on an already-bound `listener` until `shutdown` resolves, then lets in-flight
/// requests finish. Binding first lets tests use port 0 without sleeping.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, app, Edge::default(), shutdown).await
}

/// [`serve`] with the connection limits of `edge`. One HTTP/1 connection per accepted socket
/// (hyper's own loop rather than `axum::serve`, which sets no header read timeout and no bound
/// on the head's size); the peer address reaches handlers as `ConnectInfo` (the client address
/// of rate limits and the access log).
pub async fn serve_with(
    listener: TcpListener,
    app: Router,
    edge: Edge,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(edge.header_read_timeout)
        .max_header_size(edge.max_header_bytes)
        // The read buffer must hold a whole head; hyper's floor is 8 KiB.
        .max_buf_size(edge.max_header_bytes.max(8192) + 8192);
    let answer_431 = edge::answer_431(edge.max_header_bytes);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let permits = Arc::new(tokio::sync::Semaphore::new(edge.max_connections));
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            metrics::counter!("raptor_connections_refused_total", "reason" => "max_connections")
                .increment(1);
            tokio::spawn(refuse_connection(stream));
            continue;
        };
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
            request
                .extensions_mut()
                .insert(axum::extract::ConnectInfo(peer));
            tower::ServiceExt::oneshot(app.clone(), request)
        });
        let io = edge::EdgeIo::new(stream, edge.keepalive_timeout, answer_431.clone());
        let connection =
            graceful.watch(http.serve_connection(hyper_util::rt::TokioIo::new(io), service));
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %err, %peer, "connection closed with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    // Idle connections are closed now; each busy one after its response.
    graceful.shutdown().await;
    Ok(())
}

/// Answers a connection past [`Edge::max_connections`]: `503 too_many_connections` (problem
/// details, `Retry-After: 1`, `Connection: close`) once its request head is in (within 2 s,
/// else it is just closed), then closes it. The request itself is never served.
async fn refuse_connection(mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tracing::warn!("connection refused: RAPTOR_MAX_CONNECTIONS reached");
    let mut body = serde_json::Map::new();
    body.insert("error".into(), "too_many_connections".into());
    body.insert(
        "message".into(),
        "the server holds as many connections as it accepts; retry shortly".into(),
    );
    raptor_api::problem::enrich(&mut body, axum::http::StatusCode::SERVICE_UNAVAILABLE, None);
    let body = serde_json::Value::Object(body).to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: {}\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        raptor_api::problem::CONTENT_TYPE,
        body.len()
    );
    let refused = async {
        // An HTTP client reads an answer only after sending its request: wait for the end of
        // the head (or 16 KiB of it) first, so the refusal is read as the request's answer.
        let mut head = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = stream.read(&mut chunk).await?;
            if read == 0 {
                return Ok(());
            }
            head.extend_from_slice(&chunk[..read]);
        }
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        // Read what else the client sends until it closes, so closing does not reset the
        // connection (which could discard the answer before the client reads it).
        while stream.read(&mut chunk).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), refused).await;
}

/// Resolves `drain` after `signal`: from the signal on, `/readyz` answers 503 while requests
/// are still served; when this resolves the server stops accepting and finishes what it has.
pub async fn drain_on(state: ApiState, signal: impl Future<Output = ()> + Send, drain: Duration) {
    signal.await;
    state.begin_drain();
    if !drain.is_zero() {
        tracing::info!(secs = drain.as_secs(), "draining: readyz answers 503");
        tokio::time::sleep(drain).await;
    }
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "could not listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "could not listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT: shutting down"),
        () = terminate => tracing::info!("SIGTERM: shutting down"),
    }
}
