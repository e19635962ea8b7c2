//! The activity feed: fills, cancels and resets, each with its order, symbol, quantity, price,
//! cash effect and time, paged like the order history.

use std::collections::HashSet;

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use serde_json::Value;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, Options, Order, TestApp};

async fn feed(app: &TestApp, token: &str, query: &str) -> Value {
    let page = app
        .get(&format!("/api/trading/activities?{query}"), token)
        .await;
    assert_eq!(page.status, StatusCode::OK, "{query}: {}", page.text);
    page.body
}

/// A fill, a cancel and a reset each appear once with their cash effect; paging one at a time
/// over the cursor lists the same entries, without repeats; another account sees none of them.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_feed_lists_fills_cancels_and_resets(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("feed@example.com").await;
        let (_, stranger) = app.user("stranger@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let bought = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("2").json(),
            )
            .await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.text);
        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("3").gtc().json(),
            )
            .await;
        assert_eq!(resting.status, StatusCode::CREATED, "{}", resting.text);
        let canceled = app.cancel_order(&token, resting.id()).await;
        assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
        let cash_before_reset = app.account(&token).await.body["cash"].clone();
        let reset = app.reset_account(&token, Uuid::new_v4()).await;
        assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);

        let all = feed(app, &token, "limit=500").await;
        let items = all["data"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 3, "{all}");
        assert_eq!(all["has_more"], false);
        let of = |kind: &str| {
            items
                .iter()
                .find(|a| a["type"] == kind)
                .cloned()
                .unwrap_or_else(|| panic!("no {kind} in {all}"))
        };
        let fill = of("fill");
        assert_eq!(fill["order_id"], bought.body["id"]);
        assert_eq!(fill["symbol"], "AAPL");
        assert_eq!(fill["side"], "buy");
        assert_eq!(fill["qty"], "2");
        assert_eq!(fill["price"], "190.10");
        let fees: f64 = bought.body["fees"]
            .as_str()
            .and_then(|f| f.parse().ok())
            .expect("fees");
        let paid: f64 = fill["cash_delta"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .expect("cash");
        assert!((paid + 380.20 + fees).abs() < 0.001, "{fill}");
        let cancel = of("cancel");
        assert_eq!(cancel["order_id"], resting.body["id"]);
        assert_eq!(cancel["qty"], "3");
        assert_eq!(cancel["price"], "100.00");
        assert_eq!(cancel["cash_delta"], "0.00");
        let reset_entry = of("reset");
        assert!(reset_entry["order_id"].is_null() && reset_entry["symbol"].is_null());
        let before: f64 = cash_before_reset
            .as_str()
            .and_then(|c| c.parse().ok())
            .expect("cash");
        let delta: f64 = reset_entry["cash_delta"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .expect("delta");
        assert!((before + delta - 100_000.0).abs() < 0.001, "{reset_entry}");

        // One at a time, over the cursor.
        let mut seen = Vec::new();
        let mut query = "limit=1".to_owned();
        loop {
            let page = feed(app, &token, &query).await;
            seen.extend(page["data"].as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(next) => query = format!("limit=1&cursor={next}"),
                None => break,
            }
            assert!(seen.len() <= 3, "paging does not end");
        }
        assert_eq!(seen, items, "the same entries, in the same order");
        let ids: HashSet<&str> = seen.iter().filter_map(|a| a["id"].as_str()).collect();
        assert_eq!(ids.len(), 3);

        let theirs = feed(app, &stranger, "").await;
        assert_eq!(theirs["data"], serde_json::json!([]));
        let bad = app.get("/api/trading/activities?cursor=nope", &token).await;
        assert_problem(&bad, StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery);
    })
    .await;
}

fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(y, m, d, h, min, 0)
        .single()
        .expect("instant")
}

fn occurred_at(activity: &Value) -> chrono::DateTime<chrono::Utc> {
    activity["occurred_at"]
        .as_str()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.to_utc())
        .unwrap_or_else(|| panic!("no occurred_at in {activity}"))
}

/// A `day` limit resting at 10:00 New York that the sweep (`raptor orders expire`) expires
/// after the 16:00 close is in the feed once, as an `order_expiry` with its order, symbol,
/// side, the unfilled quantity and the limit price, no cash effect, timed by the database when
/// the sweep ran; a `gtc` order that rests on is not.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_day_order_that_expires_at_the_close_is_in_the_feed(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let (_, token) = morning.user("expiring@example.com").await;
        morning.quote("AAPL", "189.00", "190.00").await;
        let day = Order::limit("AAPL", "150.00").buy().qty("10").json();
        let resting = morning.create_order(&token, Uuid::new_v4(), &day).await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        let gtc = Order::limit("AAPL", "140.00").buy().qty("1").gtc().json();
        let good = morning.create_order(&token, Uuid::new_v4(), &gtc).await;
        assert_eq!(good.body["status"], "new", "{}", good.text);
        assert_eq!(
            feed(morning, &token, "").await["data"],
            serde_json::json!([])
        );

        let evening = morning
            .replica(Options {
                now: at(2026, 12, 1, 21, 30),
                ..Options::default()
            })
            .await;
        let before: chrono::DateTime<chrono::Utc> = evening.scalar("select now()").await;
        let swept = raptor_api::trading::expire_orders(&evening.state)
            .await
            .expect("sweep");
        assert_eq!(swept.orders, 1);
        let after: chrono::DateTime<chrono::Utc> = evening.scalar("select now()").await;

        let page = feed(&evening, &token, "").await;
        let items = page["data"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 1, "{page}");
        let expiry = &items[0];
        assert_eq!(expiry["type"], "order_expiry", "{expiry}");
        assert_eq!(expiry["order_id"], resting.body["id"]);
        assert_eq!(expiry["symbol"], "AAPL");
        assert_eq!(expiry["side"], "buy");
        assert_eq!(expiry["qty"], "10");
        assert_eq!(expiry["price"], "150.00");
        assert_eq!(expiry["cash_delta"], "0.00");
        let time = occurred_at(expiry);
        assert!(
            before <= time && time <= after,
            "{time} not in [{before}, {after}]"
        );

        // A second pass expires nothing and adds nothing.
        let again = raptor_api::trading::expire_orders(&evening.state)
            .await
            .expect("sweep");
        assert_eq!(again.orders, 0);
        assert_eq!(
            feed(&evening, &token, "").await["data"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
    })
    .await;
}

/// The time of a reset is the database's `now()` of the transaction that reset the account,
/// as for the other activities read from audit rows, not the server's clock (here fixed months
/// away from the database's).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_reset_is_timed_by_the_database_clock(pool: PgPool) {
    let server_clock = at(2026, 6, 1, 14, 0);
    let options = Options {
        now: server_clock,
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("reset-clock@example.com").await;
        let before: chrono::DateTime<chrono::Utc> = app.scalar("select now()").await;
        let reset = app.reset_account(&token, Uuid::new_v4()).await;
        assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);
        let after: chrono::DateTime<chrono::Utc> = app.scalar("select now()").await;
        assert!(
            (before - server_clock).num_days().abs() > 1,
            "the test needs the two clocks apart"
        );

        let page = feed(app, &token, "").await;
        let items = page["data"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 1, "{page}");
        assert_eq!(items[0]["type"], "reset");
        let time = occurred_at(&items[0]);
        assert!(
            before <= time && time <= after,
            "{time} not in [{before}, {after}]"
        );
    })
    .await;
}
