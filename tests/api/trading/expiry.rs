//! Expiry: `day` orders at the session close (on the next read or write, or by the sweep), and
//! options at the New York close of their expiration day.

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use sqlx::PgPool;
use uuid::Uuid;

use super::NEAR;
use crate::helpers::{assert_problem, Options, Order, TestApp};

fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> chrono::DateTime<chrono::Utc> {
    use chrono::TimeZone;
    chrono::Utc
        .with_ymd_and_hms(y, m, d, h, min, 0)
        .single()
        .expect("instant")
}

fn clock_at(now: chrono::DateTime<chrono::Utc>) -> Options {
    Options {
        now,
        ..Options::default()
    }
}

/// A `day` limit resting at 10:00 New York expires at the 16:00 close: the next read or write
/// of the account shows it expired, its reservation freed, audited once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn day_orders_expire_at_the_session_close(pool: PgPool) {
    // Tuesday 2026-12-01 10:00 New York.
    TestApp::run(&pool, Options::default(), async |morning| {
        let (_, token) = morning.user("day@example.com").await;
        morning.quote("AAPL", "189.00", "190.00").await;
        let limit = Order::limit("AAPL", "150.00").buy().qty("10").json();
        let resting = morning.create_order(&token, Uuid::new_v4(), &limit).await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        let gtc = Order::limit("AAPL", "150.00").buy().qty("1").gtc().json();
        let good = morning.create_order(&token, Uuid::new_v4(), &gtc).await;
        assert_eq!(good.body["status"], "new");
        let before = morning.account(&token).await.body;
        assert_eq!(before["reserved_cash"], "1650.00");

        // 15:59 New York: still good.
        let late = morning.replica(clock_at(at(2026, 12, 1, 20, 59))).await;
        let id = resting.id();
        let still = late.order(&token, &id).await;
        assert_eq!(still.body["status"], "new");

        // 16:30 New York: expired on the next read, the reservation freed, one audit row.
        let evening = morning.replica(clock_at(at(2026, 12, 1, 21, 30))).await;
        let expired = evening.order(&token, &id).await;
        assert_eq!(expired.body["status"], "expired", "{}", expired.text);
        let after = evening.account(&token).await.body;
        assert_eq!(
            after["reserved_cash"], "150.00",
            "only the gtc order reserves"
        );
        let gtc_id = good.id();
        let gtc_now = evening.order(&token, &gtc_id).await;
        assert_eq!(gtc_now.body["status"], "new", "gtc orders rest on");
        assert_eq!(evening.audit_count("order.expired").await, 1);
        let reason: String = evening
            .scalar("select context->>'reason' from audit_log where action = 'order.expired'")
            .await;
        assert_eq!(reason, "session_close");
        // A quote that would have filled it fills nothing now.
        evening.quote("AAPL", "140.00", "149.00").await;
        let gtc_filled = evening.order(&token, &gtc_id).await;
        assert_eq!(gtc_filled.body["status"], "filled");
        let still_expired = evening.order(&token, &id).await;
        assert_eq!(still_expired.body["status"], "expired");
    })
    .await;
}

/// The sweep (`raptor orders expire`) expires orders on accounts nobody touches, and an order
/// on an option frees its reservation at the expiry's close, not at the next quote.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_sweep_expires_day_orders_and_dead_options(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let (_, token) = morning.user("sweep@example.com").await;
        morning.quote(NEAR, "1.20", "1.25").await;
        let option = Order::limit(NEAR, "1.00")
            .buy_to_open()
            .qty("1")
            .gtc()
            .json();
        let resting = morning.create_order(&token, Uuid::new_v4(), &option).await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        let id: Uuid = resting.id().parse().expect("uuid");

        // The day before the contract's expiry: nothing to do.
        let before = morning.replica(clock_at(at(2026, 12, 17, 22, 0))).await;
        assert_eq!(
            raptor_api::trading::expire_orders(&before.state)
                .await
                .expect("sweep")
                .orders,
            0
        );
        // After the close of the expiry date (no quote update, no read in between).
        let after = morning.replica(clock_at(at(2026, 12, 18, 21, 5))).await;
        assert_eq!(
            raptor_api::trading::expire_orders(&after.state)
                .await
                .expect("sweep")
                .orders,
            1
        );
        let status: String = after
            .scalar_where("select status from paper_orders where id = $1", id)
            .await;
        assert_eq!(status, "expired");
        let reason: String = after
            .scalar("select context->>'reason' from audit_log where action = 'order.expired'")
            .await;
        assert_eq!(reason, "contract_expiry");
        assert_eq!(
            raptor_api::trading::expire_orders(&after.state)
                .await
                .expect("sweep")
                .orders,
            0,
            "each order expires once"
        );
    })
    .await;
}

/// An option trades until the regular close of its expiration day in New York, not until the
/// end of its UTC date: at 15:00 New York on 2026-12-18 (20:00 UTC) the December call fills;
/// at 16:30 New York (21:30 UTC, the same UTC date) it is `422 contract_expired`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_option_stops_trading_at_its_new_york_close(pool: PgPool) {
    for (hour, minute, expired) in [(20, 0, false), (21, 30, true)] {
        let now = at(2026, 12, 18, hour, minute);
        TestApp::run(&pool, clock_at(now), async |app| {
            let (_, token) = app
                .user(&format!("expiry-{hour}{minute}@example.com"))
                .await;
            app.quote(NEAR, "1.00", "1.10").await;
            let answer = app
                .create_order(
                    &token,
                    Uuid::new_v4(),
                    &Order::market(NEAR).buy_to_open().qty("1").day().json(),
                )
                .await;
            if expired {
                assert_problem(
                    &answer,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::ContractExpired,
                );
            } else {
                assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
                assert_eq!(answer.body["status"], "filled");
            }
        })
        .await;
    }
}
