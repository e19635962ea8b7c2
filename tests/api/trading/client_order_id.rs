//! The derived `client_order_id`: stable across the attempts of one key's lifetime, new after
//! the key expired, and derived even with the kill switch off.

use raptor_api::codes::ErrorCode;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, Call, Options, Order, TestApp};

/// A key reused after it expired executes (the contract: an expired key is absent), with a new
/// derived client_order_id; within one lifetime every retry derives the same one.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn expired_key_reuse_executes_with_a_new_client_order_id(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let one_share = Order::market("AAPL").buy().qty("1").json();
        let (_, token) = app.user("reuse@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let key = Uuid::new_v4();
        let first = app.create_order(&token, key, &one_share).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

        // A day later the key has expired (and the order is as old as its key).
        app.expire_keys().await;
        app.execute("update paper_orders set created_at = created_at - interval '25 hours'")
            .await;
        let reused = app.create_order(&token, key, &one_share).await;
        assert_eq!(reused.status, StatusCode::CREATED, "{}", reused.text);
        assert_eq!(reused.header("idempotent-replayed"), Some("false"));
        assert_ne!(
            reused.body["client_order_id"],
            first.body["client_order_id"]
        );
        assert_ne!(reused.body["id"], first.body["id"]);
        let replay = app.create_order(&token, key, &one_share).await;
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(
            replay.body["client_order_id"],
            reused.body["client_order_id"]
        );
        assert_eq!(app.order_count().await, 2);
        // One acceptance row per order, naming the id each one got (the attempt with the taken
        // id wrote none).
        let accepted: Vec<String> = sqlx::query_scalar(
            "select context->>'client_order_id' from audit_log
              where action = 'order.accepted' order by id",
        )
        .fetch_all(&app.pool)
        .await
        .expect("audit");
        assert_eq!(
            accepted,
            [
                &first.body["client_order_id"],
                &reused.body["client_order_id"]
            ]
            .map(|id| id.as_str().unwrap_or_default().to_owned())
        );
    })
    .await;
}

/// Within one lifetime, an attempt released mid-flight (the client gave up) and its retry derive
/// the same client_order_id, which differs from another key's.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn derived_client_order_id_is_stable_across_a_released_attempt(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let one_share = Order::market("AAPL").buy().qty("1").json();
        let (_, token) = app.user("stable@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let key = Uuid::new_v4();
        // Hold the account row so that the first attempt waits inside its transaction, then give up.
        let holder = app.lock("select 1 from paper_accounts for update").await;
        let call = Call::new(Method::POST, "/api/trading/orders")
            .token(&token)
            .key(key)
            .json(&one_share);
        let gave_up = tokio::time::timeout(Duration::from_millis(300), app.send(call)).await;
        assert!(gave_up.is_err());
        holder.rollback().await.expect("unlock");
        app.wait_for_key_status(key, "released", Duration::from_secs(3))
            .await;
        let lineage_before = app.lineage().await;
        let retry = app.create_order(&token, key, &one_share).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        let lineage_after = app.lineage().await;
        assert_eq!(lineage_before, lineage_after);
        let other = app.create_order(&token, Uuid::new_v4(), &one_share).await;
        assert_ne!(other.body["client_order_id"], retry.body["client_order_id"]);
        assert_eq!(app.order_count().await, 2);
    })
    .await;
}

/// With the kill switch off a valid key still derives the client_order_id, so the same request
/// retried after the switch is back on cannot execute a second time.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn kill_switch_off_still_derives_the_client_order_id(pool: PgPool) {
    let mut options = Options::default();
    options.idempotency.flag_default = false;
    TestApp::run(&pool, options, async |app| {
        let one_share = Order::market("AAPL").buy().qty("1").json();
        let (_, token) = app.user("switch@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let key = Uuid::new_v4();
        let off = app.create_order(&token, key, &one_share).await;
        assert_eq!(off.status, StatusCode::CREATED, "{}", off.text);
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);

        let on = app.replica(Options::default()).await;
        let retry = on.create_order(&token, key, &one_share).await;
        assert_problem(
            &retry,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::DuplicateClientOrderId,
        );
        assert_eq!(app.order_count().await, 1);
    })
    .await;
}

/// A reset has a natural key too, derived from the account and the `Idempotency-Key`: with the
/// kill switch off (no key rows), the retried reset is refused (`422 duplicate_reset`) instead
/// of wiping the trade made since the first one; a reset with another key runs.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn kill_switch_off_a_retried_reset_is_refused(pool: PgPool) {
    let mut options = Options::default();
    options.idempotency.flag_default = false;
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("reset-twice@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let key = Uuid::new_v4();
        let first = app.reset_account(&token, key).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        let trade = Order::market("AAPL").buy().qty("1").json();
        let trade = app.create_order(&token, Uuid::new_v4(), &trade).await;
        assert_eq!(trade.status, StatusCode::CREATED, "{}", trade.text);

        let retry = app.reset_account(&token, key).await;
        assert_problem(
            &retry,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::DuplicateReset,
        );
        assert_eq!(
            app.account(&token).await.body["cash"],
            "99810.00",
            "not wiped"
        );
        assert_eq!(
            app.count("select count(*) from audit_log where action = 'account.reset'")
                .await,
            1
        );
        let other = app.reset_account(&token, Uuid::new_v4()).await;
        assert_eq!(other.status, StatusCode::OK, "{}", other.text);
        assert_eq!(other.body["cash"], "100000.00");
    })
    .await;
}
