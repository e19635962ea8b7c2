//! Option positions at their expiration's close: out of the money they expire worthless, in
//! the money they settle in cash at intrinsic value from the underlying's mid; without an
//! underlying quote they wait; each settles once however many passes race; and the
//! long-call-calendar's next roll is not blocked by a short left to expire.

use axum::http::StatusCode;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::{position, LEAPS, NEAR, NEXT};
use crate::helpers::{Options, Order, TestApp};

/// The underlying of [`LEAPS`], [`NEAR`] (strike 65, expiring 2026-12-18) and [`NEXT`].
const XYZ: &str = "XYZ";

fn at(y: i32, m: u32, d: u32, h: u32, min: u32) -> Options {
    use chrono::TimeZone;
    Options {
        now: chrono::Utc
            .with_ymd_and_hms(y, m, d, h, min, 0)
            .single()
            .expect("instant"),
        ..Options::default()
    }
}

/// 16:05 New York on the near call's expiration day.
fn after_the_close() -> Options {
    at(2026, 12, 18, 21, 5)
}

/// A covered call: long 1 LEAPS at 12.40, short 1 near call at 1.20 (a 120.00 credit).
async fn covered_call(app: &TestApp, email: &str) -> String {
    let (_, token) = app.user(email).await;
    app.quote(LEAPS, "12.30", "12.40").await;
    app.quote(NEAR, "1.20", "1.25").await;
    for order in [
        Order::market(LEAPS).buy_to_open().qty("1").json(),
        Order::market(NEAR).sell_to_open().qty("1").json(),
    ] {
        let placed = app.create_order(&token, Uuid::new_v4(), &order).await;
        assert_eq!(placed.body["status"], "filled", "{}", placed.text);
    }
    token
}

/// Long 1 near call at 1.25 (a 125.00 debit).
async fn long_call(app: &TestApp, email: &str) -> String {
    let (_, token) = app.user(email).await;
    app.quote(NEAR, "1.20", "1.25").await;
    let order = Order::market(NEAR).buy_to_open().qty("1").json();
    let placed = app.create_order(&token, Uuid::new_v4(), &order).await;
    assert_eq!(placed.body["status"], "filled", "{}", placed.text);
    token
}

async fn sweep(app: &TestApp) -> raptor_api::trading::Expired {
    raptor_api::trading::expire_orders(&app.state)
        .await
        .expect("sweep")
}

/// Out of the money (mid 60.50 under the 65 strike): the short keeps its premium, the long
/// loses its own, no cash moves, the positions are gone, each audited once as worthless.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn out_of_the_money_options_expire_worthless(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let short = covered_call(morning, "short@example.com").await;
        let long = long_call(morning, "long@example.com").await;
        morning.quote(XYZ, "60.00", "61.00").await;
        // Before the close nothing settles.
        let before = morning.replica(at(2026, 12, 18, 20, 55)).await;
        assert_eq!(sweep(&before).await.settled, 0);
        assert!(position(&before.positions(&short).await, NEAR).is_some());

        let evening = morning.replica(after_the_close()).await;
        let done = sweep(&evening).await;
        assert_eq!((done.settled, done.awaiting_quote), (2, 0));
        let short_account = evening.account(&short).await.body;
        assert_eq!(
            short_account["cash"], "98880.00",
            "100000 - 1240 + 120: unchanged"
        );
        assert_eq!(short_account["realized_pnl"], "120.00", "the premium kept");
        let held = evening.positions(&short).await;
        assert!(position(&held, NEAR).is_none(), "{held:?}");
        assert_eq!(position(&held, LEAPS).expect("leaps")["qty"], "1");
        let long_account = evening.account(&long).await.body;
        assert_eq!(long_account["cash"], "99875.00");
        assert_eq!(long_account["realized_pnl"], "-125.00", "the premium lost");
        assert!(evening.positions(&long).await.is_empty());
        assert_eq!(evening.audit_count("position.expired").await, 2);
        let worthless = evening
            .count(
                "select count(*) from audit_log where action = 'position.expired'
                    and context->>'outcome' = 'worthless' and context->>'cash_delta' = '0'",
            )
            .await;
        assert_eq!(worthless, 2);
        assert_eq!(sweep(&evening).await, Default::default(), "once");
    })
    .await;
}

/// In the money (mid 70.05, intrinsic 5.05): the long receives 505.00, the short pays it; one
/// settles on the next read of the account (lazily), the other by the sweep.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn in_the_money_options_settle_in_cash(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let short = covered_call(morning, "short@example.com").await;
        let long = long_call(morning, "long@example.com").await;
        morning.quote(XYZ, "70.00", "70.10").await;
        let evening = morning.replica(after_the_close()).await;

        // The long, by reading its account.
        let long_account = evening.account(&long).await.body;
        assert_eq!(long_account["cash"], "100380.00", "99875 + 505");
        assert_eq!(long_account["realized_pnl"], "380.00", "505 - 125");
        assert!(evening.positions(&long).await.is_empty());
        // The short, by the sweep (the long is done already).
        let done = sweep(&evening).await;
        assert_eq!(done.settled, 1);
        let short_account = evening.account(&short).await.body;
        assert_eq!(short_account["cash"], "98375.00", "98880 - 505");
        assert_eq!(short_account["realized_pnl"], "-385.00", "120 - 505");
        assert!(position(&evening.positions(&short).await, NEAR).is_none());
        let cash: Vec<String> = sqlx::query_scalar(
            "select context->>'cash_delta' from audit_log
              where action = 'position.expired' and context->>'outcome' = 'cash'
              order by id",
        )
        .fetch_all(&evening.pool)
        .await
        .expect("audit");
        assert_eq!(cash, ["505.00", "-505.00"]);
        let mid: String = evening
            .scalar("select context->>'underlying_mid' from audit_log where action = 'position.expired' limit 1")
            .await;
        assert_eq!(mid, "70.05");

        // The feed shows each settlement with its cash effect.
        for (token, cash) in [(&long, "505.00"), (&short, "-505.00")] {
            let feed = evening.get("/api/trading/activities", token).await;
            let settled: Vec<&serde_json::Value> = feed.body["data"]
                .as_array()
                .map(|items| items.iter().filter(|a| a["type"] == "settlement").collect())
                .unwrap_or_default();
            assert_eq!(settled.len(), 1, "{}", feed.text);
            assert_eq!(settled[0]["cash_delta"], cash);
            assert_eq!(settled[0]["symbol"], NEAR);
            assert_eq!(settled[0]["price"], "5.05");
        }
    })
    .await;
}

/// No quote for the underlying: the position stays open, every pass retries and counts it,
/// and it settles once a quote arrives.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn without_an_underlying_quote_the_position_waits(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let long = long_call(morning, "long@example.com").await;
        let evening = morning.replica(after_the_close()).await;
        for _ in 0..2 {
            let done = sweep(&evening).await;
            assert_eq!((done.settled, done.awaiting_quote), (0, 1));
        }
        let held = evening.positions(&long).await;
        assert_eq!(position(&held, NEAR).expect("still open")["qty"], "1");
        assert_eq!(evening.audit_count("position.expired").await, 0);
        assert!(
            evening
                .metrics()
                .await
                .contains("raptor_option_expiry_awaiting_quote_total"),
            "counted"
        );

        evening.quote(XYZ, "66.00", "66.00").await;
        let done = sweep(&evening).await;
        assert_eq!((done.settled, done.awaiting_quote), (1, 0));
        let account = evening.account(&long).await.body;
        assert_eq!(account["cash"], "99975.00", "99875 + 100");
        assert_eq!(account["realized_pnl"], "-25.00");
        assert_eq!(evening.audit_count("position.expired").await, 1);
    })
    .await;
}

/// Several replicas' sweeps and a read race for one account: it settles once, one audit row.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn racing_passes_settle_once(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let long = long_call(morning, "long@example.com").await;
        morning.quote(XYZ, "70.00", "70.10").await;
        let a = morning.replica(after_the_close()).await;
        let b = morning.replica(after_the_close()).await;
        let c = morning.replica(after_the_close()).await;
        let (x, y, read) = tokio::join!(sweep(&a), sweep(&b), c.account(&long));
        assert_eq!(read.status, StatusCode::OK, "{}", read.text);
        assert!(x.settled + y.settled <= 1);
        assert_eq!(a.audit_count("position.expired").await, 1);
        let account = a.account(&long).await.body;
        assert_eq!(account["cash"], "100380.00", "paid once");
        assert_eq!(sweep(&b).await.settled, 0);
    })
    .await;
}

/// The long-call calendar on the near call's expiration day: rolling the short before the
/// close works; a short left to expire settles at the close, and the next short on the root
/// (covered by the same LEAPS) is not blocked by it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_calendar_rolls_on_expiry_day_and_after_an_expiry(pool: PgPool) {
    // 14:00 New York on 2026-12-18.
    TestApp::run(&pool, at(2026, 12, 18, 19, 0), async |expiry_day| {
        let rolled = covered_call(expiry_day, "rolled@example.com").await;
        let left = covered_call(expiry_day, "left@example.com").await;
        expiry_day.quote(NEXT, "1.30", "1.35").await;
        let roll = expiry_day
            .roll(
                &rolled,
                Uuid::new_v4(),
                NEAR,
                &json!({ "to_symbol": NEXT, "qty": "1" }),
            )
            .await;
        assert_eq!(roll.status, StatusCode::CREATED, "{}", roll.text);
        assert_eq!(roll.body["status"], "filled");
        expiry_day.quote(XYZ, "60.00", "61.00").await;

        // Monday morning: the left short expired worthless at Friday's close; the trader sells
        // the next month's call against the same LEAPS.
        let monday = expiry_day.replica(at(2026, 12, 21, 15, 0)).await;
        let next = Order::market(NEXT).sell_to_open().qty("1").json();
        let sold = monday.create_order(&left, Uuid::new_v4(), &next).await;
        assert_eq!(sold.status, StatusCode::CREATED, "{}", sold.text);
        assert_eq!(sold.body["status"], "filled");
        let held = monday.positions(&left).await;
        assert!(position(&held, NEAR).is_none(), "{held:?}");
        assert_eq!(position(&held, NEXT).expect("new short")["qty"], "-1");
        let account = monday.account(&left).await.body;
        assert_eq!(account["realized_pnl"], "120.00");
        assert_eq!(account["uncovered_short_options"], json!([]));
        assert_eq!(
            monday.audit_count("position.expired").await,
            1,
            "only the one left"
        );
    })
    .await;
}

/// A short call whose covering long is gone is reported on the account, not hidden.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_account_reports_uncovered_short_options(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let token = covered_call(app, "cc@example.com").await;
        assert_eq!(
            app.account(&token).await.body["uncovered_short_options"],
            json!([])
        );
        // The covering long leaves the book (as a long expiring before its short would).
        app.execute_where(
            "update paper_positions set qty = 0, open_expiry_date = null where symbol = $1",
            LEAPS,
        )
        .await;
        assert_eq!(
            app.account(&token).await.body["uncovered_short_options"],
            json!([NEAR])
        );
    })
    .await;
}

/// `raptor orders expire` (on the system clock) settles a position in a contract that expired
/// before today and says so.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_command_settles_expired_positions(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("cli@example.com").await;
        // Expired at the 13:00 early close of 2026-11-27, held since before.
        app.execute_where(
            "insert into paper_positions
                 (user_id, symbol, qty, avg_entry_price, expiry_date, open_expiry_date)
             values ($1, 'XYZ261127C00060000', 2, 1.50, occ_expiry_date('XYZ261127C00060000'),
                     occ_expiry_date('XYZ261127C00060000'))",
            user_id,
        )
        .await;
        app.quote(XYZ, "61.00", "61.00").await;
        let printed = crate::helpers::cli(&app.pool, &["orders", "expire"])
            .await
            .expect("orders expire");
        assert_eq!(
            printed,
            json!({ "expired": 0, "settled": 1, "awaiting_quote": 0 })
        );
        let account = app.account(&token).await.body;
        assert_eq!(account["cash"], "100200.00", "2 x 1.00 x 100");
        assert_eq!(account["realized_pnl"], "-100.00", "200 - 300");
        super::positions::assert_expiry_keys(app).await;
    })
    .await;
}

/// A settlement's price is the underlying's last quote at or before the expiration close,
/// whenever the settlement runs: the underlying at 70 at 15:00 New York settles the long 65
/// call at 5.00 (500.00), although the quote moved to 80 after the close and the settlement
/// ran the next morning, when the user touched the account (who could otherwise pick the
/// moment, and so the price, by choosing when to call the API).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn settlement_uses_the_last_quote_before_the_close(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |morning| {
        let long = long_call(morning, "late@example.com").await;
        let before_close = morning.replica(at(2026, 12, 18, 20, 0)).await;
        before_close.quote(XYZ, "69.90", "70.10").await;
        let after_close = morning.replica(at(2026, 12, 18, 21, 30)).await;
        after_close.quote(XYZ, "79.90", "80.10").await;

        let next_day = morning.replica(at(2026, 12, 19, 15, 0)).await;
        let account = next_day.account(&long).await.body;
        assert_eq!(
            account["cash"], "100375.00",
            "99875.00 + 5.00 x 100: {account}"
        );
        let settled: serde_json::Value = next_day
            .scalar("select context from audit_log where action = 'position.expired'")
            .await;
        assert_eq!(settled["settlement_price"], "5", "{settled}");
        assert_eq!(settled["underlying_mid"], "70", "{settled}");
    })
    .await;
}
