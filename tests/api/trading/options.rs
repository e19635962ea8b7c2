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
