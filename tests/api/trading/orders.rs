//! Orders through HTTP: buying power under concurrency, cancels, gates before replays, closes
//! and resets, multi-leg orders and stored rejections, fees, and control characters.

use std::time::Duration;

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use raptor_api::ApiConfig;
use serde_json::json;
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use super::{position, LEAPS};
use crate::helpers::{assert_problem, post_http, Options, Order, TestApp};

/// 32 concurrent different orders whose total exceeds buying power: exactly those that fit are
/// accepted, the account never goes negative, no deadlock, no 5xx.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn concurrent_orders_respect_buying_power(pool: PgPool) {
    let options = Options {
        pool_size: 24,
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
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
                Order::market("BIG").buy_to_open().qty("1").day().json(),
            ));
        }
        let (mut accepted, mut refused) = (0, 0);
        while let Some(response) = set.join_next().await {
            let response = response.expect("join");
            match response.status {
                StatusCode::CREATED => accepted += 1,
                StatusCode::FORBIDDEN => {
                    assert_problem(
                        &response,
                        StatusCode::FORBIDDEN,
                        ErrorCode::InsufficientBuyingPower,
                    );
                    refused += 1;
                }
                other => panic!("unexpected {other}: {}", response.text),
            }
        }
        assert_eq!(accepted, 14, "floor(100000 / 7000) orders fit");
        assert_eq!(refused, 18);
        let after = app.account(&token).await.body;
        assert_eq!(after["cash"], "2000.00");
        assert_eq!(
            position(&app.positions(&token).await, "BIG").expect("BIG")["qty"],
            "14"
        );
        server.stop().await;
    })
    .await;
}

/// Cancel twice: 200 both times, one audit row; a filled order is not cancelable.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cancel_is_naturally_idempotent(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("cancel@example.com").await;
        let (_, stranger) = app.user("stranger@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "100.00").buy().qty("1").json(),
            )
            .await;
        let id = resting.id();

        let not_yours = app.cancel_order(&stranger, &id).await;
        assert_eq!(not_yours.status, StatusCode::NOT_FOUND);
        let first = app.cancel_order(&token, &id).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        assert_eq!(first.body["status"], "canceled");
        let second = app.cancel_order(&token, &id).await;
        assert_eq!(second.status, StatusCode::OK);
        assert_eq!(second.body, first.body, "unchanged");
        assert_eq!(app.audit_count("order.canceled").await, 1);
        assert_eq!(app.account(&token).await.body["buying_power"], "100000.00");

        let filled = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy_to_open().qty("1").day().json(),
            )
            .await;
        let refused = app.cancel_order(&token, filled.id()).await;
        assert_problem(
            &refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::OrderNotCancelable,
        );
        let missing = app.cancel_order(&token, Uuid::new_v4()).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND);
    })
    .await;
}

/// The trading halt is a run-time flag: an operator switches new orders off through one
/// replica and another refuses them within a second, without a restart (cancels still work);
/// the flip is audited, and switching it back lifts it everywhere. A user cannot flip it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_trading_halt_reaches_every_replica_at_run_time(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let other = app.replica(Options::default()).await;
        let (operator_id, operator) = app.operator("halt-ops@example.com").await;
        let (_, token) = app.user("halted@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let market = || Order::market("AAPL").buy().qty("1").day().json();
        // The other replica has read the flag (off) before the flip.
        let before = other.create_order(&token, Uuid::new_v4(), &market()).await;
        assert_eq!(before.status, StatusCode::CREATED, "{}", before.text);
        let resting = other
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "90.00").buy().qty("1").json(),
            )
            .await;
        assert_eq!(resting.status, StatusCode::CREATED, "{}", resting.text);

        let by_user = app.set_flag(&token, "MBT_NEW_ORDERS_DISABLED", true).await;
        assert_eq!(by_user.status, StatusCode::FORBIDDEN);
        let halt = app
            .set_flag(&operator, "MBT_NEW_ORDERS_DISABLED", true)
            .await;
        assert_eq!(halt.status, StatusCode::OK, "{}", halt.text);
        assert_eq!(halt.body["enabled"], true);
        let here = app.create_order(&token, Uuid::new_v4(), &market()).await;
        assert_problem(
            &here,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NewOrdersDisabled,
        );

        tokio::time::sleep(Duration::from_millis(1000)).await;
        let elsewhere = other.create_order(&token, Uuid::new_v4(), &market()).await;
        assert_problem(
            &elsewhere,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NewOrdersDisabled,
        );
        let cancel = other.cancel_order(&token, resting.id()).await;
        assert_eq!(cancel.status, StatusCode::OK, "cancels still work");
        let audited: i64 = app
            .count_where(
                "select count(*) from audit_log where action = 'flag.set'
                    and context->>'name' = 'MBT_NEW_ORDERS_DISABLED'
                    and (context->>'enabled')::bool and user_id = $1",
                operator_id,
            )
            .await;
        assert_eq!(audited, 1, "the flip is audited with its operator");

        let lift = app
            .set_flag(&operator, "MBT_NEW_ORDERS_DISABLED", false)
            .await;
        assert_eq!(lift.status, StatusCode::OK, "{}", lift.text);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let after = other.create_order(&token, Uuid::new_v4(), &market()).await;
        assert_eq!(after.status, StatusCode::CREATED, "{}", after.text);
    })
    .await;
}

/// Gates run before the idempotency lookup: a replay cannot bypass the kill switch or the
/// paper/live gate; cancels still work with new orders disabled.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn gates_come_before_replays(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let halted = app
            .replica(Options {
                api: ApiConfig {
                    new_orders_disabled: true,
                    ..ApiConfig::default()
                },
                ..Options::default()
            })
            .await;
        let (user_id, token) = app.user("gate@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        let key = Uuid::new_v4();
        let body = Order::market("AAPL").buy_to_open().qty("1").day().json();
        assert_eq!(
            app.create_order(&token, key, &body).await.status,
            StatusCode::CREATED
        );

        let replay = halted.create_order(&token, key, &body).await;
        assert_problem(
            &replay,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NewOrdersDisabled,
        );
        assert_eq!(
            replay.header("retry-after"),
            None,
            "a halt: retrying soon does not help"
        );
        let close = halted
            .close_position(&token, Uuid::new_v4(), "AAPL", &json!({}))
            .await;
        assert_problem(
            &close,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NewOrdersDisabled,
        );

        let resting = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::limit("AAPL", "90.00").buy().qty("1").json(),
            )
            .await;
        let cancel = halted.cancel_order(&token, resting.id()).await;
        assert_eq!(cancel.status, StatusCode::OK, "cancels still work");

        app.execute_where(
            "update paper_accounts set mode = 'live' where user_id = $1",
            user_id,
        )
        .await;
        let keys_before = app.count("select count(*) from idempotency_keys").await;
        let live = app.create_order(&token, key, &body).await;
        assert_problem(
            &live,
            StatusCode::FORBIDDEN,
            ErrorCode::LiveTradingUnavailable,
        );
        let fresh = app.create_order(&token, Uuid::new_v4(), &body).await;
        assert_problem(
            &fresh,
            StatusCode::FORBIDDEN,
            ErrorCode::LiveTradingUnavailable,
        );
        assert_eq!(
            app.count("select count(*) from idempotency_keys").await,
            keys_before,
            "no row before the gates"
        );
    })
    .await;
}

/// Closes (partial and full), realized P&L, account reset, reads.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn close_and_reset(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("close@example.com").await;
        app.quote("AAPL", "190.00", "190.10").await;
        let bought = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("3").json(),
            )
            .await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.text);
        assert_eq!(bought.body["position_intent"], "buy_to_open", "inferred");
        app.quote("AAPL", "195.00", "195.10").await;

        let partial = app
            .close_position(&token, Uuid::new_v4(), "AAPL", &json!({ "qty": "1" }))
            .await;
        assert_eq!(partial.status, StatusCode::CREATED, "{}", partial.text);
        assert_eq!(partial.body["purpose"], "close");
        assert_eq!(partial.body["side"], "sell");
        assert_eq!(partial.body["filled_avg_price"], "195.00");
        let held = app.positions(&token).await;
        assert_eq!(position(&held, "AAPL").expect("AAPL")["qty"], "2");
        assert_eq!(app.account(&token).await.body["realized_pnl"], "4.90");

        let too_much = app
            .close_position(&token, Uuid::new_v4(), "AAPL", &json!({ "qty": "5" }))
            .await;
        assert_problem(&too_much, StatusCode::FORBIDDEN, ErrorCode::InsufficientQty);

        let rest = app
            .close_position(&token, Uuid::new_v4(), "AAPL", &json!({}))
            .await;
        assert_eq!(rest.status, StatusCode::CREATED);
        assert!(app.positions(&token).await.is_empty());
        let none = app
            .close_position(&token, Uuid::new_v4(), "AAPL", &json!({}))
            .await;
        assert_eq!(none.status, StatusCode::NOT_FOUND);
        let after = app.account(&token).await.body;
        assert_eq!(after["realized_pnl"], "14.70");
        assert_eq!(after["cash"], "100014.70");

        let listed = app.list_orders(&token, "").await;
        assert_eq!(listed.body["data"].as_array().map(Vec::len), Some(3));
        let open = app.list_orders(&token, "status=open").await;
        assert_eq!(open.body["data"], json!([]));
        assert_eq!(
            app.list_orders(&token, "status=bogus").await.status,
            StatusCode::BAD_REQUEST
        );

        // Reset: starting cash, no positions, open orders canceled.
        app.create_order(
            &token,
            Uuid::new_v4(),
            &Order::market("AAPL").buy().qty("1").json(),
        )
        .await;
        app.create_order(
            &token,
            Uuid::new_v4(),
            &Order::limit("AAPL", "150").buy().qty("1").json(),
        )
        .await;
        let reset = app.reset_account(&token, Uuid::new_v4()).await;
        assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);
        assert_eq!(reset.body["cash"], "100000.00");
        assert_eq!(reset.body["buying_power"], "100000.00");
        assert_eq!(reset.body["realized_pnl"], "0.00");
        assert!(app.positions(&token).await.is_empty());
        assert_eq!(
            app.count("select count(*) from paper_orders where status = 'new'")
                .await,
            0
        );
        assert_eq!(app.audit_count("account.reset").await, 1);
    })
    .await;
}

/// Multi-leg through /orders, rejections stored and replayed, client_order_id rules.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn mleg_orders_rejections_and_client_order_ids(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("mleg@example.com").await;
        app.quote("XYZ270115C00060000", "5.00", "5.10").await;
        app.quote("XYZ270115C00065000", "3.00", "3.10").await;
        let spread = Order::mleg_limit(
            "2.20",
            vec![
                json!({ "symbol": "XYZ270115C00060000", "ratio_qty": 1, "side": "buy",
                    "position_intent": "buy_to_open" }),
                json!({ "symbol": "XYZ270115C00065000", "ratio_qty": 1, "side": "sell",
                    "position_intent": "sell_to_open" }),
            ],
        )
        .qty("2")
        .json();
        let filled = app.create_order(&token, Uuid::new_v4(), &spread).await;
        assert_eq!(filled.status, StatusCode::CREATED, "{}", filled.text);
        assert_eq!(filled.body["status"], "filled");
        assert_eq!(
            filled.body["filled_avg_price"], "2.10",
            "net debit 5.10 - 3.00"
        );
        assert_eq!(app.account(&token).await.body["cash"], "99580.00");

        // No quote: 422, stored and replayed like any business answer.
        let key = Uuid::new_v4();
        let unquoted = Order::market("QQQ").buy_to_open().qty("1").day().json();
        let first = app.create_order(&token, key, &unquoted).await;
        assert_problem(
            &first,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::QuoteUnavailable,
        );
        let again = app.create_order(&token, key, &unquoted).await;
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(again.status, StatusCode::UNPROCESSABLE_ENTITY);

        let bad_symbol = Order::market("aapl").buy_to_open().qty("1").day().json();
        let bad_symbol = app.create_order(&token, Uuid::new_v4(), &bad_symbol).await;
        assert_problem(
            &bad_symbol,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidSymbol,
        );
        let no_side = Order::market("AAPL").qty("1").json();
        let no_side = app.create_order(&token, Uuid::new_v4(), &no_side).await;
        assert_problem(
            &no_side,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );

        // client_order_id: derived from the key when absent (stable), unique per account.
        app.quote("AAPL", "100.00", "100.10").await;
        let mine = Order::market("AAPL")
            .buy()
            .qty("1")
            .client_order_id("mine-1")
            .json();
        let named = app.create_order(&token, Uuid::new_v4(), &mine).await;
        assert_eq!(named.body["client_order_id"], "mine-1");
        let dup = app.create_order(&token, Uuid::new_v4(), &mine).await;
        assert_problem(
            &dup,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::DuplicateClientOrderId,
        );
        let derived = filled.body["client_order_id"].as_str().expect("derived id");
        assert!(Uuid::parse_str(derived).is_ok());
    })
    .await;
}

/// A configured fee schedule is charged once per order and shown on it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn fees_follow_the_configured_schedule(pool: PgPool) {
    let fees = raptor_engine::FeeSchedule {
        per_contract: crate::helpers::dec("0.65"),
        per_share: crate::helpers::dec("0"),
        min_per_order: crate::helpers::dec("1.00"),
    };
    let options = Options {
        api: ApiConfig {
            fees,
            ..ApiConfig::default()
        },
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("fees@example.com").await;
        app.quote(LEAPS, "12.30", "12.40").await;
        let one = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market(LEAPS).buy_to_open().qty("1").day().json(),
            )
            .await;
        assert_eq!(one.body["fees"], "1.00", "the per-order minimum");
        let two = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market(LEAPS).buy_to_open().qty("2").day().json(),
            )
            .await;
        assert_eq!(two.body["fees"], "1.30");
        assert_eq!(
            app.account(&token).await.body["cash"],
            "96277.70",
            "100000 - 1240 - 1.00 - 2480 - 1.30"
        );
    })
    .await;
}

/// Control characters never turn a business answer into a 500 or a stuck key.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn nul_characters_are_rejected_cleanly(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("nul@example.com").await;
        app.quote("AAPL", "100.00", "100.10").await;
        let key = Uuid::new_v4();
        let body = Order::market("AAPL")
            .buy()
            .qty("1")
            .client_order_id("a\u{0}b")
            .json();
        let first = app.create_order(&token, key, &body).await;
        assert_problem(
            &first,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );
        let key2 = Uuid::new_v4();
        let symbol = Order::market("AAPL\u{0}").qty("1").json();
        let bad_symbol = app.create_order(&token, key2, &symbol).await;
        assert_eq!(
            bad_symbol.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            bad_symbol.text
        );
        let replay = app.create_order(&token, key2, &symbol).await;
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
    })
    .await;
}

/// The fence on the order's own statement (its completion is a part of the insert): an order
/// whose attempt went stale while it waited for its account resumes while its successor holds
/// the key in flight, waiting for the same account. The stale order writes nothing and is
/// answered 409; the successor's order is the one placed, and the key replays it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_stale_order_never_completes_its_successors_claim(pool: PgPool) {
    let options = Options::default().stale_after(std::time::Duration::from_secs(1));
    TestApp::run(&pool, options, async |app| {
        let (user_id, token) = app.user("fenced-order@example.com").await;
        app.quote("AAPL", "101.00", "102.00").await;
        assert_eq!(app.account(&token).await.status, StatusCode::OK);
        let key = Uuid::new_v4();
        let body = Order::market("AAPL").buy().qty("1").json();
        // The account row locked from outside: every order of this user waits for it, after
        // its claim, inside its business transaction.
        let mut holder = pool.begin().await.expect("begin");
        sqlx::query("select 1 from paper_accounts where user_id = $1 for update")
            .bind(user_id)
            .execute(&mut *holder)
            .await
            .expect("lock the account");
        let place = |router: axum::Router| {
            let call = crate::helpers::Call::new(axum::http::Method::POST, "/api/trading/orders")
                .token(&token)
                .key(key)
                .json(&body);
            tokio::spawn(crate::helpers::send(router, call))
        };
        let first = place(app.router.clone());
        tokio::time::sleep(std::time::Duration::from_millis(1300)).await;
        let releaser = app.create_order(&token, key, &body).await;
        assert_problem(
            &releaser,
            StatusCode::CONFLICT,
            ErrorCode::IdempotencyInFlight,
        );
        assert_eq!(releaser.body["retry_after_ms"], 0);
        let successor = place(app.router.clone());
        // The successor's claim is in (in flight, waiting for the account) before the lock goes.
        for _ in 0..100 {
            if app.key_status(key).await.as_deref() == Some("in_flight") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(app.key_status(key).await.as_deref(), Some("in_flight"));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        holder.commit().await.expect("unlock the account");
        let (first, successor) = (first.await.expect("join"), successor.await.expect("join"));
        assert_eq!(
            first.status,
            StatusCode::CONFLICT,
            "the stale order completed its successor's claim: {}",
            first.text
        );
        assert_eq!(successor.status, StatusCode::CREATED, "{}", successor.text);
        let orders = app.list_orders(&token, "status=all").await;
        assert_eq!(
            orders.body["data"].as_array().map(Vec::len),
            Some(1),
            "exactly one order: {}",
            orders.text
        );
        let replay = app.create_order(&token, key, &body).await;
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body_without_marker(), successor.body);
    })
    .await;
}
