//! Error answers: RFC 9457 problem details with a stable `error` code, for malformed,
//! oversized, misrouted or mistyped requests; what the OpenAPI document forbids is refused, and
//! every operation documents the codes it can answer.

use axum::http::{Method, StatusCode};
use raptor_api::codes::ErrorCode;
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, read_http, Call, Options, Order, TestApp, PROBLEM_JSON};

/// Malformed JSON, a wrong media type, a wrong shape, a bad path parameter, an unknown route
/// and a wrong method are each a JSON 4xx with its own code, and nothing is written.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn bad_input_gets_json_4xx(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("bad@example.com").await;
        let orders = "/api/trading/orders";

        let malformed = app
            .send(
                Call::new(Method::POST, orders)
                    .token(&token)
                    .raw(b"{\"symbol\": ".to_vec(), Some("application/json")),
            )
            .await;
        assert_problem(&malformed, StatusCode::BAD_REQUEST, ErrorCode::InvalidJson);

        let wrong_type = app
            .send(
                Call::new(Method::POST, orders)
                    .token(&token)
                    .raw(b"symbol=AAPL".to_vec(), Some("text/plain")),
            )
            .await;
        assert_problem(
            &wrong_type,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::UnsupportedMediaType,
        );

        let wrong_shape = Order::market("AAPL").qty("x").json();
        let wrong_shape = app.create_order(&token, None, &wrong_shape).await;
        assert_problem(
            &wrong_shape,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidBody,
        );

        let bad_path = app.order(&token, "not-a-uuid").await;
        assert_problem(&bad_path, StatusCode::BAD_REQUEST, ErrorCode::InvalidPath);

        let quote_bad = app
            .send(
                Call::new(Method::PUT, "/api/admin/flags/FLAG_IDEMPOTENCY_MIDDLEWARE")
                    .token(&token)
                    .raw(b"[".to_vec(), Some("application/json")),
            )
            .await;
        assert!(quote_bad.status.is_client_error());
        assert!(quote_bad.body["error"].is_string());

        let unknown = app.get("/api/nope", &token).await;
        assert_problem(&unknown, StatusCode::NOT_FOUND, ErrorCode::NotFound);

        let wrong_method = app
            .send(Call::new(Method::PATCH, "/api/trading/account").token(&token))
            .await;
        assert_problem(
            &wrong_method,
            StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::MethodNotAllowed,
        );

        assert_eq!(app.order_count().await, 0);
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
    })
    .await;
}

/// A body over the limit is `413 payload_too_large`: in-process (no `Content-Length`) from the
/// extractor, over HTTP (with one) before any work.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn body_limit_is_413_json(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("big@example.com").await;
        let big = format!("{{\"label\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));

        // In-process (no Content-Length): the extractor's limit.
        let inproc = app
            .send(
                Call::new(Method::POST, "/probe/items")
                    .token(&token)
                    .key(Uuid::new_v4())
                    .raw(big.clone().into_bytes(), Some("application/json")),
            )
            .await;
        assert_problem(
            &inproc,
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
        );

        // Over HTTP with Content-Length: refused before any work.
        let server = app.spawn().await;
        let url = server.url("/api/trading/orders");
        let response = server
            .client
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("idempotency-key", Uuid::new_v4().to_string())
            .body(big)
            .send()
            .await
            .expect("send");
        let response = read_http(format!("POST {url}"), response).await;
        assert_problem(
            &response,
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::PayloadTooLarge,
        );
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
        server.stop().await;
    })
    .await;
}

/// Errors are RFC 9457 problem details (keeping `error`, `message` and the context members);
/// a 401 names its scheme; the `type` resolves to the code's section of `/docs/errors`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn errors_are_problem_details(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let unauthenticated = app.account("nope").await;
        assert_problem(
            &unauthenticated,
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthenticated,
        );
        assert_eq!(unauthenticated.header("www-authenticate"), Some("Bearer"));
        let body = &unauthenticated.body;
        assert_eq!(body["type"], "/docs/errors#unauthenticated");
        assert_eq!(body["title"], "Unauthorized");
        assert_eq!(body["status"], 401);
        assert_eq!(body["detail"], body["message"]);
        let request_id = unauthenticated.header("x-request-id").expect("request id");
        assert_eq!(body["instance"], format!("urn:request:{request_id}"));

        // The safety net (a 405 from the router) and an idempotency reply go through it too.
        let (_, token) = app.user("problems@example.com").await;
        let wrong_method = app
            .send(Call::new(Method::PATCH, "/api/trading/orders").token(&token))
            .await;
        assert_eq!(wrong_method.status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(wrong_method.body["type"], "/docs/errors#method_not_allowed");
        let bad_key = app
            .send(
                Call::new(Method::POST, "/api/trading/orders")
                    .token(&token)
                    .key("not-a-uuid")
                    .json(&json!({})),
            )
            .await;
        assert_eq!(bad_key.status, StatusCode::BAD_REQUEST);
        assert_eq!(bad_key.body["type"], "/docs/errors#idempotency_key_invalid");
        assert_eq!(bad_key.header("content-type"), Some(PROBLEM_JSON));

        // Health answers are not errors: /readyz keeps its own shape.
        let docs = app.get_public("/docs/errors").await;
        assert_eq!(docs.status, StatusCode::OK);
        assert!(
            docs.text.contains("id=\"unauthenticated\""),
            "the anchor exists"
        );
    })
    .await;
}

/// Every body must be a JSON object, on instrumented routes and plain ones alike (serde reads
/// a struct from an array such as `[]` or `[null]`), and whitespace alone is not JSON.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn bodies_must_be_json_objects(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, operator) = app.operator("ops@example.com").await;
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
                let call = Call::new(method.clone(), path)
                    .token(&operator)
                    .json(&body)
                    .maybe_key(key);
                let answer = app.send(call).await;
                assert_problem(
                    &answer,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidBody,
                );
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
        assert_problem(&blank, StatusCode::BAD_REQUEST, ErrorCode::InvalidJson);
        assert_eq!(app.count("select count(*) from quotes").await, 0);
        assert_eq!(app.audit_count("account.reset").await, 0);
    })
    .await;
}

/// The document types decimals as plain decimal strings and optional enums without `null`:
/// the server refuses what the document refuses, and takes `null` where it allows it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn decimals_are_strings_and_optional_enums_are_not_null(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, operator) = app.operator("ops@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        for quote in [
            json!({ "bid": 0, "ask": "1.25" }),
            json!({ "bid": "1e0", "ask": "1.25" }),
            json!({ "bid": ".5", "ask": "1.25" }),
        ] {
            let answer = app.put_quote(&operator, "MSFT", &quote).await;
            assert_problem(
                &answer,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidBody,
            );
        }
        let one_share = || Order::market("AAPL").buy().qty("1");
        for order in [
            one_share().set("qty", 1),
            one_share().set("side", Value::Null),
            one_share().set("time_in_force", Value::Null),
        ] {
            let answer = app
                .create_order(&operator, Uuid::new_v4(), &order.json())
                .await;
            assert_problem(
                &answer,
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidBody,
            );
        }
        assert_eq!(app.order_count().await, 0);
        // `null` is allowed where the document allows it: a close of everything.
        let bought = Order::market("AAPL").buy().qty("2").json();
        let bought = app.create_order(&operator, None, &bought).await;
        assert_eq!(bought.status, StatusCode::CREATED, "{}", bought.text);
        assert!(bought.body.get("position_intent").is_some());
        let closed = app
            .close_position(&operator, Uuid::new_v4(), "AAPL", &json!({ "qty": null }))
            .await;
        assert_eq!(closed.status, StatusCode::CREATED, "{}", closed.text);
        assert_eq!(closed.body["qty"], "2");
    })
    .await;
}

/// The list's query is typed: `status` is one of three words, `limit` is 1–500 (a request
/// the document forbids is refused, not clamped and answered 200).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn list_query_is_checked_against_its_bounds(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("list@example.com").await;
        for query in [
            "limit=0",
            "limit=501",
            "limit=-1",
            "status=",
            "status=OPEN",
            "limit=x",
        ] {
            let answer = app.list_orders(&token, query).await;
            assert_problem(&answer, StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery);
        }
        for query in [
            "limit=1",
            "limit=500",
            "status=open",
            "status=closed&limit=3",
        ] {
            let answer = app.list_orders(&token, query).await;
            assert_eq!(answer.status, StatusCode::OK, "{query}: {}", answer.text);
        }
    })
    .await;
}

/// `order_not_cancelable` reports the order's status as `order_status`, since the problem's
/// `status` member is the HTTP status.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn order_not_cancelable_keeps_the_order_status(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("cancel@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let filled = Order::market("AAPL").buy().qty("1").json();
        let filled = app.create_order(&token, None, &filled).await;
        assert_eq!(filled.body["status"], "filled", "{}", filled.text);
        let id = filled.body["id"].as_str().unwrap_or_default();
        let refused = app.cancel_order(&token, id).await;
        assert_problem(
            &refused,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::OrderNotCancelable,
        );
        assert_eq!(refused.body["order_status"], "filled");
        assert_eq!(refused.body["status"], 422);
    })
    .await;
}

/// Every error an operation can answer is in the document for that operation: the resources'
/// tables (`raptor_api::route_codes`) cover every operation, by operationId.
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
                raptor_api::route_codes().any(|(op, _)| op == id),
                "{route} ({id}) is in no resource's ROUTE_CODES"
            );
            let responses = operation["responses"].as_object().expect("responses");
            assert!(responses.contains_key("500"), "{route} lacks 500");
            for (status, response) in responses {
                let Some(problem) = response["content"].get("application/problem+json") else {
                    continue;
                };
                assert_eq!(
                    problem["schema"]["$ref"], "#/components/schemas/ErrorBody",
                    "{route} {status}: an error answers the shared problem schema"
                );
                let codes = response["x-error-codes"].as_array();
                assert!(
                    codes.is_some_and(|c| !c.is_empty()),
                    "{route} {status}: no x-error-codes"
                );
                let example = problem["example"]["error"].clone();
                assert!(
                    codes.is_some_and(|c| c.contains(&example)),
                    "{route} {status}: the example's code {example} is not listed"
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
    assert_eq!(operations, raptor_api::route_codes().count());
}
