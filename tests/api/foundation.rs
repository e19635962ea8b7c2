//! The foundation: principals, errors, limits, request ids, readiness, shutdown, CLI.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use clap::Parser;
use raptor_api::auth::Role;
use raptor_server::Cli;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{post_http_with, Call, TestApp};
use crate::probe::SLEEP_HEADER;

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn authentication(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (user_id, token) = app.user("auth@example.com").await;

    let missing = app
        .send(Call::new(Method::GET, "/api/trading/account"))
        .await;
    assert_eq!(missing.status, StatusCode::UNAUTHORIZED);
    assert_eq!(missing.body["error"], "unauthenticated");

    let unknown = app.get("/api/trading/account", "rpt_0000").await;
    assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    assert_eq!(unknown.body["error"], "unauthenticated");

    let wrong_scheme = app
        .send(
            Call::new(Method::GET, "/api/trading/account")
                .header("authorization", &format!("Basic {token}")),
        )
        .await;
    assert_eq!(wrong_scheme.status, StatusCode::UNAUTHORIZED);

    let ok = app.get("/api/trading/account", &token).await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    assert_eq!(ok.body["cash"], "100000.00");
    assert_eq!(ok.body["buying_power"], "100000.00");
    assert_eq!(ok.body["realized_pnl"], "0.00");
    assert_eq!(ok.body["mode"], "paper");

    sqlx::query(
        "update api_tokens set expires_at = now() - interval '1 second' where user_id = $1",
    )
    .bind(user_id)
    .execute(&app.pool)
    .await
    .expect("expire");
    let expired = app.get("/api/trading/account", &token).await;
    assert_eq!(expired.status, StatusCode::UNAUTHORIZED);

    // Only the hash is stored.
    let stored: i64 = sqlx::query_scalar("select count(*) from api_tokens where token_hash = $1")
        .bind(token.as_bytes())
        .fetch_one(&app.pool)
        .await
        .expect("count");
    assert_eq!(stored, 0);
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn roles(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, user) = app.user("user@example.com").await;
    let (_, operator) = app.user_with_role("op@example.com", Role::Operator).await;
    let service = app.service_token("svc").await;
    let quote = json!({ "bid": "1.00", "ask": "1.10" });

    let by_user = app
        .send(
            Call::new(Method::PUT, "/api/admin/quotes/AAPL")
                .token(&user)
                .json(&quote),
        )
        .await;
    assert_eq!(by_user.status, StatusCode::FORBIDDEN);
    assert_eq!(by_user.body["error"], "forbidden");
    let by_service = app
        .send(
            Call::new(Method::PUT, "/api/admin/quotes/AAPL")
                .token(&service)
                .json(&quote),
        )
        .await;
    assert_eq!(by_service.status, StatusCode::FORBIDDEN);
    let by_operator = app
        .send(
            Call::new(Method::PUT, "/api/admin/quotes/AAPL")
                .token(&operator)
                .json(&quote),
        )
        .await;
    assert_eq!(by_operator.status, StatusCode::OK, "{}", by_operator.text);
    assert_eq!(by_operator.body["bid"], "1.00");

    // A service principal has no account.
    let service_account = app.get("/api/trading/account", &service).await;
    assert_eq!(service_account.status, StatusCode::FORBIDDEN);
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn bad_input_gets_json_4xx(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("bad@example.com").await;
    let orders = "/api/trading/orders";

    let malformed = app
        .send(
            Call::new(Method::POST, orders)
                .token(&token)
                .raw(b"{\"symbol\": ".to_vec(), Some("application/json")),
        )
        .await;
    assert_eq!(
        malformed.status,
        StatusCode::BAD_REQUEST,
        "{}",
        malformed.text
    );
    assert_eq!(malformed.body["error"], "invalid_json");

    let wrong_type = app
        .send(
            Call::new(Method::POST, orders)
                .token(&token)
                .raw(b"symbol=AAPL".to_vec(), Some("text/plain")),
        )
        .await;
    assert_eq!(wrong_type.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    assert_eq!(wrong_type.body["error"], "unsupported_media_type");

    let wrong_shape = app
        .post(
            orders,
            &token,
            None,
            &json!({ "symbol": "AAPL", "qty": "x", "type": "market" }),
        )
        .await;
    assert_eq!(wrong_shape.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(wrong_shape.body["error"], "invalid_body");

    let bad_path = app.get("/api/trading/orders/not-a-uuid", &token).await;
    assert_eq!(bad_path.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_path.body["error"], "invalid_path");

    let quote_bad = app
        .send(
            Call::new(Method::PUT, "/api/admin/flags/FLAG_IDEMPOTENCY_MIDDLEWARE")
                .token(&token)
                .raw(b"[".to_vec(), Some("application/json")),
        )
        .await;
    assert!(quote_bad.status.is_client_error());
    assert!(quote_bad.body["error"].is_string());

    let unknown = app.get("/api/nope", &token).await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.body["error"], "not_found");

    let wrong_method = app
        .send(Call::new(Method::PATCH, "/api/trading/account").token(&token))
        .await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.body["error"], "method_not_allowed");

    assert_eq!(app.count("select count(*) from paper_orders").await, 0);
    assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn body_limit_is_413_json(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("big@example.com").await;
    let big = format!("{{\"label\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));

    // In-process (no Content-Length): the extractor's limit.
    let inproc = app
        .send(
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(Uuid::new_v4())
                .raw(big.clone().into_bytes(), Some("application/json")),
        )
        .await;
    assert_eq!(inproc.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(inproc.body["error"], "payload_too_large");

    // Over HTTP with Content-Length: refused before any work.
    let server = app.spawn().await;
    let response = server
        .client
        .post(server.url("/api/trading/orders"))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("idempotency-key", Uuid::new_v4().to_string())
        .body(big)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status().as_u16(), 413);
    let body: Value = response.json().await.expect("json body");
    assert_eq!(body["error"], "payload_too_large");
    assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
    server.stop().await;
    app.close().await;
}

/// A client's `x-request-id` is echoed and logged only when it is a short, printable id
/// (otherwise one is generated), and audit rows always carry the server's own id (a UUID),
/// never the client's text.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn request_ids_propagate_to_responses_and_audit(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("rid@example.com").await;
    let audited = |label: &'static str| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<String>>(
                "select request_id from audit_log
                  where action = 'probe.created' and context->>'label' = $1",
            )
            .bind(label)
            .fetch_one(&pool)
            .await
            .expect("audit row")
            .expect("a request id")
        }
    };
    let post = |label: &'static str, id: Option<Vec<u8>>| {
        let mut call = Call::new(Method::POST, "/probe/items")
            .token(&token)
            .json(&json!({ "label": label }));
        if let Some(id) = id {
            call = call.header_bytes("x-request-id", id);
        }
        app.send(call)
    };

    let given = post("rid-given", Some(b"req-abc-123".to_vec())).await;
    assert_eq!(given.status, StatusCode::CREATED, "{}", given.text);
    assert_eq!(given.header("x-request-id"), Some("req-abc-123"), "echoed");
    let server_id = audited("rid-given").await;
    assert!(
        Uuid::parse_str(&server_id).is_ok(),
        "the server's id: {server_id}"
    );

    let none = post("rid-none", None).await;
    let id = none
        .header("x-request-id")
        .expect("generated id")
        .to_owned();
    assert!(Uuid::parse_str(&id).is_ok(), "{id}");
    assert_eq!(
        audited("rid-none").await,
        id,
        "one id when the client sent none"
    );

    for (label, bad) in [
        ("rid-long", "x".repeat(10_000).into_bytes()),
        ("rid-space", b"two words".to_vec()),
        ("rid-tab", b"tab\there".to_vec()),
        ("rid-bytes", vec![b'a', 0xC3, 0xA9]),
    ] {
        let answer = post(label, Some(bad)).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{label}: {}",
            answer.text
        );
        let id = answer.header("x-request-id").expect("replaced").to_owned();
        assert!(Uuid::parse_str(&id).is_ok(), "{label}: {id}");
        assert_eq!(audited(label).await, id, "{label}");
    }
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn readiness_follows_the_database(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let db: String = sqlx::query_scalar("select current_database()")
        .fetch_one(&app.pool)
        .await
        .expect("db name");
    let ready = app.send(Call::new(Method::GET, "/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(
        app.send(Call::new(Method::GET, "/healthz")).await.status,
        StatusCode::OK
    );

    // Take the database away: no new connections, existing ones terminated.
    let admin = PgPool::connect_with((*pool.connect_options()).clone().database("postgres"))
        .await
        .expect("admin pool");
    sqlx::query(&format!("alter database \"{db}\" allow_connections false"))
        .execute(&admin)
        .await
        .expect("disallow");
    sqlx::query("select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()")
        .bind(&db)
        .execute(&admin)
        .await
        .expect("terminate");
    let down = app.send(Call::new(Method::GET, "/readyz")).await;
    assert_eq!(
        down.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        down.text
    );
    assert_eq!(down.body["status"], "unavailable");
    assert_eq!(
        app.send(Call::new(Method::GET, "/healthz")).await.status,
        StatusCode::OK
    );

    sqlx::query(&format!("alter database \"{db}\" allow_connections true"))
        .execute(&admin)
        .await
        .expect("allow");
    let mut back = app.send(Call::new(Method::GET, "/readyz")).await;
    for _ in 0..20 {
        if back.status == StatusCode::OK {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        back = app.send(Call::new(Method::GET, "/readyz")).await;
    }
    assert_eq!(back.status, StatusCode::OK, "ready again without a restart");
    assert_eq!(back.body["checks"]["database"], "ok");
    assert_eq!(back.body["checks"]["idempotency_store"], "ok");
    admin.close().await;
    app.close().await;
}

/// A replica whose idempotency store cannot be reached is not ready (its Tier 1 routes would
/// answer 503), and the body says which dependency failed.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn readiness_sees_the_idempotency_store(pool: PgPool) {
    let app = TestApp::with(
        &pool,
        crate::helpers::Options {
            unreachable_store: true,
            ..crate::helpers::Options::default()
        },
    )
    .await;
    let ready = app.send(Call::new(Method::GET, "/readyz")).await;
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        ready.text
    );
    assert_eq!(ready.body["status"], "unavailable");
    assert_eq!(ready.body["checks"]["database"], "ok");
    assert_eq!(ready.body["checks"]["idempotency_store"], "unavailable");
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn graceful_shutdown_finishes_in_flight_requests(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("bye@example.com").await;
    let mut server = app.spawn().await;
    let in_flight = tokio::spawn(post_http_with(
        server.client.clone(),
        server.url("/probe/items"),
        token,
        Some(Uuid::new_v4()),
        json!({ "label": "last" }),
        vec![(SLEEP_HEADER, "400".to_owned())],
    ));
    tokio::time::sleep(Duration::from_millis(150)).await;
    server.trigger_shutdown();
    let response = in_flight.await.expect("join");
    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
    tokio::time::timeout(Duration::from_secs(5), &mut server.task)
        .await
        .expect("server stopped")
        .expect("join")
        .expect("serve");
    assert_eq!(
        app.count("select count(*) from probe_items where label = 'last'")
            .await,
        1
    );
    app.close().await;
}

/// Work spawned off a request (here the release of a key whose claim was dropped, waiting for
/// a store connection) is waited for when the server stops, before the process's runtime ends:
/// the key ends released, not in flight until stale.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn shutdown_waits_for_pending_key_releases(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (user_id, _) = app.user("drain@example.com").await;
    let key = raptor_idempotency::IdempotencyKey::parse(&Uuid::new_v4().to_string()).expect("key");
    let url = crate::helpers::database_url(&pool);
    // The server on a runtime of its own, dropped once `serve_state` returns, as the binary's
    // is when `main` returns.
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let pool = sqlx::PgPool::connect(&url).await.expect("pool");
            let idempotency = raptor_idempotency::IdempotencyConfig {
                // A long store timeout, so the release waits for a connection, not gives up.
                store_timeout: Duration::from_secs(20),
                ..raptor_idempotency::IdempotencyConfig::default()
            };
            let state = raptor_api::ApiState::new(
                pool,
                raptor_api::ApiConfig::default(),
                idempotency,
                std::sync::Arc::new(raptor_api::SystemClock),
            );
            let claim = state
                .idempotency
                .claim(raptor_idempotency::ClaimRequest {
                    scope_user_id: Some(user_id),
                    endpoint: "POST /probe/items".to_owned(),
                    key,
                    request_hash: "drain".to_owned(),
                    ttl: Duration::from_secs(60),
                    tier: raptor_idempotency::Tier::FailClosed,
                    replay: raptor_idempotency::Replay::Stored,
                })
                .await
                .expect("claimed");
            // Every store connection busy for a while (other requests' claims).
            let store = state.idempotency.store_pool().clone();
            let mut busy = Vec::new();
            for _ in 0..store.options().get_max_connections() {
                busy.push(store.acquire().await.expect("store connection"));
            }
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                drop(busy);
            });
            // The request is gone: its guard spawns the release, which waits for a connection.
            drop(claim);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            // Then the runtime ends, pools and all, as the binary's does: nothing here waits
            // for the release but `serve_state` itself.
            raptor_server::serve_state(listener, state, async {})
                .await
                .expect("serve");
        });
    });
    tokio::task::spawn_blocking(move || server.join())
        .await
        .expect("join")
        .expect("server thread");
    let status: String =
        sqlx::query_scalar("select status from idempotency_keys where idem_key = $1")
            .bind(key.to_string())
            .fetch_one(&app.pool)
            .await
            .expect("status");
    assert_eq!(status, "released");
    app.close().await;
}

async fn cli(pool: &PgPool, args: &[&str]) -> Value {
    let url = crate::helpers::database_url(pool);
    let mut argv = vec!["raptor", "--database-url", url.as_str()];
    argv.extend_from_slice(args);
    let cli = Cli::try_parse_from(argv).expect("arguments parse");
    let mut out = Vec::new();
    raptor_server::run(cli, &mut out)
        .await
        .expect("command succeeds");
    serde_json::from_slice(&out).unwrap_or_else(|err| {
        panic!(
            "{args:?} printed {:?}: {err}",
            String::from_utf8_lossy(&out)
        )
    })
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn cli_commands_print_json(pool: PgPool) {
    let created = cli(&pool, &["users", "create", "--email", "cli@example.com"]).await;
    let user_id = created["user_id"].as_i64().expect("user_id");
    let token = created["token"].as_str().expect("token").to_owned();
    assert!(token.len() >= 32);

    let app = TestApp::new(&pool).await;
    let account = app.get("/api/trading/account", &token).await;
    assert_eq!(account.status, StatusCode::OK);
    assert_eq!(account.body["cash"], "100000.00");
    // The token expires like a session (RAPTOR_SESSION_TTL_DAYS, 30), or after --ttl-days.
    let days_left = |user_id: i64| {
        let pool = app.pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<f64>>(
                "select (extract(epoch from expires_at - now()) / 86400)::float8 from api_tokens
                  where user_id = $1",
            )
            .bind(i32::try_from(user_id).expect("id"))
            .fetch_one(&pool)
            .await
            .expect("token row")
        }
    };
    let left = days_left(user_id).await.expect("the token expires");
    assert!((29.9..=30.0).contains(&left), "{left} days");
    let short = cli(
        &pool,
        &[
            "users",
            "create",
            "--email",
            "brief@example.com",
            "--ttl-days",
            "2",
        ],
    )
    .await;
    let left = days_left(short["user_id"].as_i64().expect("id"))
        .await
        .expect("the token expires");
    assert!((1.9..=2.0).contains(&left), "{left} days");

    let op = cli(
        &pool,
        &[
            "users",
            "create",
            "--email",
            "boss@example.com",
            "--role",
            "operator",
        ],
    )
    .await;
    let flag = app
        .send(
            Call::new(Method::PUT, "/api/admin/flags/FLAG_IDEMPOTENCY_MIDDLEWARE")
                .token(op["token"].as_str().expect("token"))
                .json(&json!({ "enabled": true })),
        )
        .await;
    assert_eq!(flag.status, StatusCode::OK);

    let service = cli(&pool, &["service-tokens", "create", "--name", "ledger"]).await;
    let service_token = service["token"].as_str().expect("token");
    let probe = app
        .post(
            "/probe/items",
            service_token,
            Some(Uuid::new_v4()),
            &json!({ "label": "svc" }),
        )
        .await;
    assert_eq!(probe.status, StatusCode::CREATED);
    let scope: Option<i32> = sqlx::query_scalar("select scope_user_id from idempotency_keys")
        .fetch_one(&app.pool)
        .await
        .expect("key row");
    assert_eq!(scope, None, "service principals have a NULL scope");

    let quote = cli(
        &pool,
        &[
            "quotes", "set", "AAPL", "--bid", "189.90", "--ask", "190.10",
        ],
    )
    .await;
    assert_eq!(quote["symbol"], "AAPL");
    assert_eq!(quote["ask"], "190.10");

    sqlx::query("update idempotency_keys set expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .expect("expire");
    let cleanup = cli(&pool, &["idempotency", "cleanup", "--batch-size", "10"]).await;
    assert_eq!(cleanup, json!({ "deleted": 1 }));

    let erased = cli(&pool, &["gdpr", "erase", "--user-id", &user_id.to_string()]).await;
    assert_eq!(erased["user_id"], user_id);
    let gone = app.get("/api/trading/account", &token).await;
    assert_eq!(gone.status, StatusCode::UNAUTHORIZED);

    let migrated = cli(&pool, &["migrate"]).await;
    assert_eq!(migrated, json!({ "migrated": true }));
    app.close().await;
}

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
    let cli =
        Cli::try_parse_from(["raptor", "--request-timeout-secs", "60", "serve"]).expect("parses");
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
        "serve",
    ])
    .expect("parses");
    cli.config
        .validate()
        .expect("transaction pool mode with role settings");
}

/// A large account's export is streamed in chunks (no `Content-Length`, many body frames,
/// none larger than the server's chunk size plus one row), and is one whole JSON document with
/// every row.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn gdpr_export_of_a_large_account_is_streamed(pool: PgPool) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let app = TestApp::new(&pool).await;
    let (user_id, token) = app.user("large@example.com").await;
    sqlx::query(
        "insert into audit_log (user_id, action, context)
         select $1, 'bulk.row', jsonb_build_object('n', g, 'pad', repeat('x', 200))
           from generate_series(1, 6000) g",
    )
    .bind(user_id)
    .execute(&app.pool)
    .await
    .expect("bulk rows");
    let request = axum::http::Request::builder()
        .uri("/api/account/export")
        .header("authorization", format!("Bearer {token}"))
        .body(axum::body::Body::empty())
        .expect("request");
    let response = app.router.clone().oneshot(request).await.expect("response");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response.headers().get("content-length").is_none(),
        "not buffered whole: {:?}",
        response.headers()
    );
    let mut body = response.into_body();
    let (mut frames, mut largest, mut bytes) = (0, 0, Vec::new());
    while let Some(frame) = body.frame().await {
        let data = frame.expect("frame").into_data().expect("data");
        frames += 1;
        largest = largest.max(data.len());
        bytes.extend_from_slice(&data);
    }
    assert!(frames > 10, "{frames} frames for {} bytes", bytes.len());
    assert!(largest < 128 * 1024, "a frame of {largest} bytes");
    let export: Value = serde_json::from_slice(&bytes).expect("one JSON document");
    assert_eq!(export["user"]["email"], "large@example.com");
    let audit = export["audit_log"].as_array().expect("audit rows");
    assert_eq!(
        audit
            .iter()
            .filter(|row| row["action"] == "bulk.row")
            .count(),
        6000
    );
    assert_eq!(export["account"].as_array().map(Vec::len), Some(1));
    assert!(export["billing_customer"].is_null());
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn gdpr_export_includes_idempotency_keys_and_erasure_removes_them(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (user_id, token) = app.user("gdpr@example.com").await;
    app.post(
        "/probe/items",
        &token,
        Some(Uuid::new_v4()),
        &json!({ "label": "mine" }),
    )
    .await;
    let export = app.get("/api/account/export", &token).await;
    assert_eq!(export.status, StatusCode::OK, "{}", export.text);
    assert_eq!(export.body["user"]["email"], "gdpr@example.com");
    assert_eq!(
        export.body["idempotency_keys"].as_array().map(Vec::len),
        Some(1)
    );
    let erased = app
        .post("/api/account/erasure", &token, None, &json!({}))
        .await;
    assert_eq!(erased.status, StatusCode::OK, "{}", erased.text);
    for table in [
        "idempotency_keys where scope_user_id",
        "audit_log where user_id",
        "users where id",
        "paper_accounts where user_id",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("select count(*) from {table} = $1"))
            .bind(user_id)
            .fetch_one(&app.pool)
            .await
            .expect("count");
        assert_eq!(n, 0, "{table}");
    }
    app.close().await;
}

#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn cors_for_the_web_app(pool: PgPool) {
    let origin = "https://app.antlers.example";
    let options = crate::helpers::Options {
        api: raptor_api::ApiConfig {
            cors_origins: vec![origin.to_owned()],
            ..raptor_api::ApiConfig::default()
        },
        ..crate::helpers::Options::default()
    };
    let app = TestApp::with(&pool, options).await;
    let preflight = app
        .send(
            Call::new(Method::OPTIONS, "/api/trading/orders")
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header(
                    "access-control-request-headers",
                    "idempotency-key,authorization,content-type",
                ),
        )
        .await;
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some(origin)
    );
    let allowed = preflight
        .header("access-control-allow-headers")
        .unwrap_or_default()
        .to_owned();
    assert!(allowed.contains("idempotency-key"), "{allowed}");

    let (_, token) = app.user("cors@example.com").await;
    let simple = app
        .send(
            Call::new(Method::GET, "/api/trading/account")
                .token(&token)
                .header("origin", origin),
        )
        .await;
    let exposed = simple
        .header("access-control-expose-headers")
        .unwrap_or_default()
        .to_owned();
    for header in ["idempotent-replayed", "retry-after", "x-request-id"] {
        assert!(exposed.contains(header), "{exposed}");
    }
    let foreign = app
        .send(
            Call::new(Method::GET, "/api/trading/account")
                .token(&token)
                .header("origin", "https://evil.example"),
        )
        .await;
    assert_eq!(foreign.header("access-control-allow-origin"), None);
    app.close().await;
}

/// Errors are RFC 9457 problem details (keeping `error`, `message` and the context members);
/// a 401 names its scheme; the `type` resolves to the code's section of `/docs/errors`.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn errors_are_problem_details(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let unauthenticated = app.get("/api/trading/account", "nope").await;
    assert_eq!(unauthenticated.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        unauthenticated.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(unauthenticated.header("www-authenticate"), Some("Bearer"));
    let body = &unauthenticated.body;
    assert_eq!(body["error"], "unauthenticated");
    assert_eq!(body["type"], "/docs/errors#unauthenticated");
    assert_eq!(body["title"], "Unauthorized");
    assert_eq!(body["status"], 401);
    assert_eq!(body["detail"], body["message"]);
    let request_id = unauthenticated.header("x-request-id").expect("request id");
    assert_eq!(body["instance"], format!("urn:request:{request_id}"));

    // The safety net (a 405 from the router) and an idempotency reply go through it too.
    let (_, token) = app.user("problems@example.com").await;
    let wrong_method = app
        .send(Call::new(Method::PATCH, "/api/trading/orders").token(&token))
        .await;
    assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong_method.body["type"], "/docs/errors#method_not_allowed");
    let bad_key = app
        .send(
            Call::new(Method::POST, "/api/trading/orders")
                .token(&token)
                .key("not-a-uuid")
                .json(&serde_json::json!({})),
        )
        .await;
    assert_eq!(bad_key.status, StatusCode::BAD_REQUEST);
    assert_eq!(bad_key.body["type"], "/docs/errors#idempotency_key_invalid");
    assert_eq!(
        bad_key.header("content-type"),
        Some("application/problem+json")
    );

    // Health answers are not errors: /readyz keeps its own shape.
    let docs = app.send(Call::new(Method::GET, "/docs/errors")).await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(
        docs.text.contains("id=\"unauthenticated\""),
        "the anchor exists"
    );
    app.close().await;
}
