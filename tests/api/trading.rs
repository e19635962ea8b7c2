//! The paper book through HTTP: orders, LCC rolls, closes, cancels, resets, quote-driven fills,
//! gates, and concurrency on one account.

use axum::http::{Method, StatusCode};
use raptor_api::ApiConfig;
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::helpers::{post_http, Call, Options, TestApp, TestResponse};

const LEAPS: &str = "XYZ280121C00050000";
const NEAR: &str = "XYZ261218C00065000";
const NEXT: &str = "XYZ270115C00067500";

fn market(symbol: &str, side: &str, intent: &str, qty: &str) -> Value {
    json!({ "symbol": symbol, "qty": qty, "side": side, "type": "market",
            "time_in_force": "day", "position_intent": intent })
}

async fn order(app: &TestApp, token: &str, body: &Value) -> TestResponse {
    app.post("/api/trading/orders", token, Some(Uuid::new_v4()), body)
        .await
}

async fn account(app: &TestApp, token: &str) -> Value {
    app.get("/api/trading/account", token).await.body
}

async fn positions(app: &TestApp, token: &str) -> Vec<Value> {
    let response = app.get("/api/trading/positions", token).await;
    assert_eq!(response.status, StatusCode::OK);
    response.body.as_array().cloned().unwrap_or_default()
}

fn position<'a>(positions: &'a [Value], symbol: &str) -> Option<&'a Value> {
    positions.iter().find(|p| p["symbol"] == symbol)
}

/// Long 1 LEAPS at 12.40, short 1 near call at 1.20.
async fn lcc(app: &TestApp, token: &str) {
    app.quote(LEAPS, "12.30", "12.40").await;
    app.quote(NEAR, "1.20", "1.25").await;
    let leaps = order(app, token, &market(LEAPS, "buy", "buy_to_open", "1")).await;
    assert_eq!(leaps.status, StatusCode::CREATED, "{}", leaps.text);
    assert_eq!(leaps.body["status"], "filled");
    assert_eq!(leaps.body["filled_avg_price"], "12.40");
    let short = order(app, token, &market(NEAR, "sell", "sell_to_open", "1")).await;
    assert_eq!(short.status, StatusCode::CREATED, "{}", short.text);
    assert_eq!(short.body["filled_avg_price"], "1.20");
}

/// The worked LCC example of the issue, clock fixed at 2026-12-01.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn lcc_worked_example(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("lcc@example.com").await;
    lcc(&app, &token).await;
    assert_eq!(account(&app, &token).await["cash"], "98880.00");

    app.quote(NEAR, "0.40", "0.45").await;
    app.quote(NEXT, "1.30", "1.35").await;
    let key = Uuid::new_v4();
    let path = format!("/api/trading/positions/{NEAR}/roll");
    let body = json!({ "to_symbol": NEXT, "qty": "1" });
    let roll = app.post(&path, &token, Some(key), &body).await;
    assert_eq!(roll.status, StatusCode::CREATED, "{}", roll.text);
    assert_eq!(roll.body["purpose"], "roll");
    assert_eq!(roll.body["order_class"], "mleg");
    assert_eq!(roll.body["status"], "filled");
    assert_eq!(roll.body["filled_avg_price"], "-0.85", "net credit");
    let legs = roll.body["legs"].as_array().expect("legs");
    assert_eq!(legs.len(), 2);
    assert_eq!(legs[0]["symbol"], NEAR);
    assert_eq!(legs[0]["position_intent"], "buy_to_close");
    assert_eq!(legs[0]["filled_avg_price"], "0.45");
    assert_eq!(legs[1]["symbol"], NEXT);
    assert_eq!(legs[1]["position_intent"], "sell_to_open");
    assert_eq!(legs[1]["filled_avg_price"], "1.30");
    assert!(legs.iter().all(|l| l["filled_qty"] == "1"));

    let after = account(&app, &token).await;
    assert_eq!(after["cash"], "98965.00", "cash +85.00 from the roll");
    assert_eq!(after["realized_pnl"], "75.00");
    let held = positions(&app, &token).await;
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(position(&held, LEAPS).expect("leaps")["qty"], "1");
    let new_short = position(&held, NEXT).expect("new short");
    assert_eq!(new_short["qty"], "-1");
    assert_eq!(new_short["avg_entry_price"], "1.30");
    assert!(position(&held, NEAR).is_none(), "old short closed");
    let near_pnl: rust_decimal::Decimal =
        sqlx::query_scalar("select realized_pnl from paper_positions where symbol = $1")
            .bind(NEAR)
            .fetch_one(&app.pool)
            .await
            .expect("closed position row");
    assert_eq!(near_pnl.to_string(), "75.00");
    let roll_orders = app
        .count("select count(*) from paper_orders where purpose = 'roll'")
        .await;
    assert_eq!(roll_orders, 1);
    assert_eq!(
        app.count("select count(*) from paper_fills where leg_index = 1")
            .await,
        1
    );

    // The same roll sent again with the same key executes once; the replay is identical.
    let replay = app.post(&path, &token, Some(key), &body).await;
    assert_eq!(replay.status, StatusCode::CREATED);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.body_without_marker(), roll.body);
    assert_eq!(replay.header("location"), roll.header("location"));
    assert_eq!(
        app.count("select count(*) from paper_orders where purpose = 'roll'")
            .await,
        1
    );
    assert_eq!(account(&app, &token).await["cash"], "98965.00");

    // A contract past its expiry (by the server's clock) is refused.
    let expired = order(
        &app,
        &token,
        &market("XYZ261120C00065000", "buy", "buy_to_open", "1"),
    )
    .await;
    assert_eq!(expired.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(expired.body["error"], "contract_expired");
    app.close().await;
}

/// A roll whose open leg would be uncovered, or whose close leg exceeds the short, is rejected
/// whole: no leg fills, nothing changes but the audit log.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn invalid_rolls_are_rejected_whole(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("roll@example.com").await;
    lcc(&app, &token).await;
    app.quote(NEAR, "0.40", "0.45").await;
    let beyond_leaps = "XYZ280616C00070000";
    app.quote(beyond_leaps, "2.00", "2.10").await;
    app.quote(NEXT, "1.30", "1.35").await;
    let before = (account(&app, &token).await, positions(&app, &token).await);
    let path = format!("/api/trading/positions/{NEAR}/roll");

    let uncovered = app
        .post(
            &path,
            &token,
            Some(Uuid::new_v4()),
            &json!({ "to_symbol": beyond_leaps, "qty": "1" }),
        )
        .await;
    assert_eq!(
        uncovered.status,
        StatusCode::FORBIDDEN,
        "{}",
        uncovered.text
    );
    assert_eq!(uncovered.body["error"], "uncovered_short_option");

    let too_many = app
        .post(
            &path,
            &token,
            Some(Uuid::new_v4()),
            &json!({ "to_symbol": NEXT, "qty": "2" }),
        )
        .await;
    assert_eq!(too_many.status, StatusCode::FORBIDDEN, "{}", too_many.text);
    assert_eq!(too_many.body["error"], "insufficient_qty");

    let after = (account(&app, &token).await, positions(&app, &token).await);
    assert_eq!(before, after, "no leg filled");
    assert_eq!(
        app.count("select count(*) from paper_orders where purpose = 'roll'")
            .await,
        0
    );
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'order.rejected'")
            .await,
        2
    );

    // A naked short call is refused too.
    app.quote("XYZ270115C00080000", "0.50", "0.55").await;
    let naked = order(
        &app,
        &token,
        &market("XYZ270115C00080000", "sell", "sell_to_open", "5"),
    )
    .await;
    assert_eq!(naked.status, StatusCode::FORBIDDEN, "{}", naked.text);
    assert_eq!(naked.body["error"], "uncovered_short_option");
    app.close().await;
}

/// 32 concurrent different orders whose total exceeds buying power: exactly those that fit are
/// accepted, the account never goes negative, no deadlock, no 5xx.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn concurrent_orders_respect_buying_power(pool: PgPool) {
    let app = TestApp::with(
        &pool,
        Options {
            pool_size: 24,
            ..Options::default()
        },
    )
    .await;
    let (_, token) = app.user("bp@example.com").await;
    app.quote("BIG", "6999.00", "7000.00").await;
    let server = app.spawn().await;
    let mut set = JoinSet::new();
    for _ in 0..32 {
        set.spawn(post_http(
            server.client.clone(),
            server.url("/api/trading/orders"),
            token.clone(),
            Some(Uuid::new_v4()),
            market("BIG", "buy", "buy_to_open", "1"),
        ));
    }
    let (mut accepted, mut refused) = (0, 0);
    while let Some(response) = set.join_next().await {
        let response = response.expect("join");
        match response.status {
            StatusCode::CREATED => accepted += 1,
            StatusCode::FORBIDDEN => {
                assert_eq!(response.body["error"], "insufficient_buying_power");
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", response.text),
        }
    }
    assert_eq!(accepted, 14, "floor(100000 / 7000) orders fit");
    assert_eq!(refused, 18);
    let after = account(&app, &token).await;
    assert_eq!(after["cash"], "2000.00");
    assert_eq!(
        position(&positions(&app, &token).await, "BIG").expect("BIG")["qty"],
        "14"
    );
    server.stop().await;
    app.close().await;
}

/// A resting limit fills when a quote update makes it marketable, at its limit price, exactly
/// once even when two quote updates race.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn resting_limit_fills_once_on_racing_quotes(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("limit@example.com").await;
    app.quote("AAPL", "101.00", "102.00").await;
    let resting = order(
        &app,
        &token,
        &json!({ "symbol": "AAPL", "qty": "2", "side": "buy", "type": "limit", "limit_price": "100.00", "time_in_force": "gtc" }),
    )
    .await;
    assert_eq!(resting.status, StatusCode::CREATED, "{}", resting.text);
    assert_eq!(resting.body["status"], "new");
    let id = resting.body["id"].as_str().expect("id").to_owned();
    let waiting = account(&app, &token).await;
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

    let filled = app.get(&format!("/api/trading/orders/{id}"), &token).await;
    assert_eq!(filled.body["status"], "filled");
    assert_eq!(
        filled.body["filled_avg_price"], "100.00",
        "a resting limit fills at its limit"
    );
    let after = account(&app, &token).await;
    assert_eq!(after["cash"], "99800.00");
    assert_eq!(after["buying_power"], "99800.00");
    assert_eq!(app.count("select count(*) from paper_fills").await, 1);
    let quote_fills = app
        .count("select count(*) from audit_log where action = 'order.filled' and context->>'trigger' = 'quote'")
        .await;
    assert_eq!(quote_fills, 1);
    app.close().await;
}

/// Cancel twice: 200 both times, one audit row; a filled order is not cancelable.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn cancel_is_naturally_idempotent(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("cancel@example.com").await;
    let (_, stranger) = app.user("stranger@example.com").await;
    app.quote("AAPL", "101.00", "102.00").await;
    let resting = order(
        &app,
        &token,
        &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "100.00" }),
    )
    .await;
    let path = format!(
        "/api/trading/orders/{}",
        resting.body["id"].as_str().expect("id")
    );

    let not_yours = app
        .send(Call::new(Method::DELETE, path.as_str()).token(&stranger))
        .await;
    assert_eq!(not_yours.status, StatusCode::NOT_FOUND);
    let first = app
        .send(Call::new(Method::DELETE, path.as_str()).token(&token))
        .await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.body["status"], "canceled");
    let second = app
        .send(Call::new(Method::DELETE, path.as_str()).token(&token))
        .await;
    assert_eq!(second.status, StatusCode::OK);
    assert_eq!(second.body, first.body, "unchanged");
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'order.canceled'")
            .await,
        1
    );
    assert_eq!(account(&app, &token).await["buying_power"], "100000.00");

    let filled = order(&app, &token, &market("AAPL", "buy", "buy_to_open", "1")).await;
    let filled_path = format!(
        "/api/trading/orders/{}",
        filled.body["id"].as_str().expect("id")
    );
    let refused = app
        .send(Call::new(Method::DELETE, filled_path.as_str()).token(&token))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.body["error"], "order_not_cancelable");
    let missing = app
        .send(
            Call::new(
                Method::DELETE,
                format!("/api/trading/orders/{}", Uuid::new_v4()),
            )
            .token(&token),
        )
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    app.close().await;
}

/// Gates run before the idempotency lookup: a replay cannot bypass the kill switch or the
/// paper/live gate; cancels still work with new orders disabled.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn gates_come_before_replays(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let halted = TestApp::with(
        &pool,
        Options {
            api: ApiConfig {
                new_orders_disabled: true,
                ..ApiConfig::default()
            },
            ..Options::default()
        },
    )
    .await;
    let (user_id, token) = app.user("gate@example.com").await;
    app.quote("AAPL", "101.00", "102.00").await;
    let key = Uuid::new_v4();
    let body = market("AAPL", "buy", "buy_to_open", "1");
    assert_eq!(
        app.post("/api/trading/orders", &token, Some(key), &body)
            .await
            .status,
        StatusCode::CREATED
    );

    let replay = halted
        .post("/api/trading/orders", &token, Some(key), &body)
        .await;
    assert_eq!(replay.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(replay.body["error"], "new_orders_disabled");
    let close = halted
        .post(
            "/api/trading/positions/AAPL/close",
            &token,
            Some(Uuid::new_v4()),
            &json!({}),
        )
        .await;
    assert_eq!(close.body["error"], "new_orders_disabled");

    let resting = order(
        &app,
        &token,
        &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "90.00" }),
    )
    .await;
    let cancel_path = format!(
        "/api/trading/orders/{}",
        resting.body["id"].as_str().expect("id")
    );
    let cancel = halted
        .send(Call::new(Method::DELETE, cancel_path.as_str()).token(&token))
        .await;
    assert_eq!(cancel.status, StatusCode::OK, "cancels still work");

    sqlx::query("update paper_accounts set mode = 'live' where user_id = $1")
        .bind(user_id)
        .execute(&app.pool)
        .await
        .expect("go live");
    let keys_before = app.count("select count(*) from idempotency_keys").await;
    let live = app
        .post("/api/trading/orders", &token, Some(key), &body)
        .await;
    assert_eq!(live.status, StatusCode::FORBIDDEN);
    assert_eq!(live.body["error"], "live_trading_unavailable");
    let fresh = app
        .post("/api/trading/orders", &token, Some(Uuid::new_v4()), &body)
        .await;
    assert_eq!(fresh.body["error"], "live_trading_unavailable");
    assert_eq!(
        app.count("select count(*) from idempotency_keys").await,
        keys_before,
        "no row before the gates"
    );
    halted.close().await;
    app.close().await;
}

/// Closes (partial and full), realized P&L, account reset, reads.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn close_and_reset(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("close@example.com").await;
    app.quote("AAPL", "190.00", "190.10").await;
    let bought = order(
        &app,
        &token,
        &json!({ "symbol": "AAPL", "qty": "3", "side": "buy", "type": "market" }),
    )
    .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.text);
    assert_eq!(bought.body["position_intent"], "buy_to_open", "inferred");
    app.quote("AAPL", "195.00", "195.10").await;

    let partial = app
        .post(
            "/api/trading/positions/AAPL/close",
            &token,
            Some(Uuid::new_v4()),
            &json!({ "qty": "1" }),
        )
        .await;
    assert_eq!(partial.status, StatusCode::CREATED, "{}", partial.text);
    assert_eq!(partial.body["purpose"], "close");
    assert_eq!(partial.body["side"], "sell");
    assert_eq!(partial.body["filled_avg_price"], "195.00");
    let held = positions(&app, &token).await;
    assert_eq!(position(&held, "AAPL").expect("AAPL")["qty"], "2");
    assert_eq!(account(&app, &token).await["realized_pnl"], "4.90");

    let too_much = app
        .post(
            "/api/trading/positions/AAPL/close",
            &token,
            Some(Uuid::new_v4()),
            &json!({ "qty": "5" }),
        )
        .await;
    assert_eq!(too_much.status, StatusCode::FORBIDDEN);
    assert_eq!(too_much.body["error"], "insufficient_qty");

    let rest = app
        .post(
            "/api/trading/positions/AAPL/close",
            &token,
            Some(Uuid::new_v4()),
            &json!({}),
        )
        .await;
    assert_eq!(rest.status, StatusCode::CREATED);
    assert!(positions(&app, &token).await.is_empty());
    let none = app
        .post(
            "/api/trading/positions/AAPL/close",
            &token,
            Some(Uuid::new_v4()),
            &json!({}),
        )
        .await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    let after = account(&app, &token).await;
    assert_eq!(after["realized_pnl"], "14.70");
    assert_eq!(after["cash"], "100014.70");

    let listed = app.get("/api/trading/orders", &token).await;
    assert_eq!(listed.body.as_array().map(Vec::len), Some(3));
    let open = app.get("/api/trading/orders?status=open", &token).await;
    assert_eq!(open.body, json!([]));
    assert_eq!(
        app.get("/api/trading/orders?status=bogus", &token)
            .await
            .status,
        StatusCode::BAD_REQUEST
    );

    // Reset: starting cash, no positions, open orders canceled.
    order(
        &app,
        &token,
        &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market" }),
    )
    .await;
    order(&app, &token, &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "150" })).await;
    let reset = app
        .post(
            "/api/trading/account/reset",
            &token,
            Some(Uuid::new_v4()),
            &json!({}),
        )
        .await;
    assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);
    assert_eq!(reset.body["cash"], "100000.00");
    assert_eq!(reset.body["buying_power"], "100000.00");
    assert_eq!(reset.body["realized_pnl"], "0.00");
    assert!(positions(&app, &token).await.is_empty());
    assert_eq!(
        app.count("select count(*) from paper_orders where status = 'new'")
            .await,
        0
    );
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'account.reset'")
            .await,
        1
    );
    app.close().await;
}

/// Multi-leg through /orders, rejections stored and replayed, client_order_id rules.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn mleg_orders_rejections_and_client_order_ids(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("mleg@example.com").await;
    app.quote("XYZ270115C00060000", "5.00", "5.10").await;
    app.quote("XYZ270115C00065000", "3.00", "3.10").await;
    let spread = json!({
        "order_class": "mleg", "qty": "2", "type": "limit", "limit_price": "2.20",
        "legs": [
            { "symbol": "XYZ270115C00060000", "ratio_qty": 1, "side": "buy", "position_intent": "buy_to_open" },
            { "symbol": "XYZ270115C00065000", "ratio_qty": 1, "side": "sell", "position_intent": "sell_to_open" }
        ]
    });
    let filled = order(&app, &token, &spread).await;
    assert_eq!(filled.status, StatusCode::CREATED, "{}", filled.text);
    assert_eq!(filled.body["status"], "filled");
    assert_eq!(
        filled.body["filled_avg_price"], "2.10",
        "net debit 5.10 - 3.00"
    );
    assert_eq!(account(&app, &token).await["cash"], "99580.00");

    // No quote: 422, stored and replayed like any business answer.
    let key = Uuid::new_v4();
    let unquoted = market("QQQ", "buy", "buy_to_open", "1");
    let first = app
        .post("/api/trading/orders", &token, Some(key), &unquoted)
        .await;
    assert_eq!(first.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(first.body["error"], "quote_unavailable");
    let again = app
        .post("/api/trading/orders", &token, Some(key), &unquoted)
        .await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.status, StatusCode::UNPROCESSABLE_ENTITY);

    let bad_symbol = order(&app, &token, &market("aapl", "buy", "buy_to_open", "1")).await;
    assert_eq!(bad_symbol.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad_symbol.body["error"], "invalid_symbol");
    let no_side = order(
        &app,
        &token,
        &json!({ "symbol": "AAPL", "qty": "1", "type": "market" }),
    )
    .await;
    assert_eq!(no_side.body["error"], "invalid_order");

    // client_order_id: derived from the key when absent (stable), unique per account.
    app.quote("AAPL", "100.00", "100.10").await;
    let named = order(&app, &token, &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market", "client_order_id": "mine-1" })).await;
    assert_eq!(named.body["client_order_id"], "mine-1");
    let dup = order(&app, &token, &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market", "client_order_id": "mine-1" })).await;
    assert_eq!(dup.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(dup.body["error"], "duplicate_client_order_id");
    let derived = filled.body["client_order_id"].as_str().expect("derived id");
    assert!(Uuid::parse_str(derived).is_ok());
    app.close().await;
}

/// A configured fee schedule is charged once per order and shown on it.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn fees_follow_the_configured_schedule(pool: PgPool) {
    let fees = raptor_engine::FeeSchedule {
        per_contract: crate::helpers::dec("0.65"),
        per_share: crate::helpers::dec("0"),
        min_per_order: crate::helpers::dec("1.00"),
    };
    let app = TestApp::with(
        &pool,
        Options {
            api: ApiConfig {
                fees,
                ..ApiConfig::default()
            },
            ..Options::default()
        },
    )
    .await;
    let (_, token) = app.user("fees@example.com").await;
    app.quote(LEAPS, "12.30", "12.40").await;
    let one = order(&app, &token, &market(LEAPS, "buy", "buy_to_open", "1")).await;
    assert_eq!(one.body["fees"], "1.00", "the per-order minimum");
    let two = order(&app, &token, &market(LEAPS, "buy", "buy_to_open", "2")).await;
    assert_eq!(two.body["fees"], "1.30");
    assert_eq!(
        account(&app, &token).await["cash"],
        "96277.70",
        "100000 - 1240 - 1.00 - 2480 - 1.30"
    );
    app.close().await;
}

/// An order racing a quote update waits for it (share lock on the quote row) instead of resting
/// against the old quote and missing the fill.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn an_order_cannot_miss_a_concurrent_quote_update(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (a_id, a) = app.user("a@example.com").await;
    let (_, c) = app.user("c@example.com").await;
    app.quote("AAPL", "100.00", "101.00").await;
    let limit = json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "90.00" });
    let rests = order(&app, &a, &limit).await;
    assert_eq!(rests.body["status"], "new");

    // Hold A's account so the quote update stalls after taking the quote row.
    let mut holder = pool.begin().await.expect("begin");
    sqlx::query("select 1 from paper_accounts where user_id = $1 for update")
        .bind(a_id)
        .execute(&mut *holder)
        .await
        .expect("lock A");
    let state = app.state.clone();
    let quote = tokio::spawn(async move {
        raptor_api::trading::set_quote(
            &state,
            None,
            "AAPL",
            crate::helpers::dec("80.00"),
            crate::helpers::dec("85.00"),
        )
        .await
    });
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let router = app.router.clone();
    let c_order = tokio::spawn(crate::helpers::send(
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
    app.close().await;
}

/// Quote updates: bad prices are 422; a resting order on an expired contract is expired (its
/// reservation released); an account that cannot trade does not block the update.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn quote_updates_expire_dead_orders_and_skip_blocked_accounts(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, operator) = app
        .user_with_role("op@example.com", raptor_api::auth::Role::Operator)
        .await;
    for bad in [
        json!({ "bid": "1", "ask": "100000000000000" }),
        json!({ "bid": "0.0000001", "ask": "1" }),
        json!({ "bid": "2", "ask": "1" }),
    ] {
        let r = app
            .send(
                Call::new(Method::PUT, "/api/admin/quotes/AAPL")
                    .token(&operator)
                    .json(&bad),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            r.text
        );
        assert_eq!(r.body["error"], "invalid_quote");
    }
    let (live_id, live) = app.user("live@example.com").await;
    let (_, token) = app.user("exp@example.com").await;
    app.quote(NEAR, "1.20", "1.30").await;
    app.quote("AAPL", "101.00", "102.00").await;
    let tiny = order(&app, &token, &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "0.0000001" })).await;
    assert_eq!(tiny.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(tiny.body["error"], "invalid_order");

    let near_limit = json!({ "symbol": NEAR, "qty": "1", "side": "buy", "type": "limit", "limit_price": "1.00", "time_in_force": "gtc" });
    let dead = order(&app, &token, &near_limit).await;
    assert_eq!(dead.body["status"], "new");
    let blocked = order(&app, &live, &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "95.00", "time_in_force": "gtc" })).await;
    assert_eq!(blocked.body["status"], "new");
    let aapl = order(&app, &token, &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit", "limit_price": "96.00", "time_in_force": "gtc" })).await;
    assert_eq!(aapl.body["status"], "new");
    sqlx::query("update paper_accounts set mode = 'live' where user_id = $1")
        .bind(live_id)
        .execute(&app.pool)
        .await
        .expect("go live");

    let later = TestApp::with(
        &pool,
        Options {
            now: crate::helpers::test_now() + chrono::Duration::days(18),
            ..Options::default()
        },
    )
    .await;
    later.quote(NEAR, "1.10", "1.20").await;
    let expired = app
        .get(
            &format!(
                "/api/trading/orders/{}",
                dead.body["id"].as_str().expect("id")
            ),
            &token,
        )
        .await;
    assert_eq!(expired.body["status"], "expired");
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'order.expired'")
            .await,
        1
    );

    let filled = later.quote("AAPL", "94.00", "94.50").await;
    assert_eq!(
        filled["filled_order_ids"].as_array().map(Vec::len),
        Some(1),
        "{filled}"
    );
    assert_eq!(filled["filled_order_ids"][0], aapl.body["id"]);
    assert_eq!(
        account(&app, &token).await["buying_power"],
        account(&app, &token).await["cash"]
    );
    later.close().await;
    app.close().await;
}

/// Control characters never turn a business answer into a 500 or a stuck key.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn nul_characters_are_rejected_cleanly(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("nul@example.com").await;
    app.quote("AAPL", "100.00", "100.10").await;
    let key = Uuid::new_v4();
    let body = json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market", "client_order_id": "a\u{0}b" });
    let first = app
        .post("/api/trading/orders", &token, Some(key), &body)
        .await;
    assert_eq!(
        first.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        first.text
    );
    assert_eq!(first.body["error"], "invalid_order");
    let key2 = Uuid::new_v4();
    let symbol = json!({ "symbol": "AAPL\u{0}", "qty": "1", "type": "market" });
    let bad_symbol = app
        .post("/api/trading/orders", &token, Some(key2), &symbol)
        .await;
    assert_eq!(
        bad_symbol.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        bad_symbol.text
    );
    let replay = app
        .post("/api/trading/orders", &token, Some(key2), &symbol)
        .await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(
        replay.body_without_marker(),
        bad_symbol.body_without_marker()
    );
    assert_eq!(
        app.count("select count(*) from idempotency_keys where status <> 'completed'")
            .await,
        0
    );
    app.close().await;
}

/// An option trades until the regular close of its expiration day in New York, not until the
/// end of its UTC date: at 15:00 New York on 2026-12-18 (20:00 UTC) the December call fills;
/// at 16:30 New York (21:30 UTC, the same UTC date) it is `422 contract_expired`.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn an_option_stops_trading_at_its_new_york_close(pool: PgPool) {
    use chrono::TimeZone;
    for (hour, minute, expired) in [(20, 0, false), (21, 30, true)] {
        let now = chrono::Utc
            .with_ymd_and_hms(2026, 12, 18, hour, minute, 0)
            .single()
            .expect("instant");
        let app = TestApp::with(
            &pool,
            Options {
                now,
                ..Options::default()
            },
        )
        .await;
        let (_, token) = app
            .user(&format!("expiry-{hour}{minute}@example.com"))
            .await;
        app.quote(NEAR, "1.00", "1.10").await;
        let answer = order(&app, &token, &market(NEAR, "buy", "buy_to_open", "1")).await;
        if expired {
            assert_eq!(
                answer.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{}",
                answer.text
            );
            assert_eq!(answer.body["error"], "contract_expired");
        } else {
            assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
            assert_eq!(answer.body["status"], "filled");
        }
        app.close().await;
    }
}
