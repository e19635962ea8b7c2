//! Findings of the schema fuzzer (`make fuzz-api`), each pinned by a test: requests the
//! OpenAPI document forbids are refused, and answers carry what the document says.

use axum::http::{Method, StatusCode};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{Call, Options, TestApp};

/// Serde reads a struct from a JSON array (`[]`, `[null]`): every body must be an object, on
/// instrumented routes and plain ones alike.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn bodies_must_be_json_objects(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, operator) = app
        .user_with_role("ops@example.com", raptor_api::auth::Role::Operator)
        .await;
    for (method, path, key) in [
        (
            Method::POST,
            "/api/trading/account/reset",
            Some(Uuid::new_v4()),
        ),
        (Method::POST, "/api/trading/account/reset", None),
        (Method::PATCH, "/api/account/profile", None),
        (Method::PUT, "/api/admin/quotes/AAPL", None),
    ] {
        for body in [json!([]), json!([null]), json!(["1.20", "1.25"])] {
            let mut call = Call::new(method.clone(), path).token(&operator).json(&body);
            if let Some(key) = key {
                call = call.key(key);
            }
            let answer = app.send(call).await;
            assert_eq!(
                answer.status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "{path} {body}: {}",
                answer.text
            );
            assert_eq!(answer.body["error"], "invalid_body", "{path}");
        }
    }
    // Whitespace alone is not an absent body (which reads as `{}`): it is not JSON.
    let blank = app
        .send(
            Call::new(Method::PATCH, "/api/account/profile")
                .token(&operator)
                .key(Uuid::new_v4())
                .raw("\r\n", Some("application/json")),
        )
        .await;
    assert_eq!(blank.status, StatusCode::BAD_REQUEST, "{}", blank.text);
    assert_eq!(blank.body["error"], "invalid_json");
    assert_eq!(app.count("select count(*) from quotes").await, 0);
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'account.reset'")
            .await,
        0
    );
    app.close().await;
}

/// The document types decimals as plain decimal strings and optional enums without `null`:
/// the server refuses what the document refuses.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn decimals_are_strings_and_optional_enums_are_not_null(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, operator) = app
        .user_with_role("ops@example.com", raptor_api::auth::Role::Operator)
        .await;
    app.quote("AAPL", "189.00", "190.00").await;
    for quote in [
        json!({ "bid": 0, "ask": "1.25" }),
        json!({ "bid": "1e0", "ask": "1.25" }),
        json!({ "bid": ".5", "ask": "1.25" }),
    ] {
        let answer = app
            .send(
                Call::new(Method::PUT, "/api/admin/quotes/MSFT")
                    .token(&operator)
                    .json(&quote),
            )
            .await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{quote}");
        assert_eq!(answer.body["error"], "invalid_body");
    }
    for order in [
        json!({ "symbol": "AAPL", "qty": 1, "side": "buy", "type": "market" }),
        json!({ "symbol": "AAPL", "qty": "1", "side": null, "type": "market" }),
        json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market", "time_in_force": null }),
    ] {
        let answer = app
            .post(
                "/api/trading/orders",
                &operator,
                Some(Uuid::new_v4()),
                &order,
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{order}: {}",
            answer.text
        );
        assert_eq!(answer.body["error"], "invalid_body");
    }
    assert_eq!(app.count("select count(*) from paper_orders").await, 0);
    // `null` is allowed where the document allows it: a close of everything.
    let bought = app
        .post(
            "/api/trading/orders",
            &operator,
            None,
            &json!({ "symbol": "AAPL", "qty": "2", "side": "buy", "type": "market" }),
        )
        .await;
    assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.text);
    assert!(bought.body.get("position_intent").is_some());
    let closed = app
        .post(
            "/api/trading/positions/AAPL/close",
            &operator,
            Some(Uuid::new_v4()),
            &json!({ "qty": null }),
        )
        .await;
    assert_eq!(closed.status, StatusCode::CREATED, "{}", closed.text);
    assert_eq!(closed.body["qty"], "2");
    app.close().await;
}

/// A malformed key is 400 even while the kill switch is off (the fuzzer flipped it and saw
/// malformed keys accepted).
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn malformed_key_is_refused_with_the_kill_switch_off(pool: PgPool) {
    let mut options = Options::default();
    options.idempotency.flag_default = false;
    let app = TestApp::with(&pool, options).await;
    let (_, token) = app.user("a@example.com").await;
    assert!(!app.state.idempotency.enabled().await);
    for key in ["", "0", "not-a-uuid"] {
        let answer = app
            .send(
                Call::new(Method::POST, "/api/trading/account/reset")
                    .token(&token)
                    .key(key)
                    .json(&json!({})),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{key:?}: {}",
            answer.text
        );
        assert_eq!(
            answer.body["error"],
            "Idempotency-Key must be a UUID string"
        );
    }
    app.close().await;
}

/// A NUL in a time zone reached Postgres (text cannot hold one) and answered 500.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn control_characters_in_a_time_zone_are_refused(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("tz@example.com").await;
    for zone in ["\u{0}Europe/Paris", "Europe/Paris\n", "Europe/\u{7f}Paris"] {
        let answer = app
            .send(
                Call::new(Method::PATCH, "/api/account/profile")
                    .token(&token)
                    .key(Uuid::new_v4())
                    .json(&json!({ "time_zone": zone })),
            )
            .await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{zone:?}: {}",
            answer.text
        );
        assert_eq!(answer.body["error"], "invalid_time_zone");
    }
    app.close().await;
}

/// The list's query is typed: `status` is one of three words, `limit` is 1–500 (it was
/// clamped, so a request the document forbids was answered 200).
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn list_query_is_checked_against_its_bounds(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("list@example.com").await;
    for query in [
        "limit=0",
        "limit=501",
        "limit=-1",
        "status=",
        "status=OPEN",
        "limit=x",
    ] {
        let answer = app
            .get(&format!("/api/trading/orders?{query}"), &token)
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            answer.text
        );
        assert_eq!(answer.body["error"], "invalid_query");
    }
    for query in [
        "limit=1",
        "limit=500",
        "status=open",
        "status=closed&limit=3",
    ] {
        let answer = app
            .get(&format!("/api/trading/orders?{query}"), &token)
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{query}: {}", answer.text);
    }
    app.close().await;
}

/// `order_not_cancelable` reports the order's status as `order_status`: the problem's
/// `status` member is the HTTP status and used to overwrite it.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn order_not_cancelable_keeps_the_order_status(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (_, token) = app.user("cancel@example.com").await;
    app.quote("AAPL", "189.00", "190.00").await;
    let filled = app
        .post(
            "/api/trading/orders",
            &token,
            None,
            &json!({ "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market" }),
        )
        .await;
    assert_eq!(filled.body["status"], "filled", "{}", filled.text);
    let id = filled.body["id"].as_str().unwrap_or_default();
    let refused = app
        .send(Call::new(Method::DELETE, format!("/api/trading/orders/{id}")).token(&token))
        .await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.body["error"], "order_not_cancelable");
    assert_eq!(refused.body["order_status"], "filled");
    assert_eq!(refused.body["status"], 422);
    app.close().await;
}

/// Every error an operation can answer is in the document for that operation: the resources'
/// tables (`raptor_api::codes::route_codes`) cover every operation, by operationId.
#[test]
fn every_operation_has_its_error_codes_in_the_document() {
    let spec: serde_json::Value =
        serde_json::from_str(&raptor_api::openapi::to_json(&raptor_api::openapi())).expect("json");
    let paths = spec["paths"].as_object().expect("paths");
    let mut operations = 0;
    for (path, item) in paths {
        for (method, operation) in item.as_object().expect("item") {
            operations += 1;
            let route = format!("{} {path}", method.to_uppercase());
            let id = operation["operationId"].as_str().expect("operationId");
            assert!(
                raptor_api::codes::route_codes().any(|(op, _)| op == id),
                "{route} ({id}) is in no resource's ROUTE_CODES"
            );
            let responses = operation["responses"].as_object().expect("responses");
            assert!(responses.contains_key("500"), "{route} lacks 500");
            for (status, response) in responses {
                let Some(problem) = response["content"].get("application/problem+json") else {
                    continue;
                };
                let codes = &problem["schema"]["allOf"][1]["properties"]["error"]["enum"];
                assert!(
                    codes.as_array().is_some_and(|c| !c.is_empty()),
                    "{route} {status}: no error enum"
                );
                assert_eq!(
                    problem["example"]["status"],
                    status.parse::<u16>().unwrap_or(0)
                );
            }
            if operation["security"][0].get("bearer").is_some() {
                assert!(responses.contains_key("401"), "{route} lacks 401");
            }
            if operation.get("requestBody").is_some()
                && route != "POST /api/billing/webhooks/stripe"
            {
                for status in ["413", "415"] {
                    assert!(responses.contains_key(status), "{route} lacks {status}");
                }
            }
        }
    }
    assert_eq!(operations, raptor_api::codes::route_codes().count());
}
