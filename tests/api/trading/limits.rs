//! What one account can cost the service: open orders are capped, oversized orders are refused
//! before any lock or audit write, and one busy account does not starve the others.

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, post_http, Options, Order, TestApp};

/// Inserts `n` resting limit buys of `symbol` (1 share at `limit`) for `user_id`, directly.
async fn resting_orders(app: &TestApp, user_id: i32, symbol: &str, limit: &str, n: i32) {
    let mut tx = app.pool.begin().await.expect("begin");
    sqlx::query(
        "insert into paper_orders (id, user_id, client_order_id, order_class, order_type,
                                   time_in_force, symbol, side, position_intent, qty,
                                   limit_price, status, reserved_cash)
         select gen_random_uuid(), $1, 'seed-' || g, 'simple', 'limit', 'gtc', $2, 'buy',
                'buy_to_open', 1, $3::numeric, 'new', $3::numeric
           from generate_series(1, $4) g",
    )
    .bind(user_id)
    .bind(symbol)
    .bind(limit)
    .bind(n)
    .execute(&mut *tx)
    .await
    .expect("seed orders");
    sqlx::query(
        "insert into paper_order_legs (order_id, leg_index, symbol, side, position_intent,
                                       ratio_qty, qty)
         select id, 0, symbol, side, position_intent, 1, qty
           from paper_orders where user_id = $1 and client_order_id like 'seed-%'",
    )
    .bind(user_id)
    .execute(&mut *tx)
    .await
    .expect("seed legs");
    tx.commit().await.expect("commit");
}

/// An account with `RAPTOR_MAX_OPEN_ORDERS` open orders cannot rest another one (it can still
/// trade at market).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn open_orders_per_account_are_capped(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("cap@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        resting_orders(app, user_id, "AAPL", "1.00", 499).await;
        let limit = Order::limit("AAPL", "2.00").buy().qty("1").gtc().json();
        let five_hundredth = app.create_order(&token, Uuid::new_v4(), &limit).await;
        assert_eq!(
            five_hundredth.status,
            StatusCode::CREATED,
            "{}",
            five_hundredth.text
        );
        assert_eq!(five_hundredth.body["status"], "new");
        let over = app.create_order(&token, Uuid::new_v4(), &limit).await;
        assert_problem(
            &over,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::TooManyOpenOrders,
        );
        let market = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("1").json(),
            )
            .await;
        assert_eq!(market.status, StatusCode::CREATED, "{}", market.text);
        assert_eq!(
            app.count("select count(*) from paper_orders where status = 'new'")
                .await,
            500
        );
    })
    .await;
}

/// A multi-leg order with thousands of legs is refused on its shape, before any quote lock or
/// audit write; no audit row can exceed the context cap.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn oversized_orders_are_refused_before_any_lock_or_audit(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("legs@example.com").await;
        let legs: Vec<Value> = (0..5000)
            .map(|_| json!({ "symbol": "AAPL", "ratio_qty": 1, "side": "buy" }))
            .collect();
        let body = Order::mleg_market(legs).qty("1").json();
        // A quote row locked by someone else: an order that tried to lock quotes would wait.
        app.quote("AAPL", "1.00", "1.10").await;
        let audit_before = app.count("select count(*) from audit_log").await;
        let holder = app
            .lock("select 1 from quotes where symbol = 'AAPL' for update")
            .await;
        let refused = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            app.create_order(&token, Uuid::new_v4(), &body),
        )
        .await
        .expect("answered without waiting for the quote lock");
        holder.rollback().await.expect("unlock");
        assert_problem(
            &refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );
        assert_eq!(
            app.count("select count(*) from audit_log").await,
            audit_before
        );

        let long_symbol = Order::market(&"X".repeat(10_000)).buy().qty("1").json();
        let refused = app.create_order(&token, Uuid::new_v4(), &long_symbol).await;
        assert_problem(
            &refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidSymbol,
        );

        let mut conn = app.pool.acquire().await.expect("conn");
        raptor_api::audit::record(
            &mut conn,
            raptor_api::audit::AuditEvent::named(
                None,
                "probe.big",
                json!({ "blob": "x".repeat(100_000) }),
            ),
        )
        .await
        .expect("audit");
        let largest: i32 = app
            .scalar("select max(length(context::text)) from audit_log")
            .await;
        assert!(
            largest <= raptor_api::audit::MAX_CONTEXT_BYTES as i32,
            "{largest}"
        );
        drop(conn);
    })
    .await;
}

/// 25 concurrent orders on one (locked) account hold at most a few connections; the excess
/// waits briefly and gets 429, and another user's order is never starved of a connection past
/// its store timeout.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn one_busy_account_does_not_starve_other_users(pool: PgPool) {
    let mut options = Options {
        pool_size: 8,
        db_timeouts: Some((
            std::time::Duration::from_secs(3),
            std::time::Duration::from_secs(10),
        )),
        ..Options::default()
    };
    options.idempotency.store_timeout = std::time::Duration::from_millis(1000);
    options.api.account_write_wait = std::time::Duration::from_millis(500);
    TestApp::run(&pool, options, async |app| {
        let (_, busy_token) = app.user("busy@example.com").await;
        let (_, other_token) = app.user("other@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let server = app.spawn().await;

        // The busy account's row is held, so its orders pile up inside their transactions.
        let holder = app
            .lock(
                "select 1 from paper_accounts a join users u on u.id = a.user_id
                  where u.email = 'busy@example.com' for update of a",
            )
            .await;
        let mut pile = tokio::task::JoinSet::new();
        for _ in 0..25 {
            let (client, url, token) = (
                server.client.clone(),
                server.url("/api/trading/orders"),
                busy_token.clone(),
            );
            pile.spawn(post_http(
                client,
                url,
                token,
                Some(Uuid::new_v4()),
                Order::market("AAPL").buy().qty("1").json(),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let started = std::time::Instant::now();
        let other = server
            .post(
                "/api/trading/orders",
                &other_token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("1").json(),
            )
            .await;
        let took = started.elapsed();
        assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
        assert!(
            took < std::time::Duration::from_millis(1000),
            "other user waited {took:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        holder.rollback().await.expect("unlock");

        let (mut created, mut limited) = (0, 0);
        while let Some(answer) = pile.join_next().await {
            let answer = answer.expect("join");
            match answer.status {
                StatusCode::CREATED => created += 1,
                StatusCode::TOO_MANY_REQUESTS => {
                    assert_problem(
                        &answer,
                        StatusCode::TOO_MANY_REQUESTS,
                        ErrorCode::RateLimited,
                    );
                    assert!(answer.header("retry-after").is_some());
                    limited += 1;
                }
                other => panic!("unexpected {other}: {}", answer.text),
            }
        }
        assert_eq!(created + limited, 25);
        assert!(limited > 0, "the excess was limited");
        assert!(created >= 2, "the permitted writes went through");
        server.stop().await;
    })
    .await;
}

/// `legs`, when sent, has 2 to 4 entries, as the document's `minItems`/`maxItems` say: none,
/// one or five legs (or a multi-leg order without `legs`) is `422 invalid_order`, and nothing
/// is stored.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn multi_leg_orders_have_two_to_four_legs(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("legs@example.com").await;
        let leg = |symbol: &str| json!({ "symbol": symbol, "side": "buy" });
        let five: Vec<Value> = (1..=5)
            .map(|i| leg(&format!("XYZ280121C000{i}0000")))
            .collect();
        let one_leg = Order::mleg_market(vec![leg(super::LEAPS)]).qty("1").json();
        let no_legs = Order::mleg_market(vec![]).qty("1").json();
        let without = json!({ "order_class": "mleg", "type": "market", "qty": "1" });
        let simple_with_empty = Order::market("AAPL")
            .buy()
            .qty("1")
            .set("legs", json!([]))
            .json();
        let five_legs = Order::mleg_market(five).qty("1").json();
        for body in [one_leg, no_legs, without, simple_with_empty, five_legs] {
            let refused = app.create_order(&token, Uuid::new_v4(), &body).await;
            assert_problem(
                &refused,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidOrder,
            );
            assert!(
                refused.body["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("2 to 4 legs")),
                "{body}: {}",
                refused.text
            );
        }
        let stored: i64 = app.scalar("select count(*) from paper_orders").await;
        assert_eq!(stored, 0);
    })
    .await;
}

/// A negative quantity (an order's, a close's, a roll's; `-0` too) is `422 invalid_order` and a
/// quote's price with a minus sign (`-0.00` too) `422 invalid_body`: the document's pattern for
/// these decimals has no minus sign.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn negative_quantities_and_quotes_are_refused(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("negative@example.com").await;
        let (_, operator) = app.operator("negative-operator@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let bought = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("2").json(),
            )
            .await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.text);

        for qty in ["-1", "-0"] {
            let order = app
                .create_order(
                    &token,
                    Uuid::new_v4(),
                    &Order::market("AAPL").buy().qty(qty).json(),
                )
                .await;
            assert_problem(
                &order,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidOrder,
            );
        }
        let close = app
            .close_position(&token, Uuid::new_v4(), "AAPL", &json!({ "qty": "-1" }))
            .await;
        assert_problem(
            &close,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );
        let roll = app
            .roll(
                &token,
                Uuid::new_v4(),
                super::NEAR,
                &json!({ "to_symbol": super::NEXT, "qty": "-1" }),
            )
            .await;
        assert_problem(
            &roll,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );
        for body in [
            json!({ "bid": "-1.00", "ask": "1.25" }),
            json!({ "bid": "-2.00", "ask": "-1.00" }),
            json!({ "bid": "-0.00", "ask": "1.25" }),
        ] {
            let quote = app.put_quote(&operator, "AAPL", &body).await;
            assert_problem(
                &quote,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidBody,
            );
        }
        let orders: i64 = app.scalar("select count(*) from paper_orders").await;
        assert_eq!(orders, 1, "only the first buy");
        assert_eq!(app.positions(&token).await[0]["qty"], "2");
    })
    .await;
}
