//! Options on the paper book: the worked long-call-calendar (LCC) example with its roll, and
//! rolls that are rejected whole.

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::{position, LEAPS, NEAR, NEXT};
use crate::helpers::{assert_problem, Options, Order, TestApp};

/// Long 1 LEAPS at 12.40, short 1 near call at 1.20.
async fn lcc(app: &TestApp, token: &str) {
    app.quote(LEAPS, "12.30", "12.40").await;
    app.quote(NEAR, "1.20", "1.25").await;
    let leaps = Order::market(LEAPS).buy_to_open().qty("1").day().json();
    let leaps = app.create_order(token, Uuid::new_v4(), &leaps).await;
    assert_eq!(leaps.status, StatusCode::CREATED, "{}", leaps.text);
    assert_eq!(leaps.body["status"], "filled");
    assert_eq!(leaps.body["filled_avg_price"], "12.40");
    let short = Order::market(NEAR).sell_to_open().qty("1").day().json();
    let short = app.create_order(token, Uuid::new_v4(), &short).await;
    assert_eq!(short.status, StatusCode::CREATED, "{}", short.text);
    assert_eq!(short.body["filled_avg_price"], "1.20");
}

/// The worked long-call-calendar example: open the calendar, roll the short leg for a net
/// credit, replay the roll, and refuse an expired contract (clock fixed at 2026-12-01).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn lcc_worked_example(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("lcc@example.com").await;
        lcc(app, &token).await;
        assert_eq!(app.account(&token).await.body["cash"], "98880.00");

        app.quote(NEAR, "0.40", "0.45").await;
        app.quote(NEXT, "1.30", "1.35").await;
        let key = Uuid::new_v4();
        let body = json!({ "to_symbol": NEXT, "qty": "1" });
        let roll = app.roll(&token, key, NEAR, &body).await;
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

        let after = app.account(&token).await.body;
        assert_eq!(after["cash"], "98965.00", "cash +85.00 from the roll");
        assert_eq!(after["realized_pnl"], "75.00");
        let held = app.positions(&token).await;
        assert_eq!(held.len(), 2, "{held:?}");
        assert_eq!(position(&held, LEAPS).expect("leaps")["qty"], "1");
        let new_short = position(&held, NEXT).expect("new short");
        assert_eq!(new_short["qty"], "-1");
        assert_eq!(new_short["avg_entry_price"], "1.30");
        assert!(position(&held, NEAR).is_none(), "old short closed");
        let near_pnl: rust_decimal::Decimal = app
            .scalar_where(
                "select realized_pnl from paper_positions where symbol = $1",
                NEAR,
            )
            .await;
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
        let replay = app.roll(&token, key, NEAR, &body).await;
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body_without_marker(), roll.body);
        assert_eq!(replay.header("location"), roll.header("location"));
        assert_eq!(
            app.count("select count(*) from paper_orders where purpose = 'roll'")
                .await,
            1
        );
        assert_eq!(app.account(&token).await.body["cash"], "98965.00");

        // A contract past its expiry (by the server's clock) is refused.
        let expired = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("XYZ261120C00065000")
                    .buy_to_open()
                    .qty("1")
                    .day()
                    .json(),
            )
            .await;
        assert_problem(
            &expired,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::ContractExpired,
        );
    })
    .await;
}

/// A roll whose open leg would be uncovered, or whose close leg exceeds the short, is rejected
/// whole: no leg fills, nothing changes but the audit log.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn invalid_rolls_are_rejected_whole(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("roll@example.com").await;
        lcc(app, &token).await;
        app.quote(NEAR, "0.40", "0.45").await;
        let beyond_leaps = "XYZ280616C00070000";
        app.quote(beyond_leaps, "2.00", "2.10").await;
        app.quote(NEXT, "1.30", "1.35").await;
        let before = (app.account(&token).await.body, app.positions(&token).await);

        let uncovered = app
            .roll(
                &token,
                Uuid::new_v4(),
                NEAR,
                &json!({ "to_symbol": beyond_leaps, "qty": "1" }),
            )
            .await;
        assert_problem(
            &uncovered,
            StatusCode::FORBIDDEN,
            ErrorCode::UncoveredShortOption,
        );

        let too_many = app
            .roll(
                &token,
                Uuid::new_v4(),
                NEAR,
                &json!({ "to_symbol": NEXT, "qty": "2" }),
            )
            .await;
        assert_problem(&too_many, StatusCode::FORBIDDEN, ErrorCode::InsufficientQty);

        let after = (app.account(&token).await.body, app.positions(&token).await);
        assert_eq!(before, after, "no leg filled");
        assert_eq!(
            app.count("select count(*) from paper_orders where purpose = 'roll'")
                .await,
            0
        );
        assert_eq!(app.audit_count("order.rejected").await, 2);

        // A naked short call is refused too.
        app.quote("XYZ270115C00080000", "0.50", "0.55").await;
        let naked = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("XYZ270115C00080000")
                    .sell_to_open()
                    .qty("5")
                    .day()
                    .json(),
            )
            .await;
        assert_problem(
            &naked,
            StatusCode::FORBIDDEN,
            ErrorCode::UncoveredShortOption,
        );
    })
    .await;
}

/// A cash account has no leverage (the review's reproduction): 1,000 short call spreads on a
/// $100,000 account (short the 100 call, long the 110) used to turn their credit into
/// $500,000 of buying power, which then bought $416,000 of stock. The spread's maximum loss,
/// $1,000,000 less its $400,000 credit, is refused; ten spreads reserve $10,000 against the
/// cash their credit raised, the stock the credit used to pay for is refused, and closing the
/// spread gives the reservation back.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_credit_spread_never_becomes_buying_power(pool: PgPool) {
    const SHORT_100: &str = "XYZ261218C00100000";
    const LONG_110: &str = "XYZ261218C00110000";
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("spread@example.com").await;
        app.quote(SHORT_100, "5.00", "5.10").await;
        app.quote(LONG_110, "0.90", "1.00").await;
        app.quote("XYZ", "99.90", "100.00").await;
        let legs = |short: &str, long: &str| {
            vec![
                json!({ "symbol": SHORT_100, "ratio_qty": 1, "side": short.split('_').next(),
                        "position_intent": short }),
                json!({ "symbol": LONG_110, "ratio_qty": 1, "side": long.split('_').next(),
                        "position_intent": long }),
            ]
        };
        let open = |qty: &str| {
            Order::mleg_market(legs("sell_to_open", "buy_to_open"))
                .qty(qty)
                .json()
        };

        let refused = app
            .create_order(&token, Uuid::new_v4(), &open("1000"))
            .await;
        assert_problem(
            &refused,
            StatusCode::FORBIDDEN,
            ErrorCode::InsufficientBuyingPower,
        );
        assert_eq!(
            refused.body["buying_power"], "100000.00",
            "{}",
            refused.text
        );
        assert_eq!(refused.body["cost_basis"], "600000.00", "{}", refused.text);

        let ten = app.create_order(&token, Uuid::new_v4(), &open("10")).await;
        assert_eq!(ten.status, StatusCode::CREATED, "{}", ten.text);
        assert_eq!(ten.body["filled_avg_price"], "-4.00", "{}", ten.text);
        let account = app.account(&token).await.body;
        assert_eq!(account["cash"], "104000.00");
        assert_eq!(account["spread_requirement"], "10000.00");
        assert_eq!(account["buying_power"], "94000.00", "{account}");

        let stock = Order::market("XYZ").buy_to_open().qty("1000").json();
        let stock = app.create_order(&token, Uuid::new_v4(), &stock).await;
        assert_problem(
            &stock,
            StatusCode::FORBIDDEN,
            ErrorCode::InsufficientBuyingPower,
        );
        assert_eq!(stock.body["buying_power"], "94000.00", "{}", stock.text);

        let close = Order::mleg_market(legs("buy_to_close", "sell_to_close"))
            .qty("10")
            .json();
        let close = app.create_order(&token, Uuid::new_v4(), &close).await;
        assert_eq!(close.status, StatusCode::CREATED, "{}", close.text);
        let account = app.account(&token).await.body;
        assert_eq!(account["spread_requirement"], "0.00");
        assert_eq!(account["buying_power"], account["cash"], "{account}");
    })
    .await;
}
