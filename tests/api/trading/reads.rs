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

        let missing = app.get("/api/trading/quotes/NVDA", &token).await;
        assert_problem(&missing, StatusCode::NOT_FOUND, ErrorCode::QuoteUnavailable);
        let anonymous = app.get_public("/api/trading/quotes/AAPL").await;
        assert_problem(
            &anonymous,
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
        );
    })
    .await;
}
