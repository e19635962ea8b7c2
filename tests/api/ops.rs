//! Operations: request ids, readiness (the database, the idempotency store, draining),
//! graceful shutdown, CORS for the web app, and the request timeout.

use raptor_api::codes::ErrorCode;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, label, post_http_with, Call, Options, TestApp};
use crate::probe::SLEEP_HEADER;

/// A client's `x-request-id` is echoed and logged only when it is a short, printable id
/// (otherwise one is generated), and audit rows always carry the server's own id (a UUID),
/// never the client's text.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn request_ids_propagate_to_responses_and_audit(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("rid@example.com").await;
        let audited = async |label: &str| -> String {
            app.scalar_where::<Option<String>, _>(
                "select request_id from audit_log
                  where action = 'probe.created' and context->>'label' = $1",
                label,
            )
            .await
            .expect("a request id")
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
    })
    .await;
}

/// `/readyz` answers 503 while the database refuses connections and is ready again once it
/// accepts them, without a restart; `/healthz` stays 200 throughout.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn readiness_follows_the_database(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let db: String = app.scalar("select current_database()").await;
        let ready = app.get_public("/readyz").await;
        assert_eq!(ready.status, StatusCode::OK);
        assert_eq!(app.get_public("/healthz").await.status, StatusCode::OK);

        // Take the database away: no new connections, existing ones terminated.
        let admin = app.maintenance_pool().await;
        sqlx::query(&format!("alter database \"{db}\" allow_connections false"))
            .execute(&admin)
            .await
            .expect("disallow");
        sqlx::query(
            "select pg_terminate_backend(pid) from pg_stat_activity \
             where datname = $1 and pid <> pg_backend_pid()",
        )
        .bind(&db)
        .execute(&admin)
        .await
        .expect("terminate");
        let down = app.get_public("/readyz").await;
        assert_eq!(
            down.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            down.text
        );
        assert_eq!(down.body["status"], "unavailable");
        assert_eq!(app.get_public("/healthz").await.status, StatusCode::OK);

        sqlx::query(&format!("alter database \"{db}\" allow_connections true"))
            .execute(&admin)
            .await
            .expect("allow");
        let mut back = app.get_public("/readyz").await;
        for _ in 0..20 {
            if back.status == StatusCode::OK {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            back = app.get_public("/readyz").await;
        }
        assert_eq!(back.status, StatusCode::OK, "ready again without a restart");
        assert_eq!(back.body["checks"]["database"], "ok");
        assert_eq!(back.body["checks"]["idempotency_store"], "ok");
    })
    .await;
}

/// A replica whose idempotency store cannot be reached is not ready (its Tier 1 routes would
/// answer 503), and the body says which dependency failed.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn readiness_sees_the_idempotency_store(pool: PgPool) {
    let options = Options {
        unreachable_store: true,
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let ready = app.get_public("/readyz").await;
        assert_eq!(
            ready.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            ready.text
        );
        assert_eq!(ready.body["status"], "unavailable");
        assert_eq!(ready.body["checks"]["database"], "ok");
        assert_eq!(ready.body["checks"]["idempotency_store"], "unavailable");
    })
    .await;
}

/// With every connection of the request pool and of the store pool held (a replica under
/// load), `/readyz` still answers 200 on its own connections: load does not take the replica
/// out of rotation.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn readiness_answers_while_the_request_pools_are_saturated(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let store = app.state.idempotency.store_pool();
        let mut held = Vec::new();
        for pool in [&app.pool, store] {
            for _ in 0..pool.options().get_max_connections() {
                held.push(pool.acquire().await.expect("hold a connection"));
            }
            let more = tokio::time::timeout(Duration::from_millis(1500), pool.acquire()).await;
            assert!(
                !matches!(more, Ok(Ok(_))),
                "the pool lent a connection past its size"
            );
        }
        for _ in 0..3 {
            let ready = app.get_public("/readyz").await;
            assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
            assert_eq!(ready.body["checks"]["database"], "ok");
            assert_eq!(ready.body["checks"]["idempotency_store"], "ok");
        }
        drop(held);
    })
    .await;
}

/// A request in flight when the server is told to stop is answered (and committed) before the
/// server stops.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn graceful_shutdown_finishes_in_flight_requests(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("bye@example.com").await;
        let mut server = app.spawn().await;
        let in_flight = tokio::spawn(post_http_with(
            server.client.clone(),
            server.url("/probe/items"),
            token,
            Some(Uuid::new_v4()),
            label("last"),
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
        assert_eq!(app.probe_items("last").await, 1);
    })
    .await;
}

/// Work spawned off a request (here the release of a key whose claim was dropped, waiting for
/// a store connection) is waited for when the server stops, before the process's runtime ends:
/// the key ends released, not in flight until stale.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn shutdown_waits_for_pending_key_releases(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, _) = app.user("drain@example.com").await;
        let id = Uuid::new_v4();
        let key = raptor_idempotency::IdempotencyKey::parse(&id.to_string()).expect("key");
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
                    .claim(
                        raptor_idempotency::ClaimRequest {
                            scope_user_id: Some(user_id),
                            endpoint: "POST /probe/items".to_owned(),
                            key,
                            request_hash: "drain".to_owned(),
                            ttl: Duration::from_secs(60),
                            tier: raptor_idempotency::Tier::FailClosed,
                            replay: raptor_idempotency::Replay::Stored,
                        },
                        raptor_idempotency::Lent::none(),
                    )
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
        assert_eq!(app.key_status(id).await.as_deref(), Some("released"));
    })
    .await;
}

/// From the shutdown signal on, `/readyz` answers 503 while requests in flight (and new ones
/// during the drain window) are still served, each answer closing its connection; then the
/// server stops cleanly.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn shutdown_drains_with_readyz_503(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("drain@example.com").await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (signal, received) = tokio::sync::oneshot::channel::<()>();
        let shutdown = raptor_server::drain_on(
            app.state.clone(),
            async {
                let _ = received.await;
            },
            Duration::from_millis(800),
        );
        let server = tokio::spawn(raptor_server::serve(listener, app.router.clone(), shutdown));
        let client = reqwest::Client::new();
        let url = |path: &str| format!("http://{addr}{path}");
        let ready = client.get(url("/readyz")).send().await.expect("readyz");
        assert_eq!(ready.status().as_u16(), 200);
        assert_eq!(ready.headers().get("connection"), None, "kept alive");

        // A slow request is in flight when the signal arrives.
        let slow = tokio::spawn(
            client
                .post(url("/probe/items"))
                .bearer_auth(&token)
                .header(SLEEP_HEADER, "400")
                .json(&label("in-flight"))
                .send(),
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        signal.send(()).expect("signal");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let draining = client.get(url("/readyz")).send().await.expect("readyz");
        assert_eq!(draining.status().as_u16(), 503);
        let body: Value = draining.json().await.expect("json");
        assert_eq!(body["status"], "draining");
        let alive = client.get(url("/healthz")).send().await.expect("healthz");
        assert_eq!(alive.status().as_u16(), 200);
        // Answers while draining close their connection: the client's next request opens a
        // new one, where the balancer now sends it.
        assert_eq!(
            alive.headers().get("connection").map(|v| v.as_bytes()),
            Some(&b"close"[..])
        );
        let finished = slow.await.expect("join").expect("in-flight request");
        assert_eq!(finished.status().as_u16(), 201);
        server.await.expect("join").expect("serve");
    })
    .await;
}

/// `raptor healthcheck` (the image's HEALTHCHECK) exits 0 against a ready server, and fails
/// against a draining one.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn healthcheck_command_reads_readyz(pool: PgPool) {
    use clap::Parser;
    TestApp::run(&pool, Options::default(), async |app| {
        let server = app.spawn().await;
        let addr = server.addr.to_string();
        let cli = raptor_server::Cli::try_parse_from(["raptor", "--addr", &addr, "healthcheck"])
            .expect("parse");
        let mut out = Vec::new();
        raptor_server::run(cli, &mut out).await.expect("healthy");
        let printed: Value = serde_json::from_slice(&out).expect("json");
        assert_eq!(printed["readyz"], 200);
        app.state.begin_drain();
        let cli = raptor_server::Cli::try_parse_from(["raptor", "--addr", &addr, "healthcheck"])
            .expect("parse");
        let mut out = Vec::new();
        assert!(
            raptor_server::run(cli, &mut out).await.is_err(),
            "draining is unhealthy"
        );
        server.stop().await;
    })
    .await;
}

/// Only the web app's origin gets CORS headers: the preflight allows `Idempotency-Key` and W3C
/// trace context (`traceparent`, `tracestate`), and
/// answers expose the headers a client reads (`Idempotent-Replayed`, `Retry-After`,
/// `X-Request-Id`).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cors_for_the_web_app(pool: PgPool) {
    let origin = "https://app.antlers.example";
    let options = Options {
        api: raptor_api::ApiConfig {
            cors_origins: vec![origin.to_owned()],
            ..raptor_api::ApiConfig::default()
        },
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let preflight = app
            .send(
                Call::new(Method::OPTIONS, "/api/trading/orders")
                    .header("origin", origin)
                    .header("access-control-request-method", "POST")
                    .header(
                        "access-control-request-headers",
                        "idempotency-key,authorization,content-type,traceparent,tracestate",
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
        for header in ["idempotency-key", "traceparent", "tracestate"] {
            assert!(allowed.contains(header), "{allowed}");
        }

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
    })
    .await;
}

/// A request that outlives `RAPTOR_REQUEST_TIMEOUT_SECS` answers `503 request_timeout` with
/// `Retry-After` (the timeout layer answers bare; the error layer adds it), and what it had
/// written rolls back.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn request_timeout_says_when_to_retry(pool: PgPool) {
    let mut options = Options::default();
    options.api.request_timeout = Duration::from_millis(200);
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("slow@example.com").await;
        let response = app
            .send(
                Call::new(Method::POST, "/probe/items")
                    .token(&token)
                    .key(Uuid::new_v4())
                    .header(SLEEP_HEADER, "2000")
                    .json(&label("too slow")),
            )
            .await;
        assert_problem(
            &response,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::RequestTimeout,
        );
        assert_eq!(response.header("retry-after"), Some("1"));
        assert_eq!(app.probe_items("too slow").await, 0);
    })
    .await;
}
