//! The command line: [`Cli`], its [`Command`]s, [`run`], and the one-shot commands (`serve`'s
//! life cycle is `crate::serve`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use raptor_api::accounts::store as accounts;
use raptor_api::admin::support::{self, Actor, UserRef};
use raptor_api::auth::Role;
use raptor_api::{ApiState, SystemClock};
use rust_decimal::Decimal;
use serde_json::json;

use crate::config::{Config, PoolMode, RaptorEnv};

/// Raptor write API.
#[derive(Debug, Parser)]
#[command(name = "raptor", version = crate::VERSION, about)]
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
    /// Bearer tokens (sessions' and services').
    #[command(subcommand)]
    Tokens(TokensCommand),
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
    /// Show a user, by id or by email: its role, account and sessions (audited as
    /// `user.shown` on the user's trail); exits 1 when there is none.
    Show {
        /// `users.id`.
        #[arg(long, conflicts_with = "email", required_unless_present = "email")]
        id: Option<i32>,
        /// The sign-up address (case does not matter).
        #[arg(long)]
        email: Option<String>,
    },
    /// A user's sessions.
    #[command(subcommand)]
    Sessions(UserSessionsCommand),
}

/// `raptor users sessions …`
#[derive(Debug, Subcommand)]
pub enum UserSessionsCommand {
    /// Revoke every session of a user (signed out everywhere; audited as `sessions.revoked`);
    /// prints `{"user_id", "revoked": N}`.
    Revoke {
        /// `users.id`.
        #[arg(long)]
        user_id: i32,
    },
}

/// `raptor tokens …`
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Revoke one bearer token, a session's or a service's (audited as `token.revoked`);
    /// prints `{"revoked": true, "kind", "user_id", "service_name"}`, or `{"revoked": false}`
    /// when no such token is valid. `--token -` reads it from standard input (keeps it out of
    /// the shell's history).
    Revoke {
        /// The token, or `-` for standard input.
        #[arg(long)]
        token: String,
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

/// What a command writes its JSON result to (stdout in the binary).
type Out<'a> = &'a mut (dyn std::io::Write + Send);

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
        Command::Openapi => openapi(out),
        Command::Healthcheck => healthcheck(&config, out).await,
        Command::Migrate => migrate(&config, out).await,
        Command::Serve => crate::serve::run(config).await,
        Command::Users(UsersCommand::Create {
            email,
            role,
            ttl_days,
        }) => create_user(&config, &email, &role, ttl_days, out).await,
        Command::ServiceTokens(ServiceTokensCommand::Create { name }) => {
            create_service_token(&config, &name, out).await
        }
        Command::Users(UsersCommand::Show { id, email }) => {
            let who = match (id, email) {
                (Some(id), _) => UserRef::Id(id),
                (None, Some(email)) => UserRef::Email(email),
                (None, None) => anyhow::bail!("--id or --email"),
            };
            show_user(&config, &who, out).await
        }
        Command::Users(UsersCommand::Sessions(UserSessionsCommand::Revoke { user_id })) => {
            revoke_sessions(&config, user_id, out).await
        }
        Command::Tokens(TokensCommand::Revoke { token }) => {
            revoke_token(&config, &token, out).await
        }
        Command::Quotes(QuotesCommand::Set { symbol, bid, ask }) => {
            set_quote(&config, &symbol, bid, ask, out).await
        }
        Command::Orders(OrdersCommand::Expire) => expire_orders(&config, out).await,
        Command::Idempotency(IdempotencyCommand::Cleanup { batch_size }) => {
            idempotency_cleanup(&config, batch_size, out).await
        }
        Command::Idempotency(IdempotencyCommand::Reencrypt { batch_size }) => {
            reencrypt(&config, batch_size, out).await
        }
        Command::Mail(MailCommand::Relay { limit }) => relay_mail(&config, limit, out).await,
        Command::Gdpr(GdprCommand::Erase { user_id }) => erase(&config, user_id, out).await,
    }
}

/// `raptor openapi`.
fn openapi(out: Out<'_>) -> anyhow::Result<()> {
    write!(
        out,
        "{}",
        raptor_api::openapi::to_json(&raptor_api::openapi())
    )?;
    Ok(())
}

/// `raptor healthcheck`.
async fn healthcheck(config: &Config, out: Out<'_>) -> anyhow::Result<()> {
    let status = readyz_status(config.server.addr).await?;
    writeln!(out, "{}", json!({ "readyz": status }))?;
    if status == 200 {
        Ok(())
    } else {
        anyhow::bail!("readyz answered {status}")
    }
}

/// `raptor migrate`.
async fn migrate(config: &Config, out: Out<'_>) -> anyhow::Result<()> {
    let settings = config.pool_settings()?;
    raptor_db::pool::ensure_database(&settings).await?;
    raptor_db::pool::migrate(&settings).await?;
    writeln!(out, "{}", json!({ "migrated": true }))?;
    Ok(())
}

/// `raptor users create`.
async fn create_user(
    config: &Config,
    email: &str,
    role: &str,
    ttl_days: Option<u64>,
    out: Out<'_>,
) -> anyhow::Result<()> {
    let pool = config.pool().await?;
    let role = Role::parse(role).context("role must be user or operator")?;
    let days = ttl_days.unwrap_or(config.sessions.session_ttl_days);
    let ttl = Duration::from_secs(days.saturating_mul(24 * 60 * 60));
    let mut tx = raptor_db::begin(&pool).await?;
    let created = accounts::create_user(
        &mut tx,
        email,
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

/// `raptor service-tokens create`.
async fn create_service_token(config: &Config, name: &str, out: Out<'_>) -> anyhow::Result<()> {
    let pool = config.pool().await?;
    let mut tx = raptor_db::begin(&pool).await?;
    let token = accounts::create_service_token(&mut tx, name)
        .await
        .map_err(api_error)?;
    tx.commit().await?;
    writeln!(out, "{}", json!({ "token": token }))?;
    Ok(())
}

/// `raptor users show`.
async fn show_user(config: &Config, who: &UserRef, out: Out<'_>) -> anyhow::Result<()> {
    let pool = config.pool().await?;
    let mut tx = raptor_db::begin(&pool).await?;
    let shown = support::show_user(&mut tx, who, &Actor::cli())
        .await
        .map_err(api_error)?;
    tx.commit().await?;
    let user = shown.with_context(|| match who {
        UserRef::Id(id) => format!("no user with id {id}"),
        UserRef::Email(email) => format!("no user with email {email}"),
    })?;
    writeln!(out, "{}", serde_json::to_string(&user)?)?;
    Ok(())
}

/// `raptor users sessions revoke`.
async fn revoke_sessions(config: &Config, user_id: i32, out: Out<'_>) -> anyhow::Result<()> {
    let pool = config.pool().await?;
    let mut tx = raptor_db::begin(&pool).await?;
    let revoked = support::revoke_sessions(&mut tx, user_id, &Actor::cli())
        .await
        .map_err(api_error)?;
    tx.commit().await?;
    writeln!(out, "{}", json!({ "user_id": user_id, "revoked": revoked }))?;
    Ok(())
}

/// `raptor tokens revoke`.
async fn revoke_token(config: &Config, token: &str, out: Out<'_>) -> anyhow::Result<()> {
    let token = if token == "-" {
        let mut line = String::new();
        std::io::stdin()
            .read_line(&mut line)
            .context("read the token from standard input")?;
        line
    } else {
        token.to_owned()
    };
    anyhow::ensure!(!token.trim().is_empty(), "the token is empty");
    let pool = config.pool().await?;
    let mut tx = raptor_db::begin(&pool).await?;
    let revoked = support::revoke_token(&mut tx, &token, &Actor::cli())
        .await
        .map_err(api_error)?;
    tx.commit().await?;
    let answer = match revoked {
        Some(token) => json!({
            "revoked": true,
            "kind": token.kind,
            "user_id": token.user_id,
            "service_name": token.service_name,
        }),
        None => json!({ "revoked": false }),
    };
    writeln!(out, "{answer}")?;
    Ok(())
}

/// `raptor quotes set`.
async fn set_quote(
    config: &Config,
    symbol: &str,
    bid: Decimal,
    ask: Decimal,
    out: Out<'_>,
) -> anyhow::Result<()> {
    let state = command_state(config).await?;
    let quote = raptor_api::trading::set_quote(&state, None, symbol, bid, ask, None)
        .await
        .map_err(api_error)?;
    writeln!(out, "{}", serde_json::to_string(&quote)?)?;
    Ok(())
}

/// `raptor orders expire`.
async fn expire_orders(config: &Config, out: Out<'_>) -> anyhow::Result<()> {
    let state = command_state(config).await?;
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

/// `raptor idempotency cleanup`.
async fn idempotency_cleanup(config: &Config, batch_size: i64, out: Out<'_>) -> anyhow::Result<()> {
    let pool = config.pool().await?;
    let deleted = raptor_idempotency::cleanup::delete_expired(&pool, batch_size).await?;
    writeln!(out, "{}", json!({ "deleted": deleted }))?;
    Ok(())
}

/// `raptor idempotency reencrypt`.
async fn reencrypt(config: &Config, batch_size: i64, out: Out<'_>) -> anyhow::Result<()> {
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

/// `raptor mail relay`.
async fn relay_mail(config: &Config, limit: u64, out: Out<'_>) -> anyhow::Result<()> {
    let relay = config
        .mail
        .relay(config.server.environment == RaptorEnv::Development)?;
    let pool = config.pool().await?;
    let pass = relay.run_pass(&pool, limit).await?;
    writeln!(out, "{}", serde_json::to_string(&pass)?)?;
    Ok(())
}

/// `raptor gdpr erase`.
async fn erase(config: &Config, user_id: i32, out: Out<'_>) -> anyhow::Result<()> {
    let pool = config.pool().await?;
    let mut tx = raptor_db::begin(&pool).await?;
    let erased = accounts::erase(&mut tx, user_id).await.map_err(api_error)?;
    tx.commit().await?;
    writeln!(out, "{erased}")?;
    Ok(())
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

/// A refusal of the API as the command's error: `code: message`.
fn api_error(err: raptor_api::ApiError) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: {}",
        err.code(),
        err.to_body()["message"].as_str().unwrap_or_default()
    )
}
