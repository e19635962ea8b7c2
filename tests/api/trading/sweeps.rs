//! Quote sweeps: a quote update commits as a numbered event and its resting orders are judged
//! in per-account transactions, by the request or by any replica's sweeper, each against the
//! event that crossed it: in event order, never skipped, filled at most once, and never against
//! an event older than the order.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{dec, Options, Order, TestApp};

impl TestApp {
    /// Sets a quote without sweeping (a zero budget): its sweeps stay queued.
    async fn quote_unswept(&self, symbol: &str, bid: &str, ask: &str) -> Value {
        let quote = raptor_api::trading::set_quote(
            &self.state,
            None,
            symbol,
            dec(bid),
            dec(ask),
            Some(Duration::ZERO),
        )
        .await
        .expect("set quote");
        serde_json::to_value(quote).expect("json")
    }

    async fn pending_sweeps(&self) -> i64 {
        self.count("select count(*) from quote_sweeps").await
    }
}

/// An event that crossed a resting order is not skipped when a later one uncrosses it before
/// the sweep runs: the order fills at its limit, and its fill's audit row names that event.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_crossing_event_is_never_skipped(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("cross@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("1").gtc().json(),
            )
            .await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);

        let crossing = app.quote_unswept("AAPL", "98.00", "99.00").await;
        assert_eq!(crossing["pending_accounts"], 1, "{crossing}");
        assert_eq!(crossing["filled_order_ids"], serde_json::json!([]));
        let uncrossing = app.quote_unswept("AAPL", "104.00", "105.00").await;
        assert_eq!(app.pending_sweeps().await, 2);

        let swept = raptor_api::trading::sweep_quotes(&app.state)
            .await
            .expect("sweep");
        assert_eq!(swept, 2, "both events swept, in order");
        assert_eq!(app.pending_sweeps().await, 0);
        let order = app.order(&token, resting.id()).await;
        assert_eq!(order.body["status"], "filled", "{}", order.text);
        assert_eq!(order.body["filled_avg_price"], "100.00");
        let event: i64 = app
            .scalar("select (context->>'quote_event_id')::bigint from audit_log where action = 'order.filled'")
            .await;
        assert_eq!(Value::from(event), crossing["sequence"]);
        assert_ne!(crossing["sequence"], uncrossing["sequence"]);
        assert_eq!(app.count("select count(*) from paper_fills").await, 1);
    })
    .await;
}

/// An order placed after an event was judged at placement against a newer quote: an older
/// event still queued for its account does not fill it at the older prices.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_order_is_not_judged_against_an_older_event(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("older@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        // An old resting order, so the account is queued for every AAPL event.
        let old = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "50.00").buy().qty("1").gtc().json(),
            )
            .await;
        assert_eq!(old.body["status"], "new");
        app.quote_unswept("AAPL", "98.00", "99.00").await;
        app.quote_unswept("AAPL", "104.00", "105.00").await;
        // Placed against 105: rests. The queued event at 99 would cross it.
        let new = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("1").gtc().json(),
            )
            .await;
        assert_eq!(new.body["status"], "new", "{}", new.text);

        raptor_api::trading::sweep_quotes(&app.state)
            .await
            .expect("sweep");
        assert_eq!(app.pending_sweeps().await, 0);
        assert_eq!(app.order(&token, new.id()).await.body["status"], "new");
        assert_eq!(app.order(&token, old.id()).await.body["status"], "new");
        assert_eq!(app.count("select count(*) from paper_fills").await, 0);
    })
    .await;
}

/// Two replicas' sweepers working one event's queue together fill every crossed order exactly
/// once and leave nothing queued.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn two_sweepers_fill_each_order_once(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        app.quote("AAPL", "101.00", "102.00").await;
        let mut tokens = Vec::new();
        for i in 0..12 {
            let (_, token) = app.user(&format!("sweep-{i}@example.com")).await;
            for limit in ["100.00", "99.50"] {
                let order = app
                    .create_order(
                        &token,
                        Uuid::new_v4(),
                        &Order::limit("AAPL", limit).buy().qty("1").gtc().json(),
                    )
                    .await;
                assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
            }
            tokens.push(token);
        }
        let quote = app.quote_unswept("AAPL", "97.00", "98.00").await;
        assert_eq!(quote["pending_accounts"], 12);

        let other = app.replica(Options::default()).await;
        let (a, b) = tokio::join!(
            raptor_api::trading::sweep_quotes(&app.state),
            raptor_api::trading::sweep_quotes(&other.state)
        );
        let (a, b) = (a.expect("sweeper a"), b.expect("sweeper b"));
        assert_eq!(a + b, 12, "each account swept once ({a} + {b})");
        assert_eq!(app.pending_sweeps().await, 0);
        assert_eq!(app.count("select count(*) from paper_fills").await, 24);
        assert_eq!(
            app.count("select count(distinct order_id) from paper_fills")
                .await,
            24
        );
        assert_eq!(
            app.count("select count(*) from paper_orders where status = 'new'")
                .await,
            0
        );
        for token in &tokens {
            let account = app.account(token).await.body;
            assert_eq!(account["cash"], "99800.50", "{account}");
        }
    })
    .await;
}

/// A sweep that cannot lock its account (a long transaction holds it) is put back with a
/// back-off and does not hold up the other accounts; it is done once the account is free.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_failing_sweep_is_retried_without_holding_up_others(pool: PgPool) {
    let options = Options {
        db_timeouts: Some((Duration::from_millis(200), Duration::from_secs(5))),
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        app.quote("AAPL", "101.00", "102.00").await;
        let (held_id, held) = app.user("held@example.com").await;
        let (_, free) = app.user("free@example.com").await;
        for token in [&held, &free] {
            app.create_order(
                token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("1").gtc().json(),
            )
            .await;
        }
        app.quote_unswept("AAPL", "98.00", "99.00").await;
        let holder = app
            .lock_where(
                "select 1 from paper_accounts where user_id = $1 for update",
                held_id,
            )
            .await;
        let swept = raptor_api::trading::sweep_quotes(&app.state)
            .await
            .expect("sweep");
        assert_eq!(swept, 1, "the free account was swept");
        let attempts: i32 = app
            .scalar_where(
                "select attempts from quote_sweeps where user_id = $1",
                held_id,
            )
            .await;
        assert_eq!(attempts, 1, "the held one was put back");
        holder.rollback().await.expect("release");
        app.execute("update quote_sweeps set not_before = now()")
            .await;
        assert_eq!(
            raptor_api::trading::sweep_quotes(&app.state)
                .await
                .expect("sweep"),
            1
        );
        assert_eq!(app.pending_sweeps().await, 0);
        assert_eq!(
            app.count("select count(*) from paper_orders where status = 'filled'")
                .await,
            2
        );
    })
    .await;
}

/// `serve`'s sweeper works what quote updates left queued.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_sweeper_finishes_what_a_quote_update_left(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("later@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("1").gtc().json(),
            )
            .await;
        app.quote_unswept("AAPL", "98.00", "99.00").await;
        let sweeper =
            raptor_server::spawn_quote_sweeper(app.state.clone(), Duration::from_millis(20));
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while app.pending_sweeps().await > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        sweeper.abort();
        assert_eq!(app.pending_sweeps().await, 0);
        assert_eq!(
            app.order(&token, resting.id()).await.body["status"],
            "filled"
        );
    })
    .await;
}
