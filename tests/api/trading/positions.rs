//! Position rows are updated in place. Every fill updates its position, so an update that
//! Postgres cannot make heap-only (HOT) writes a new row version and a new primary-key entry per
//! fill and leaves the old ones to vacuum: the table and its index grow with the orders, and each
//! order's position lookup walks the dead versions.

use std::time::{Duration, Instant};

use sqlx::PgPool;
use uuid::Uuid;

use super::NEAR;
use crate::helpers::{Options, Order, TestApp};

/// `paper_positions`' (updates, HOT updates) as the statistics collector has them.
async fn position_updates(pool: &PgPool) -> (i64, i64) {
    sqlx::query_as(
        "select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables where relname = 'paper_positions'",
    )
    .fetch_one(pool)
    .await
    .expect("table statistics")
}

/// Waits until the statistics collector has at least `updates` updates of `paper_positions`
/// (the server's sessions report their counts when they go idle, within seconds), and returns
/// (updates, HOT updates).
async fn reported_position_updates(pool: &PgPool, updates: i64) -> (i64, i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let counts = position_updates(pool).await;
        if counts.0 >= updates || Instant::now() > deadline {
            return counts;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every position's `expiry_date` is its symbol's, and `open_expiry_date` (the expiry index's
/// key) is that date while the position is open and NULL once it is flat: the writers keep the
/// two dates, so this holds after whatever the test did.
pub(super) async fn assert_expiry_keys(app: &TestApp) {
    let wrong = app
        .count(
            "select count(*) from paper_positions
              where expiry_date is distinct from occ_expiry_date(symbol)
                 or open_expiry_date is distinct from
                    case when qty <> 0 then occ_expiry_date(symbol) end",
        )
        .await;
    assert_eq!(
        wrong, 0,
        "positions whose expiry dates do not match their symbol and qty"
    );
}

/// Six market buys of one symbol: the first creates the position, the other five update it,
/// each in place.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_fill_updates_its_position_in_place(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("hot@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let buy = Order::market("AAPL").buy().qty("1").json();
        for _ in 0..6 {
            let placed = app.create_order(&token, Uuid::new_v4(), &buy).await;
            assert_eq!(placed.body["status"], "filled", "{}", placed.text);
        }
        let (updates, hot) = reported_position_updates(&pool, 5).await;
        assert_eq!(updates, 5, "five fills updated the position");
        assert_eq!(hot, updates, "every update of the position was heap-only");
        assert_expiry_keys(app).await;
    })
    .await;
}

/// The expiry index's key, `open_expiry_date`, is the expiration date of an open option
/// position and NULL once it is closed: a fill that leaves the position open (here a resting
/// order's, filled by a quote update) updates it in place; the fill that closes it changes the
/// key, and the expiry pass no longer finds the position.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_expiry_key_follows_an_option_position_open_and_closed(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("expiry-key@example.com").await;
        let key = "select open_expiry_date::text from paper_positions where symbol = $1";
        app.quote(NEAR, "1.20", "1.25").await;
        let open = Order::market(NEAR).buy_to_open().qty("1").json();
        let placed = app.create_order(&token, Uuid::new_v4(), &open).await;
        assert_eq!(placed.body["status"], "filled", "{}", placed.text);
        let opened: Option<String> = app.scalar_where(key, NEAR).await;
        assert_eq!(opened.as_deref(), Some("2026-12-18"));

        let add = Order::limit(NEAR, "1.00")
            .buy_to_open()
            .qty("1")
            .gtc()
            .json();
        let resting = app.create_order(&token, Uuid::new_v4(), &add).await;
        assert_eq!(resting.body["status"], "new", "{}", resting.text);
        app.quote(NEAR, "0.90", "0.95").await;
        let added = app.order(&token, resting.id()).await;
        assert_eq!(added.body["status"], "filled", "{}", added.text);
        let still: Option<String> = app.scalar_where(key, NEAR).await;
        assert_eq!(still.as_deref(), Some("2026-12-18"));

        let close = Order::market(NEAR).sell_to_close().qty("2").json();
        let closed = app.create_order(&token, Uuid::new_v4(), &close).await;
        assert_eq!(closed.body["status"], "filled", "{}", closed.text);
        let flat: Option<String> = app.scalar_where(key, NEAR).await;
        assert_eq!(flat, None, "a closed position has no open expiry");
        assert_expiry_keys(app).await;

        let (updates, hot) = reported_position_updates(&pool, 2).await;
        assert_eq!(
            (updates, hot),
            (2, 1),
            "the resting fill updated the open position in place; the close changed the key"
        );
        let due: bool = sqlx::query_scalar(
            "select exists (select 1 from paper_positions
                             where user_id = $1 and open_expiry_date <= $2)",
        )
        .bind(user_id)
        .bind(chrono::NaiveDate::from_ymd_opt(2027, 1, 1).expect("date"))
        .fetch_one(&pool)
        .await
        .expect("due");
        assert!(!due, "the expiry pass does not see a closed position");
    })
    .await;
}
