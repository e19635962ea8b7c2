//! Hardening (review and black-box findings): each test fails on the code before its fix.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{Call, Options, TestApp, TestResponse};

fn buy(symbol: &str, qty: &str) -> Value {
    json!({ "symbol": symbol, "qty": qty, "side": "buy", "type": "market" })
}

async fn keyed(app: &TestApp, token: &str, key: Uuid, body: &Value) -> TestResponse {
    app.post("/api/trading/orders", token, Some(key), body).await
}

/// Defect 1: a key reused after it expired executes (the contract: an expired key is absent),
/// with a new derived client_order_id; within one lifetime every retry derives the same one.
#[sqlx::test(migrator = "raptor_api::MIGRATOR")]
async fn expired_key_reuse_executes_with_a_new_client_order_id(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("reuse@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    let first = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

    // A day later the key has expired (and the order is as old as its key).
    sqlx::query("update idempotency_keys set expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .expect("expire key");
    sqlx::query("update paper_orders set created_at = created_at - interval '25 hours'")
        .execute(&app.pool)
        .await
        .expect("age order");
    let reused = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(reused.status, StatusCode::CREATED, "{}", reused.text);
    assert_eq!(reused.header("idempotent-replayed"), Some("false"));
    assert_ne!(reused.body["client_order_id"], first.body["client_order_id"]);
    assert_ne!(reused.body["id"], first.body["id"]);
    let replay = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.body["client_order_id"], reused.body["client_order_id"]);
    assert_eq!(app.count("select count(*) from paper_orders").await, 2);
    app.close().await;
}

/// Defect 1, within one lifetime: an attempt released mid-flight (the client gave up) and its
/// retry derive the same client_order_id, which differs from another key's.
#[sqlx::test(migrator = "raptor_api::MIGRATOR")]
async fn derived_client_order_id_is_stable_across_a_released_attempt(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("stable@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    // Hold the account row so that the first attempt waits inside its transaction, then give up.
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from paper_accounts for update")
        .execute(&mut *holder)
        .await
        .expect("lock account");
    let call = Call::new(Method::POST, "/api/trading/orders")
        .token(&token)
        .key(key)
        .json(&buy("AAPL", "1"));
    let gave_up =
        tokio::time::timeout(std::time::Duration::from_millis(300), app.send(call)).await;
    assert!(gave_up.is_err());
    holder.rollback().await.expect("unlock");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let status: Option<String> = sqlx::query_scalar("select status from idempotency_keys")
            .fetch_optional(&app.pool)
            .await
            .expect("status");
        if status.as_deref() == Some("released") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never released: {status:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let lineage_before: Uuid = sqlx::query_scalar("select lineage from idempotency_keys")
        .fetch_one(&app.pool)
        .await
        .expect("lineage");
    let retry = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
    let lineage_after: Uuid = sqlx::query_scalar("select lineage from idempotency_keys")
        .fetch_one(&app.pool)
        .await
        .expect("lineage");
    assert_eq!(lineage_before, lineage_after);
    let other = keyed(&app, &token, Uuid::new_v4(), &buy("AAPL", "1")).await;
    assert_ne!(other.body["client_order_id"], retry.body["client_order_id"]);
    assert_eq!(app.count("select count(*) from paper_orders").await, 2);
    app.close().await;
}

/// Defect 7: with the kill switch off a valid key still derives the client_order_id, so the
/// same request retried after the switch is back on cannot execute a second time.
#[sqlx::test(migrator = "raptor_api::MIGRATOR")]
async fn kill_switch_off_still_derives_the_client_order_id(pool: PgPool) {
    let mut options = Options::default();
    options.idempotency.flag_default = false;
    let app = TestApp::with(&pool, options).await;
    let (_, token) = app.user("switch@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let key = Uuid::new_v4();
    let off = keyed(&app, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(off.status, StatusCode::CREATED, "{}", off.text);
    assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);

    let on = TestApp::new(&pool).await;
    let retry = keyed(&on, &token, key, &buy("AAPL", "1")).await;
    assert_eq!(retry.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", retry.text);
    assert_eq!(retry.body["error"], "duplicate_client_order_id");
    assert_eq!(app.count("select count(*) from paper_orders").await, 1);
    on.close().await;
    app.close().await;
}
