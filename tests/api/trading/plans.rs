//! Statements of the order path are planned once per session. Postgres keeps the generic plan
//! of a prepared statement only when it costs no more than the custom plans it made first;
//! otherwise it plans the statement again at every execution, work that every order pays.

use serde_json::Value;
use sqlx::types::Json;
use sqlx::{PgPool, Row};

use crate::helpers::{Options, TestApp};

/// How often the session planned `statement`: (generic plans, custom plans).
async fn plans(conn: &mut sqlx::PgConnection, statement: &str) -> (i64, i64) {
    sqlx::query_as(
        "select generic_plans, custom_plans from pg_prepared_statements where statement = $1",
    )
    .bind(statement)
    .fetch_one(conn)
    .await
    .expect("the statement is prepared in this session")
}

/// The account lock of a simple order (one quote) switches to its generic plan after the five
/// custom plans Postgres tries first, and still share-locks and reads just that quote; the
/// multi-leg form reads every quote it names, in symbol order.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_account_lock_of_a_simple_order_is_planned_once(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, _) = app.user("plans@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        app.quote("MSFT", "410.00", "410.20").await;
        let mut conn = pool.acquire().await.expect("connection");

        let simple = raptor_api::trading::lock_account_and_quotes_statement(1);
        for _ in 0..10 {
            let row = sqlx::query(&simple)
                .bind(user_id)
                .bind(vec!["AAPL".to_owned()])
                .fetch_one(&mut *conn)
                .await
                .expect("lock account and quote");
            let Json(quotes): Json<Value> = row.get("quotes");
            assert_eq!(quotes.as_array().map(Vec::len), Some(1), "{quotes}");
            assert_eq!(quotes[0]["symbol"], "AAPL");
            assert_eq!(quotes[0]["ask"], "190.100000");
        }
        let (generic, custom) = plans(&mut conn, &simple).await;
        assert_eq!(
            (generic, custom),
            (5, 5),
            "ten executions: five custom plans, then the generic one"
        );

        let spread = raptor_api::trading::lock_account_and_quotes_statement(2);
        let row = sqlx::query(&spread)
            .bind(user_id)
            .bind(vec!["MSFT".to_owned(), "AAPL".to_owned()])
            .fetch_one(&mut *conn)
            .await
            .expect("lock account and quotes");
        let Json(quotes): Json<Value> = row.get("quotes");
        let symbols: Vec<&str> = quotes
            .as_array()
            .expect("an array")
            .iter()
            .filter_map(|q| q["symbol"].as_str())
            .collect();
        assert_eq!(symbols, ["AAPL", "MSFT"]);
    })
    .await;
}
