//! The `raptor` command line: commands print JSON and act on the database; a bad
//! configuration is a clear error naming its variable; the schedules' defaults.

use axum::http::StatusCode;
use clap::Parser;
use raptor_server::Cli;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{cli, label, Options, TestApp, IDEMPOTENCY_FLAG};

/// Users (with a session's lifetime, or `--ttl-days`), operators, service tokens, quotes, the
/// key cleanup, GDPR erasure and migrations, each printing JSON.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cli_commands_print_json(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let run = async |args: &[&str]| cli(&pool, args).await.expect("command succeeds");
        let created = run(&["users", "create", "--email", "cli@example.com"]).await;
        let user_id = created["user_id"].as_i64().expect("user_id");
        let token = created["token"].as_str().expect("token").to_owned();
        assert!(token.len() >= 32);

        let account = app.account(&token).await;
        assert_eq!(account.status, StatusCode::OK);
        assert_eq!(account.body["cash"], "100000.00");
        // The token expires like a session (RAPTOR_SESSION_TTL_DAYS, 30), or after --ttl-days.
        let days_left = async |user_id: i64| -> Option<f64> {
            app.scalar_where(
                "select (extract(epoch from expires_at - now()) / 86400)::float8 from api_tokens
                  where user_id = $1",
                i32::try_from(user_id).expect("id"),
            )
            .await
        };
        let left = days_left(user_id).await.expect("the token expires");
        assert!((29.9..=30.0).contains(&left), "{left} days");
        let short = run(&[
            "users",
            "create",
            "--email",
            "brief@example.com",
            "--ttl-days",
            "2",
        ])
        .await;
        let left = days_left(short["user_id"].as_i64().expect("id"))
            .await
            .expect("the token expires");
        assert!((1.9..=2.0).contains(&left), "{left} days");

        let op = run(&[
            "users",
            "create",
            "--email",
            "boss@example.com",
            "--role",
            "operator",
        ])
        .await;
        let flag = app
            .set_flag(op["token"].as_str().expect("token"), IDEMPOTENCY_FLAG, true)
            .await;
        assert_eq!(flag.status, StatusCode::OK);

        let service = run(&["service-tokens", "create", "--name", "ledger"]).await;
        let service_token = service["token"].as_str().expect("token");
        let probe = app
            .post("/probe/items", service_token, Uuid::new_v4(), &label("svc"))
            .await;
        assert_eq!(probe.status, StatusCode::CREATED);
        let scope: Option<i32> = app
            .scalar("select scope_user_id from idempotency_keys")
            .await;
        assert_eq!(scope, None, "service principals have a NULL scope");

        let quote = run(&[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ])
        .await;
        assert_eq!(quote["symbol"], "AAPL");
        assert_eq!(quote["ask"], "190.10");

        app.expire_keys().await;
        let cleanup = run(&["idempotency", "cleanup", "--batch-size", "10"]).await;
        assert_eq!(cleanup, json!({ "deleted": 1 }));

        let erased = run(&["gdpr", "erase", "--user-id", &user_id.to_string()]).await;
        assert_eq!(erased["user_id"], user_id);
        let gone = app.account(&token).await;
        assert_eq!(gone.status, StatusCode::UNAUTHORIZED);

        let migrated = run(&["migrate"]).await;
        assert_eq!(migrated, json!({ "migrated": true }));
    })
    .await;
}

/// A bad value names its environment variable; inconsistent settings are refused by
/// `validate` (a stale threshold under the request timeout, a disabled statement cache,
/// transaction pool mode without role settings).
#[test]
fn bad_configuration_is_a_clear_error() {
    let err = Cli::try_parse_from(["raptor", "--request-timeout-secs", "abc", "serve"])
        .expect_err("bad value");
    assert!(
        err.to_string().contains("RAPTOR_REQUEST_TIMEOUT_SECS"),
        "{err}"
    );
    let err = Cli::try_parse_from(["raptor", "--flag-idempotency-middleware", "maybe", "serve"])
        .expect_err("bad flag");
    assert!(
        err.to_string().contains("FLAG_IDEMPOTENCY_MIDDLEWARE"),
        "{err}"
    );
    // The stale threshold's default follows a longer request timeout; an explicit one under
    // it is refused.
    let cli =
        Cli::try_parse_from(["raptor", "--request-timeout-secs", "60", "serve"]).expect("parses");
    cli.config.validate().expect("the default follows");
    let cli = Cli::try_parse_from([
        "raptor",
        "--request-timeout-secs",
        "60",
        "--idempotency-stale-after-secs",
        "30",
        "serve",
    ])
    .expect("parses");
    let err = cli.config.validate().expect_err("stale < timeout");
    assert!(
        err.to_string().contains("IDEMPOTENCY_STALE_AFTER_SECS"),
        "{err}"
    );
    // sqlx with its cache off names every statement and never closes it: refused.
    let err =
        Cli::try_parse_from(["raptor", "--db-statement-cache", "0", "serve"]).expect_err("cache 0");
    assert!(
        err.to_string().contains("RAPTOR_DB_STATEMENT_CACHE"),
        "{err}"
    );
    // Transaction pool mode without role settings would lose the session settings.
    let cli =
        Cli::try_parse_from(["raptor", "--db-pool-mode", "transaction", "serve"]).expect("parses");
    let err = cli.config.validate().expect_err("transaction without role");
    assert!(err.to_string().contains("RAPTOR_DB_POOL_MODE"), "{err}");
    let cli = Cli::try_parse_from([
        "raptor",
        "--db-pool-mode",
        "transaction",
        "--db-session-settings",
        "role",
        "--idempotency-store-database-url",
        "postgres://raptor_idem@127.0.0.1:6432/raptor",
        "--listen-database-url",
        "postgres://raptor@127.0.0.1:5432/raptor",
        "serve",
    ])
    .expect("parses");
    cli.config
        .validate()
        .expect("transaction pool mode with role settings and the listener's own URL");
}

/// Idempotency cleanup and order expiry run inside `serve` by default.
#[test]
fn schedules_are_on_by_default() {
    let cli = Cli::try_parse_from(["raptor", "serve"]).expect("parse");
    assert_eq!(
        cli.config.idempotency.idempotency_cleanup_interval_secs,
        3600
    );
    assert_eq!(cli.config.trading.order_expiry_interval_secs, 60);
}
