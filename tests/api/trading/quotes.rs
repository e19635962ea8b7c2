//! Quote-driven fills: a resting limit fills once on racing quotes, an order cannot miss a
//! concurrent quote update, and a quote update expires dead orders, skips blocked accounts and
//! audits a refused re-evaluation once per change of verdict.

use axum::http::{Method, StatusCode};
use raptor_api::codes::ErrorCode;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use super::NEAR;
use crate::helpers::{assert_problem, send, Call, Options, Order, TestApp};

/// A resting limit fills when a quote update makes it marketable, at its limit price, exactly
/// once even when two quote updates race.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn resting_limit_fills_once_on_racing_quotes(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("limit@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let resting = Order::limit("AAPL", "100.00").buy().qty("2").gtc().json();
        let resting = app.create_order(&token, Uuid::new_v4(), &resting).await;
        assert_eq!(resting.status, StatusCode::CREATED, "{}", resting.text);
        assert_eq!(resting.body["status"], "new");
        let id = resting.id();
        let waiting = app.account(&token).await.body;
        assert_eq!(waiting["cash"], "100000.00");
        assert_eq!(
            waiting["buying_power"], "99800.00",
            "reservation at the limit"
        );

        let (a, b) = tokio::join!(
            app.quote("AAPL", "99.00", "99.50"),
            app.quote("AAPL", "98.00", "99.00")
        );
        let filled_by: Vec<&Value> = [&a, &b]
            .into_iter()
            .filter(|q| {
                q["filled_order_ids"]
                    .as_array()
                    .is_some_and(|ids| !ids.is_empty())
            })
            .collect();
        assert_eq!(filled_by.len(), 1, "exactly one update filled it: {a} {b}");

        let filled = app.order(&token, &id).await;
        assert_eq!(filled.body["status"], "filled");
        assert_eq!(
            filled.body["filled_avg_price"], "100.00",
            "a resting limit fills at its limit"
        );
        let after = app.account(&token).await.body;
        assert_eq!(after["cash"], "99800.00");
        assert_eq!(after["buying_power"], "99800.00");
        assert_eq!(app.count("select count(*) from paper_fills").await, 1);
        let quote_fills = app
            .count(
                "select count(*) from audit_log \
                 where action = 'order.filled' and context->>'trigger' = 'quote'",
            )
            .await;
        assert_eq!(quote_fills, 1);
    })
    .await;
}

/// An order racing a quote update waits for it (share lock on the quote row) instead of resting
/// against the old quote and missing the fill.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_order_cannot_miss_a_concurrent_quote_update(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (a_id, a) = app.user("a@example.com").await;
        let (_, c) = app.user("c@example.com").await;
        app.quote("AAPL", "100.00", "101.00").await;
        let limit = Order::limit("AAPL", "90.00").buy().qty("1").json();
        let rests = app.create_order(&a, Uuid::new_v4(), &limit).await;
        assert_eq!(rests.body["status"], "new");

        // Hold A's account so the quote update's sweep of A waits (the quote itself commits).
        let holder = app
            .lock_where(
                "select 1 from paper_accounts where user_id = $1 for update",
                a_id,
            )
            .await;
        let state = app.state.clone();
        let quote = tokio::spawn(async move {
            raptor_api::trading::set_quote(
                &state,
                None,
                "AAPL",
                crate::helpers::dec("80.00"),
                crate::helpers::dec("85.00"),
                None,
            )
            .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let router = app.router.clone();
        let c_order = tokio::spawn(send(
            router,
            Call::new(Method::POST, "/api/trading/orders")
                .token(&c)
                .key(Uuid::new_v4())
                .json(&limit),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        holder.rollback().await.expect("release A");
        let quote = quote.await.expect("join").expect("quote update");
        let c_order = c_order.await.expect("join");
        assert_eq!(quote.filled_order_ids.len(), 1, "A's resting order filled");
        assert_eq!(c_order.status, StatusCode::CREATED, "{}", c_order.text);
        assert_eq!(
            c_order.body["status"], "filled",
            "C saw the new quote: {}",
            c_order.text
        );
        assert_eq!(c_order.body["filled_avg_price"], "85.00");
    })
    .await;
}

/// Quote updates: bad prices are 422; a resting order on an expired contract is expired (its
/// reservation released); an account that cannot trade does not block the update.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn quote_updates_expire_dead_orders_and_skip_blocked_accounts(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, operator) = app.operator("op@example.com").await;
        for bad in [
            json!({ "bid": "1", "ask": "100000000000000" }),
            json!({ "bid": "0.0000001", "ask": "1" }),
            json!({ "bid": "2", "ask": "1" }),
        ] {
            let r = app.put_quote(&operator, "AAPL", &bad).await;
            assert_problem(
                &r,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidQuote,
            );
        }
        let (live_id, live) = app.user("live@example.com").await;
        let (_, token) = app.user("exp@example.com").await;
        app.quote(NEAR, "1.20", "1.30").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let tiny = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "0.0000001").buy().qty("1").json(),
            )
            .await;
        assert_problem(
            &tiny,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );

        let near_limit = Order::limit(NEAR, "1.00").buy().qty("1").gtc().json();
        let dead = app.create_order(&token, Uuid::new_v4(), &near_limit).await;
        assert_eq!(dead.body["status"], "new");
        let blocked = app
            .create_order(
                &live,
                Uuid::new_v4(),
                &Order::limit("AAPL", "95.00").buy().qty("1").gtc().json(),
            )
            .await;
        assert_eq!(blocked.body["status"], "new");
        let aapl = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "96.00").buy().qty("1").gtc().json(),
            )
            .await;
        assert_eq!(aapl.body["status"], "new");
        app.execute_where(
            "update paper_accounts set mode = 'live' where user_id = $1",
            live_id,
        )
        .await;

        let later = app
            .replica(Options {
                now: crate::helpers::test_now() + chrono::Duration::days(18),
                ..Options::default()
            })
            .await;
        later.quote(NEAR, "1.10", "1.20").await;
        let expired = app.order(&token, dead.id()).await;
        assert_eq!(expired.body["status"], "expired");
        assert_eq!(app.audit_count("order.expired").await, 1);

        let filled = later.quote("AAPL", "94.00", "94.50").await;
        assert_eq!(
            filled["filled_order_ids"].as_array().map(Vec::len),
            Some(1),
            "{filled}"
        );
        assert_eq!(filled["filled_order_ids"][0], aapl.body["id"]);
        assert_eq!(
            app.account(&token).await.body["buying_power"],
            app.account(&token).await.body["cash"]
        );
    })
    .await;
}

/// A resting order whose re-evaluation is refused is audited when the verdict changes, not on
/// every quote update.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn evaluation_rejections_are_audited_once_per_change(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("ticks@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        assert_eq!(
            app.create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("1").json()
            )
            .await
            .status,
            StatusCode::CREATED
        );
        let sell = Order::limit("AAPL", "200.00")
            .sell_to_close()
            .qty("1")
            .gtc()
            .json();
        let resting = app.create_order(&token, Uuid::new_v4(), &sell).await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        // The holding disappears behind the order's back (a state the engine must refuse to fill).
        app.execute("update paper_positions set qty = 0, open_expiry_date = null")
            .await;
        for bid in ["201.00", "202.00", "203.00"] {
            app.quote("AAPL", bid, "204.00").await;
        }
        let rows = "select count(*) from audit_log where action = 'order.evaluation_rejected'";
        assert_eq!(app.count(rows).await, 1, "one row for one verdict");
        app.quote("AAPL", "150.00", "151.00").await; // not marketable: the verdict clears
        app.quote("AAPL", "205.00", "206.00").await;
        assert_eq!(
            app.count(rows).await,
            2,
            "a changed verdict is audited again"
        );
    })
    .await;
}
