//! Position rows are updated in place. Every fill updates its position, so an update that
//! Postgres cannot make heap-only (HOT) writes a new row version and a new primary-key entry per
//! fill and leaves the old ones to vacuum: the table and its index grow with the orders, and each
//! order's position lookup walks the dead versions.

use std::time::{Duration, Instant};

use sqlx::{PgConnection, PgPool};
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

/// HOT updates of `paper_positions` so far in this session's transaction.
async fn hot_in_transaction(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar("select pg_stat_get_xact_tuples_hot_updated('paper_positions'::regclass)")
        .fetch_one(conn)
        .await
        .expect("transaction statistics")
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
        // The server's sessions report their counts when they go idle, within about a second.
        let deadline = Instant::now() + Duration::from_secs(30);
        let (updates, hot) = loop {
            let counts = position_updates(&pool).await;
            if counts.0 >= 5 || Instant::now() > deadline {
                break counts;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(updates, 5, "five fills updated the position");
        assert_eq!(hot, updates, "every update of the position was heap-only");
    })
    .await;
}

/// The expiry index's key, `open_expiry_date`, is the expiration date of an open option
/// position and NULL once it is closed (and for an equity): an option's fills that leave it open
/// update it in place; the fill that closes it changes the key, and the expiry pass no longer
/// finds it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_expiry_key_follows_an_option_position_open_and_closed(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, _) = app.user("expiry-key@example.com").await;
        let mut tx = pool.begin().await.expect("transaction");
        let key = "select open_expiry_date::text from paper_positions
                    where user_id = $1 and symbol = $2";
        let open_key = |symbol: &'static str| {
            sqlx::query_scalar::<_, Option<String>>(key)
                .bind(user_id)
                .bind(symbol)
        };
        sqlx::query(
            "insert into paper_positions (user_id, symbol, qty, avg_entry_price)
             values ($1, $2, 1, 1.25), ($1, 'AAPL', 10, 190.10)",
        )
        .bind(user_id)
        .bind(NEAR)
        .execute(&mut *tx)
        .await
        .expect("positions");
        let near = open_key(NEAR).fetch_one(&mut *tx).await.expect("near");
        assert_eq!(near.as_deref(), Some("2026-12-18"));
        let equity = open_key("AAPL").fetch_one(&mut *tx).await.expect("equity");
        assert_eq!(equity, None, "an equity has no expiry");

        let update = "update paper_positions set qty = $3, updated_at = now()
                       where user_id = $1 and symbol = $2";
        for (symbol, qty) in [(NEAR, 2), ("AAPL", 0), ("AAPL", 5)] {
            sqlx::query(update)
                .bind(user_id)
                .bind(symbol)
                .bind(qty)
                .execute(&mut *tx)
                .await
                .expect("update");
        }
        assert_eq!(
            hot_in_transaction(&mut tx).await,
            3,
            "an option that stays open and an equity, even closed and reopened, update in place"
        );

        sqlx::query(update)
            .bind(user_id)
            .bind(NEAR)
            .bind(0)
            .execute(&mut *tx)
            .await
            .expect("close");
        assert_eq!(
            hot_in_transaction(&mut tx).await,
            3,
            "closing the option changes the index's key"
        );
        let closed = open_key(NEAR).fetch_one(&mut *tx).await.expect("closed");
        assert_eq!(closed, None, "a closed option position has no open expiry");
        let due: i64 = sqlx::query_scalar(
            "select count(*) from paper_positions where user_id = $1 and open_expiry_date <= $2",
        )
        .bind(user_id)
        .bind(chrono::NaiveDate::from_ymd_opt(2027, 1, 1).expect("date"))
        .fetch_one(&mut *tx)
        .await
        .expect("due");
        assert_eq!(due, 0, "the expiry pass does not see a closed position");
    })
    .await;
}
