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

    /// The quote event the (one) quote-driven fill's audit row names.
    async fn fill_quote_event(&self) -> i64 {
        self.scalar(
            "select (context->>'quote_event_id')::bigint from audit_log where action = 'order.filled'",
        )
        .await
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
        let event = app.fill_quote_event().await;
        assert_eq!(Value::from(event), crossing["sequence"]);
        assert_ne!(crossing["sequence"], uncrossing["sequence"]);
        assert_eq!(app.count("select count(*) from paper_fills").await, 1);
    })
    .await;
}

/// A quote update queues a sweep for every account resting an order on the symbol, a simple
/// order on it or a multi-leg order with a leg on it, and for no other: not an account resting
/// on another symbol, nor one whose order on the symbol already filled. The sweep then fills
/// both the simple order and the spread the new quote made marketable.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_quote_update_queues_each_account_resting_on_its_symbol(pool: PgPool) {
    const LONG: &str = "XYZ270115C00060000";
    const SHORT: &str = "XYZ270115C00065000";
    TestApp::run(&pool, Options::default(), async |app| {
        app.quote(LONG, "5.00", "5.10").await;
        app.quote(SHORT, "3.00", "3.10").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let place = async |token: &str, body: Value| {
            let order = app.create_order(token, Uuid::new_v4(), &body).await;
            assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
            order
        };
        let (simple_user, simple_token) = app.user("simple@example.com").await;
        let simple = Order::limit(LONG, "4.50").buy_to_open().qty("1").gtc();
        let simple = place(&simple_token, simple.json()).await;
        assert_eq!(simple.body["status"], "new", "{}", simple.text);

        // Net debit 5.10 - 3.00 = 2.10 against a limit of 1.50: it rests.
        let (spread_user, spread_token) = app.user("spread@example.com").await;
        let legs = vec![
            serde_json::json!({ "symbol": LONG, "ratio_qty": 1, "side": "buy",
                                "position_intent": "buy_to_open" }),
            serde_json::json!({ "symbol": SHORT, "ratio_qty": 1, "side": "sell",
                                "position_intent": "sell_to_open" }),
        ];
        let spread = Order::mleg_limit("1.50", legs).qty("1").gtc();
        let spread = place(&spread_token, spread.json()).await;
        assert_eq!(spread.body["status"], "new", "{}", spread.text);

        let (_, elsewhere) = app.user("elsewhere@example.com").await;
        let other = Order::limit("AAPL", "100.00").buy().qty("1").gtc();
        assert_eq!(place(&elsewhere, other.json()).await.body["status"], "new");
        let (_, filled) = app.user("filled@example.com").await;
        let market = Order::market(LONG).buy_to_open().qty("1").day();
        assert_eq!(place(&filled, market.json()).await.body["status"], "filled");

        // The long call falls to 4.20: the simple buy at 4.50 and the spread (4.20 - 3.00 =
        // 1.20 <= 1.50) are both marketable.
        let quote = app.quote_unswept(LONG, "4.00", "4.20").await;
        assert_eq!(quote["pending_accounts"], 2, "{quote}");
        let queued: Vec<i32> = sqlx::query_scalar("select user_id from quote_sweeps order by 1")
            .fetch_all(&app.pool)
            .await
            .expect("queued sweeps");
        let mut expected = vec![simple_user, spread_user];
        expected.sort_unstable();
        assert_eq!(queued, expected);

        let swept = raptor_api::trading::sweep_quotes(&app.state)
            .await
            .expect("sweep");
        assert_eq!(swept, 2);
        for (token, order) in [(&simple_token, &simple), (&spread_token, &spread)] {
            let now = app.order(token, order.id()).await;
            assert_eq!(now.body["status"], "filled", "{}", now.text);
        }
    })
    .await;
}

/// Queueing a quote's sweeps reads `paper_orders` alone (the multi-leg orders' legs by primary
/// key, one lookup each), so its cost stays linear in the open orders whatever the statistics
/// say. Checked on the plan Postgres would pick with joins made as costly as it can make them:
/// a join of the symbol's legs to the open orders then shows as a nested loop, which on tables
/// never analysed ran 20,000 resting orders into the statement timeout.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn queueing_a_quotes_sweeps_joins_nothing(pool: PgPool) {
    let mut tx = pool.begin().await.expect("begin");
    sqlx::raw_sql(&format!(
        "set local enable_hashjoin = off;
         set local enable_mergejoin = off;
         prepare quote_event (text, numeric, numeric, timestamptz) as {}",
        raptor_api::trading::QUOTE_EVENT
    ))
    .execute(&mut *tx)
    .await
    .expect("prepare");
    let plan: Value = sqlx::query_scalar(
        "explain (format json) execute quote_event ('AAPL', 100.00, 100.10, now())",
    )
    .fetch_one(&mut *tx)
    .await
    .expect("explain");
    fn node_types(node: &Value, into: &mut Vec<String>) {
        if let Some(kind) = node["Node Type"].as_str() {
            into.push(kind.to_owned());
        }
        for child in node["Plans"].as_array().into_iter().flatten() {
            node_types(child, into);
        }
    }
    let mut nodes = Vec::new();
    node_types(&plan[0]["Plan"], &mut nodes);
    // The event's insert, the quote's update and the sweeps' insert.
    assert_eq!(
        nodes.iter().filter(|n| *n == "ModifyTable").count(),
        3,
        "the plan is the statement's: {nodes:?}"
    );
    for join in ["Nested Loop", "Hash Join", "Merge Join"] {
        assert!(!nodes.iter().any(|n| n == join), "{join} in {nodes:?}");
    }
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

/// A debit call spread on `user`'s account (buy the 60 call, sell the 65 call, a net limit of
/// 0.60), resting; its two legs quoted first at `long` and `short` (bid, ask).
async fn resting_spread(
    app: &TestApp,
    email: &str,
    long: (&str, &str),
    short: (&str, &str),
) -> (String, crate::helpers::TestResponse) {
    app.quote(SNAP_LONG, long.0, long.1).await;
    app.quote(SNAP_SHORT, short.0, short.1).await;
    let (_, token) = app.user(email).await;
    let legs = vec![
        serde_json::json!({ "symbol": SNAP_LONG, "ratio_qty": 1, "side": "buy",
                            "position_intent": "buy_to_open" }),
        serde_json::json!({ "symbol": SNAP_SHORT, "ratio_qty": 1, "side": "sell",
                            "position_intent": "sell_to_open" }),
    ];
    let spread = Order::mleg_limit("0.60", legs).qty("1").gtc().json();
    let spread = app.create_order(&token, Uuid::new_v4(), &spread).await;
    assert_eq!(spread.status, StatusCode::CREATED, "{}", spread.text);
    assert_eq!(spread.body["status"], "new", "{}", spread.text);
    (token, spread)
}

const SNAP_LONG: &str = "XYZ270115C00060000";
const SNAP_SHORT: &str = "XYZ270115C00065000";

/// A multi-leg order is judged against every leg's quote as of the crossing event, never the
/// event's price for one leg and a later quote for the other. The review's reproduction: the
/// long leg dips to 1.00 while the short bids 0.10 (net 0.90), the long goes back to 1.40,
/// then the short rises to 0.50 (net 0.90): the legs were never better than 0.90 together,
/// yet the first event, judged with the short's later bid, filled the spread at 0.50.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_spread_never_fills_at_a_price_that_never_existed(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (token, spread) = resting_spread(
            app,
            "phantom@example.com",
            ("1.30", "1.40"),
            ("0.10", "0.20"),
        )
        .await;
        app.quote_unswept(SNAP_LONG, "0.90", "1.00").await;
        app.quote_unswept(SNAP_LONG, "1.30", "1.40").await;
        app.quote_unswept(SNAP_SHORT, "0.50", "0.60").await;
        assert_eq!(app.pending_sweeps().await, 3);

        raptor_api::trading::sweep_quotes(&app.state)
            .await
            .expect("sweep");
        assert_eq!(app.pending_sweeps().await, 0);
        let order = app.order(&token, spread.id()).await;
        assert_eq!(order.body["status"], "new", "{}", order.text);
        assert_eq!(app.count("select count(*) from paper_fills").await, 0);
    })
    .await;
}

/// The mirror case: a real crossing fills although a later quote of the other leg undid it
/// before the sweep ran. The long falls to 1.00 while the short bids 0.40 (net 0.60, the
/// limit); then the short falls to 0.10. Judged with the short's later bid, the crossing was
/// missed; as of its event, the spread fills at 0.60 (1.00 and 0.40), and the fill's audit row
/// names that event.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_spread_crossed_by_an_event_fills_at_that_moment(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (token, spread) = resting_spread(
            app,
            "crossed@example.com",
            ("1.30", "1.40"),
            ("0.40", "0.50"),
        )
        .await;
        let crossing = app.quote_unswept(SNAP_LONG, "0.90", "1.00").await;
        app.quote_unswept(SNAP_SHORT, "0.10", "0.20").await;

        raptor_api::trading::sweep_quotes(&app.state)
            .await
            .expect("sweep");
        let order = app.order(&token, spread.id()).await;
        assert_eq!(order.body["status"], "filled", "{}", order.text);
        assert_eq!(order.body["filled_avg_price"], "0.60", "{}", order.text);
        let legs = order.body["legs"].as_array().expect("legs");
        assert_eq!(legs[0]["filled_avg_price"], "1.00");
        assert_eq!(legs[1]["filled_avg_price"], "0.40");
        let event = app.fill_quote_event().await;
        assert_eq!(Value::from(event), crossing["sequence"]);
    })
    .await;
}

/// Expiry never overtakes a pending sweep: a `day` order crossed by a quote at 10:00 New York
/// is filled, not expired, although its sweep failed and was backing off (the longest back-off,
/// ten minutes) when the close came and both the schedule's pass and the lazy check on account
/// access ran. Once the sweep runs it fills the order as of its event, and nothing expires.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn expiry_never_overtakes_a_pending_sweep(pool: PgPool) {
    use chrono::TimeZone;
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("backoff@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let day = Order::limit("AAPL", "100.00").buy().qty("1").day().json();
        let resting = app.create_order(&token, Uuid::new_v4(), &day).await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        let crossing = app.quote_unswept("AAPL", "98.00", "99.00").await;
        sqlx::query(
            "update quote_sweeps set attempts = 10, not_before = now() + interval '10 minutes'",
        )
        .execute(&app.pool)
        .await
        .expect("back off");

        // 16:30 New York.
        let evening = app
            .replica(Options {
                now: chrono::Utc
                    .with_ymd_and_hms(2026, 12, 1, 21, 30, 0)
                    .single()
                    .expect("instant"),
                ..Options::default()
            })
            .await;
        let pass = raptor_api::trading::expire_orders(&evening.state)
            .await
            .expect("expiry pass");
        assert_eq!(pass.orders, 0, "the schedule's pass overtook the sweep");
        let read = evening.order(&token, resting.id()).await;
        assert_eq!(read.body["status"], "new", "{}", read.text);

        sqlx::query("update quote_sweeps set not_before = now()")
            .execute(&app.pool)
            .await
            .expect("back-off over");
        raptor_api::trading::sweep_quotes(&evening.state)
            .await
            .expect("sweep");
        let order = evening.order(&token, resting.id()).await;
        assert_eq!(order.body["status"], "filled", "{}", order.text);
        assert_eq!(order.body["filled_avg_price"], "100.00");
        let event = app.fill_quote_event().await;
        assert_eq!(Value::from(event), crossing["sequence"]);
        let pass = raptor_api::trading::expire_orders(&evening.state)
            .await
            .expect("expiry pass");
        assert_eq!(pass.orders, 0);
        assert_eq!(
            app.count("select count(*) from audit_log where action = 'order.expired'")
                .await,
            0
        );
    })
    .await;
}
