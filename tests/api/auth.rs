//! Principals: bearer tokens (stored as hashes, expiring), and what each role may do.

use axum::http::{Method, StatusCode};
use raptor_api::codes::ErrorCode;
use serde_json::json;
use sqlx::PgPool;

use crate::helpers::{assert_problem, Call, Options, TestApp};

/// A missing, unknown, wrongly presented or expired token is 401; a valid one reads the
/// account; only the token's hash is stored.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn authentication(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("auth@example.com").await;

        let missing = app.get_public("/api/trading/account").await;
        assert_problem(
            &missing,
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
        );

        let unknown = app.account("rpt_0000").await;
        assert_problem(
            &unknown,
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
        );

        let wrong_scheme = app
            .send(
                Call::new(Method::GET, "/api/trading/account")
                    .header("authorization", &format!("Basic {token}")),
            )
            .await;
        assert_eq!(wrong_scheme.status, StatusCode::UNAUTHORIZED);

        let ok = app.account(&token).await;
        assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
        assert_eq!(ok.body["cash"], "100000.00");
        assert_eq!(ok.body["buying_power"], "100000.00");
        assert_eq!(ok.body["realized_pnl"], "0.00");
        assert_eq!(ok.body["mode"], "paper");

        app.execute_where(
            "update api_tokens set expires_at = now() - interval '1 second' where user_id = $1",
            user_id,
        )
        .await;
        let expired = app.account(&token).await;
        assert_eq!(expired.status, StatusCode::UNAUTHORIZED);

        // Only the hash is stored.
        let stored = app
            .count_where(
                "select count(*) from api_tokens where token_hash = $1",
                token.as_bytes(),
            )
            .await;
        assert_eq!(stored, 0);
    })
    .await;
}

/// Quotes are set by operators only (not users, not services); a service principal has no
/// account.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn roles(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, user) = app.user("user@example.com").await;
        let (_, operator) = app.operator("op@example.com").await;
        let service = app.service_token("svc").await;
        let quote = json!({ "bid": "1.00", "ask": "1.10" });

        let by_user = app.put_quote(&user, "AAPL", &quote).await;
        assert_problem(&by_user, StatusCode::FORBIDDEN, ErrorCode::Forbidden);
        let by_service = app.put_quote(&service, "AAPL", &quote).await;
        assert_eq!(by_service.status, StatusCode::FORBIDDEN);
        let by_operator = app.put_quote(&operator, "AAPL", &quote).await;
        assert_eq!(by_operator.status, StatusCode::OK, "{}", by_operator.text);
        assert_eq!(by_operator.body["bid"], "1.00");

        // A service principal has no account.
        let service_account = app.account(&service).await;
        assert_eq!(service_account.status, StatusCode::FORBIDDEN);
    })
    .await;
}
