//! The single reads an app needs: one position, one quote, the account's marks.

use axum::http::StatusCode;
use raptor_api::codes::ErrorCode;
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, Options, Order, TestApp};

/// A held position reads as in the list; a symbol the account does not hold, one it closed
/// (flat) and another account's are `404 not_found`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn one_position_reads_by_symbol(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("position@example.com").await;
        let (_, stranger) = app.user("stranger@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        app.quote("MSFT", "409.90", "410.10").await;
        for symbol in ["AAPL", "MSFT"] {
            let buy = Order::market(symbol).buy().qty("2").json();
            let placed = app.create_order(&token, Uuid::new_v4(), &buy).await;
            assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
        }
        let one = app.get("/api/trading/positions/AAPL", &token).await;
        assert_eq!(one.status, StatusCode::OK, "{}", one.text);
        let listed = app.positions(&token).await;
        assert_eq!(
            Some(&one.body),
            listed.iter().find(|p| p["symbol"] == "AAPL")
        );
        assert_eq!(one.body["qty"], "2");
        assert_eq!(one.body["avg_entry_price"], "190.10");

        let closed = app
            .close_position(&token, Uuid::new_v4(), "MSFT", &json!({}))
            .await;
        assert_eq!(closed.status, StatusCode::CREATED, "{}", closed.text);
        for (path, who) in [
            ("/api/trading/positions/MSFT", &token),
            ("/api/trading/positions/NVDA", &token),
            ("/api/trading/positions/A%00B", &token),
            ("/api/trading/positions/AAPL", &stranger),
        ] {
            let missing = app.get(path, who).await;
            assert_problem(&missing, StatusCode::NOT_FOUND, ErrorCode::NotFound);
        }
    })
    .await;
}

/// Any signed-in caller reads a quote (bid, ask, when, its event number); a symbol without one
/// is `404 quote_unavailable`; without a token it is `401`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_quote_reads_for_any_signed_in_caller(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("quotes@example.com").await;
        app.quote("AAPL", "189.9", "190.10").await;
        let set = app.quote("AAPL", "190.00", "190.20").await;
        let quote = app.get("/api/trading/quotes/AAPL", &token).await;
        assert_eq!(quote.status, StatusCode::OK, "{}", quote.text);
        assert_eq!(quote.body["symbol"], "AAPL");
        assert_eq!(quote.body["bid"], "190.00");
        assert_eq!(quote.body["ask"], "190.20");
        assert_eq!(quote.body["sequence"], set["sequence"]);
        assert!(quote.body["updated_at"].is_string(), "{}", quote.text);

        for path in ["/api/trading/quotes/NVDA", "/api/trading/quotes/A%00B"] {
            let missing = app.get(path, &token).await;
            assert_problem(&missing, StatusCode::NOT_FOUND, ErrorCode::QuoteUnavailable);
        }
        let anonymous = app.get_public("/api/trading/quotes/AAPL").await;
        assert_problem(
            &anonymous,
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
        );
    })
    .await;
}

/// The account marks its positions at the quotes' mid (a long equity, a long option ×100, a
/// short option ×100 counting negative); `equity` is cash plus that value; a position whose
/// quote is gone is marked at its average entry price and named in `marked_at_cost`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_account_marks_positions_at_the_mid(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("marks@example.com").await;
        let flat = app.account(&token).await;
        for field in ["market_value", "unrealized_pnl"] {
            assert_eq!(flat.body[field], "0.00", "{}", flat.text);
        }
        assert_eq!(flat.body["equity"], flat.body["cash"]);
        assert_eq!(flat.body["marked_at_cost"], json!([]));

        app.quote("AAPL", "189.90", "190.10").await;
        app.quote("MSFT", "409.90", "410.10").await;
        for symbol in ["AAPL", "MSFT"] {
            let buy = Order::market(symbol).buy().qty("2").json();
            let placed = app.create_order(&token, Uuid::new_v4(), &buy).await;
            assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
        }
        // AAPL's mid moves to 195.00; MSFT's quote disappears.
        app.quote("AAPL", "194.90", "195.10").await;
        app.execute("delete from quotes where symbol = 'MSFT'")
            .await;

        let account = app.account(&token).await;
        assert_eq!(account.status, StatusCode::OK, "{}", account.text);
        // 2 × 195.00 + 2 × 410.10 (at cost).
        assert_eq!(account.body["market_value"], "1210.20", "{}", account.text);
        // 2 × (195.00 − 190.10); MSFT none.
        assert_eq!(account.body["unrealized_pnl"], "9.80");
        assert_eq!(account.body["marked_at_cost"], json!(["MSFT"]));
        let cash: f64 = account.body["cash"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .expect("cash");
        let equity: f64 = account.body["equity"]
            .as_str()
            .and_then(|c| c.parse().ok())
            .expect("equity");
        assert!(
            (equity - (cash + 1210.20)).abs() < 0.001,
            "{}",
            account.text
        );
    })
    .await;
}
