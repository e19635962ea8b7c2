//! `RAPTOR_DB_POOL_MODE`: in `transaction` mode (PgBouncer transaction pooling) the service
//! must leave no named statement on a server session, because the next transaction on that
//! session may be another client's. Chaos scenario 5 runs the order path through a real
//! PgBouncer; this test runs every kind of statement site (the claim, settling and replaying a
//! key, the kill-switch read, token lookups, the business transaction, the read routes,
//! `/readyz`) in-process and looks at each pooled session afterwards.

use axum::http::StatusCode;
use raptor_db::{self as db, PoolMode};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::helpers::{Options, Order, TestApp};

/// Named statements on every session of `pool` (the probe table and function set-up excepted, which the
/// test harness prepares itself), read in the simple query protocol so that reading them
/// prepares nothing.
async fn named_statements(pool: &PgPool) -> i64 {
    let mut sessions = Vec::new();
    let mut named = 0;
    for _ in 0..pool.size() {
        let mut conn = pool.acquire().await.expect("acquire");
        let row = sqlx::raw_sql(
            "select count(*) from pg_prepared_statements
              where not from_sql and statement not like '%probe%'",
        )
        .fetch_one(&mut *conn)
        .await
        .expect("pg_prepared_statements");
        named += row.get::<i64, _>(0);
        sessions.push(conn);
    }
    named
}

async fn journey(app: &TestApp, email: &str) {
    let (_, token) = app.user(email).await;
    app.quote("AAPL", "189.90", "190.10").await;
    let key = Uuid::new_v4();
    let body = Order::market("AAPL").buy().qty("1").day().json();
    let first = app.create_order(&token, key, &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let replay = app.create_order(&token, key, &body).await;
    assert_eq!(replay.status, StatusCode::CREATED, "{}", replay.text);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    let id = first.body["id"].as_str().expect("order id");
    for path in [
        "/api/trading/account".to_owned(),
        "/api/trading/orders".to_owned(),
        format!("/api/trading/orders/{id}"),
        "/api/trading/positions".to_owned(),
        "/api/account/profile".to_owned(),
    ] {
        let response = app.get(&path, &token).await;
        assert_eq!(response.status, StatusCode::OK, "{path}: {}", response.text);
    }
    let ready = app.get("/readyz", "").await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
}

/// Transaction mode leaves no named statement behind; session mode, the control, does (so the
/// check can tell the two apart). Both serve the same requests.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn transaction_pool_mode_leaves_no_named_statement(pool: PgPool) {
    let options = || Options {
        pool_size: 4,
        ..Options::default()
    };
    // The only test that changes the process-wide mode; other tests running meanwhile only
    // see their statements unnamed for a moment, which is correct in either mode.
    db::set_pool_mode(PoolMode::Transaction);
    TestApp::run(&pool, options(), async |app| {
        journey(app, "txn@example.com").await;
        db::set_pool_mode(PoolMode::Session);
        let business = named_statements(&app.pool).await;
        let store = named_statements(app.state.idempotency.store_pool()).await;
        assert_eq!(
            (business, store),
            (0, 0),
            "named statements left on the business and store pools' sessions in transaction mode"
        );

        let control = app.replica(options()).await;
        journey(&control, "session@example.com").await;
        let business = named_statements(&control.pool).await;
        let store = named_statements(control.state.idempotency.store_pool()).await;
        assert!(
            business > 0 && store > 0,
            "session mode caches named statements: {business} business, {store} store"
        );
    })
    .await;
}
