//! `raptor serve`'s life cycle: check the settings, migrate, open and check the pools, bind,
//! start the [`Jobs`], serve until SIGTERM or SIGINT (after the drain), stop the jobs.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use raptor_api::{ApiState, SystemClock};
use raptor_idempotency::IdempotencyConfig;
use sqlx::PgPool;
use tokio::net::TcpListener;

use crate::config::{Config, RaptorEnv};
use crate::http::{drain_on, serve, serve_state_with, shutdown_signal, Edge, MAX_HEADER_BYTES};
use crate::jobs::{spawn_cleanup, spawn_mail_relay, spawn_order_expiry, spawn_quote_sweeper, Jobs};
use crate::GIT_SHA;

/// `raptor serve`: applies pending migrations (unless `RAPTOR_DB_SESSION_SETTINGS=role`), then
/// serves HTTP until SIGTERM/SIGINT.
pub(crate) async fn run(config: Config) -> anyhow::Result<()> {
    config.check_production()?;
    for warning in config.production_warnings() {
        tracing::warn!("{warning}");
    }
    let next_year = chrono::Datelike::year(&chrono::Utc::now()) + 1;
    if !raptor_engine::calendar::covers(next_year) {
        tracing::warn!(
            last_year = raptor_engine::calendar::last_covered_year(),
            "the market calendar has no holidays for {next_year}: extend raptor-engine's \
             calendar table before the year ends (docs/operations.md, RaptorMarketCalendarEnding)"
        );
    }
    // Before anything records a metric: the histograms' buckets follow the timeout.
    raptor_api::metrics::install(Duration::from_secs(config.server.request_timeout_secs));
    raptor_api::metrics::record_build_info(crate::VERSION, GIT_SHA);
    let (pool, store) = connect(&config).await?;
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
    let idempotency = config.idempotency()?;
    warn_about_keys(&config, &idempotency);
    let state = ApiState::with_store_pool(
        pool,
        store,
        config.api(),
        idempotency,
        Arc::new(SystemClock),
    );
    let relay = mail_relay(&config)?;
    let mut jobs = start_jobs(&config, &state, relay);
    if let Some(listener) = metrics_listener {
        tracing::info!(addr = %listener.local_addr()?, "metrics listening (GET /metrics)");
        let app = raptor_api::metrics::router(state.clone());
        jobs.add(tokio::spawn(serve(listener, app, std::future::pending())));
    }
    tracing::info!(addr = %listener.local_addr()?, "raptor listening");
    let drain = Duration::from_secs(config.server.shutdown_drain_secs);
    let signal = drain_on(state.clone(), shutdown_signal(), drain);
    serve_state_with(listener, state, edge(&config), signal).await?;
    // The metrics listener is scraped until the API stops (a last scrape during the drain sees
    // it draining).
    jobs.stop();
    tracing::info!("raptor stopped");
    Ok(())
}

/// The business and store pools, checked; the database created and migrated first, unless the
/// pools' session settings come from the roles (`RAPTOR_DB_SESSION_SETTINGS=role`: the roles'
/// settings are checked instead).
async fn connect(config: &Config) -> anyhow::Result<(PgPool, PgPool)> {
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
    Ok((pool, store))
}

/// Logs what the session and response keys mean for this deployment.
fn warn_about_keys(config: &Config, idempotency: &IdempotencyConfig) {
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
}

/// The sign-in email relay of the settings, and a line on how mail leaves.
fn mail_relay(config: &Config) -> anyhow::Result<raptor_api::mail::Relay> {
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
    Ok(relay)
}

/// The schedules the settings turn on (an interval of 0 turns one off), and the metrics
/// upkeep.
fn start_jobs(config: &Config, state: &ApiState, relay: raptor_api::mail::Relay) -> Jobs {
    let mut jobs = Jobs::default();
    let cleanup_secs = config.idempotency.idempotency_cleanup_interval_secs;
    if cleanup_secs > 0 {
        jobs.add(spawn_cleanup(
            state.db.clone(),
            Duration::from_secs(cleanup_secs),
        ));
    }
    let expiry_secs = config.trading.order_expiry_interval_secs;
    if expiry_secs > 0 {
        jobs.add(spawn_order_expiry(
            state.clone(),
            Duration::from_secs(expiry_secs),
        ));
    }
    let sweep_ms = config.trading.quote_sweep_interval_ms;
    if sweep_ms > 0 {
        jobs.add(spawn_quote_sweeper(
            state.clone(),
            Duration::from_millis(sweep_ms),
        ));
    }
    if let Some(every) = config.mail.relay_interval() {
        jobs.add(spawn_mail_relay(state.db.clone(), relay, every));
    }
    jobs.add(raptor_api::metrics::spawn_upkeep(Duration::from_secs(5)));
    jobs
}

/// The connection limits of the settings.
fn edge(config: &Config) -> Edge {
    Edge {
        header_read_timeout: Duration::from_secs(config.server.header_read_timeout_secs),
        keepalive_timeout: Duration::from_secs(config.server.keepalive_timeout_secs),
        write_stall_timeout: Duration::from_secs(config.server.write_stall_timeout_secs),
        max_header_bytes: MAX_HEADER_BYTES,
        max_connections: usize::try_from(config.server.max_connections).unwrap_or(usize::MAX),
    }
}
