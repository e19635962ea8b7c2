//! The document's examples against a real server: every request example, sent as the document
//! gives it (its path parameters' examples, its body example), is answered with a 2xx, and every
//! answer has the members of the operation's success example.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::http::{Method, StatusCode};
use raptor_api::openapi::examples::{self, REQUEST_ORDER};
use raptor_api::{ApiConfig, BillingConfig};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::fake_stripe::{FakeStripe, SECRET_KEY};
use crate::helpers::{test_now, Call, Options, Order, TestApp, TestResponse};

const WEBHOOK_SECRET: &str = "whsec_test_examples";

/// One operation of the document, as the test calls it.
struct Operation {
    method: Method,
    path: String,
    keyed: bool,
    public: bool,
    operator: bool,
    body: Option<Value>,
    example: Option<Value>,
}

fn operations(spec: &Value) -> BTreeMap<String, Operation> {
    let mut all = BTreeMap::new();
    for (template, item) in spec["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            let mut path = template.clone();
            let parameters = op["parameters"].as_array().cloned().unwrap_or_default();
            for parameter in &parameters {
                if parameter["in"] == "path" {
                    let name = parameter["name"].as_str().expect("name");
                    let value = parameter["example"].as_str().unwrap_or_else(|| {
                        panic!("{template}: path parameter {name} has no example")
                    });
                    path = path.replace(&format!("{{{name}}}"), value);
                }
            }
            let success = op["responses"]
                .as_object()
                .and_then(|r| r.iter().find(|(status, _)| status.starts_with('2')))
                .map(|(_, response)| response.clone())
                .unwrap_or_default();
            let example = success["content"]
                .as_object()
                .and_then(|c| c.values().next())
                .map(|c| c["example"].clone());
            all.insert(
                op["operationId"].as_str().expect("operationId").to_owned(),
                Operation {
                    method: method.to_uppercase().parse().expect("method"),
                    path,
                    keyed: parameters.iter().any(|p| p["name"] == "Idempotency-Key"),
                    public: op["security"] == json!([]),
                    operator: op["tags"][0] == "admin"
                        || op["operationId"] == "sync_subscription_mirror",
                    body: op["requestBody"]["content"]["application/json"]
                        .get("example")
                        .cloned(),
                    example,
                },
            );
        }
    }
    all
}

/// The members of an answer (of its first item, for a list), without the replay marker.
fn members(value: &Value) -> BTreeSet<String> {
    let object = match value {
        Value::Array(items) => items.first().cloned().unwrap_or_default(),
        other => other.clone(),
    };
    object
        .as_object()
        .map(|o| {
            o.keys()
                .filter(|k| *k != "idempotency_replayed")
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

struct Run<'a> {
    app: &'a TestApp,
    operations: BTreeMap<String, Operation>,
    user: String,
    operator: String,
    done: BTreeSet<String>,
    mismatches: Vec<String>,
}

impl Run<'_> {
    /// Calls `id` as the document describes it (`path` instead of its path when given) and
    /// checks the answer against the success example.
    async fn call(&mut self, id: &str, path: Option<String>) -> TestResponse {
        let op = self
            .operations
            .get(id)
            .unwrap_or_else(|| panic!("no operation {id}"));
        let mut call = Call::new(op.method.clone(), path.unwrap_or_else(|| op.path.clone()));
        if !op.public {
            call = call.token(if op.operator {
                &self.operator
            } else {
                &self.user
            });
        }
        if op.keyed {
            call = call.key(Uuid::new_v4());
        }
        if let Some(body) = &op.body {
            let bytes = serde_json::to_vec(body).expect("json");
            if id == "receive_stripe_webhook" {
                let signature = raptor_api::billing::signature_header(
                    WEBHOOK_SECRET,
                    test_now().timestamp(),
                    &bytes,
                );
                call = call.header("stripe-signature", &signature);
            }
            call = call.raw(bytes, Some("application/json"));
        }
        let response = self.app.send(call).await;
        assert!(
            response.status.is_success(),
            "{id}: the document's example is refused: {} {}",
            response.status,
            response.text
        );
        let example = op.example.clone().unwrap_or_default();
        if response.status != StatusCode::NO_CONTENT
            && !example.is_string()
            && members(&example) != members(&response.body)
        {
            self.mismatches.push(format!(
                "{id}: example members {:?}, answer {}",
                members(&example),
                serde_json::to_string_pretty(&response.body).unwrap_or_default()
            ));
        }
        self.done.insert(id.to_owned());
        response
    }
}

/// Every request example of the document, sent in `examples::REQUEST_ORDER` to one server
/// (with a fake Stripe), is accepted (2xx); then every read (and the cancel, the erasure and the
/// logout) is called too, and every answer has the members its example shows. No operation of
/// the document is left out.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn every_example_is_accepted_and_answered_as_documented(pool: PgPool) {
    let fake = FakeStripe::start().await;
    let options = Options {
        api: ApiConfig {
            billing: BillingConfig {
                api_base: fake.base(),
                secret_key: Some(SECRET_KEY.into()),
                webhook_secret: Some(WEBHOOK_SECRET.into()),
                timeout: Duration::from_secs(5),
                ..BillingConfig::default()
            },
            ..ApiConfig::default()
        },
        ..Options::default()
    };
    let spec: Value =
        serde_json::from_str(&raptor_api::openapi::to_json(&raptor_api::openapi())).expect("json");
    let operations = operations(&spec);
    let with_body: BTreeSet<&str> = operations
        .iter()
        .filter(|(_, op)| op.body.is_some())
        .map(|(id, _)| id.as_str())
        .collect();
    assert_eq!(
        with_body,
        REQUEST_ORDER.iter().copied().collect(),
        "REQUEST_ORDER lists every operation with a request example"
    );
    TestApp::run(&pool, options, async |app| {
        let (_, operator) = app.operator("operator@example.com").await;
        let mut run = Run {
            app,
            operations,
            user: String::new(),
            operator,
            done: BTreeSet::new(),
            mismatches: Vec::new(),
        };
        // The link the sign-up example verifies, as the register step would have mailed it.
        sqlx::query(
            "insert into auth_link_tokens (token_hash, purpose, email, expires_at)
             values ($1, 'register', $2, now() + interval '1 hour')",
        )
        .bind(raptor_api::auth::hash_token(examples::LINK_TOKEN))
        .bind(examples::EMAIL)
        .execute(&app.pool)
        .await
        .expect("link");
        for id in REQUEST_ORDER {
            match *id {
                "roll_position" => {
                    // A covered short call to roll, its new contract and the cover quoted.
                    app.quote("XYZ", "69.90", "70.10").await;
                    app.quote(examples::LEAPS, "21.00", "21.40").await;
                    app.quote(examples::ROLL_FROM, "1.20", "1.25").await;
                    app.quote(examples::ROLL_TO, "2.10", "2.20").await;
                    for order in [
                        Order::market(examples::LEAPS).buy_to_open().qty("1").json(),
                        Order::market(examples::ROLL_FROM)
                            .sell_to_open()
                            .qty("1")
                            .json(),
                    ] {
                        let placed = app.create_order(&run.user, Uuid::new_v4(), &order).await;
                        assert_eq!(placed.status, StatusCode::CREATED, "{}", placed.text);
                    }
                }
                "create_checkout_session" => {
                    sqlx::query(
                        "insert into billing_customers (user_id, stripe_customer_id)
                         select id, $2 from users where email = $1",
                    )
                    .bind(examples::EMAIL)
                    .bind(examples::CUSTOMER_ID)
                    .execute(&app.pool)
                    .await
                    .expect("customer");
                }
                "cancel_subscription" => fake.add_subscription(
                    examples::SUBSCRIPTION_ID,
                    examples::CUSTOMER_ID,
                    examples::PRICE_ID,
                    1_798_761_600,
                ),
                "reset_account" => reads(&mut run).await,
                _ => {}
            }
            let response = run.call(id, None).await;
            if *id == "verify_link" {
                run.user = response.body["token"].as_str().expect("token").to_owned();
            }
        }
        // The erasure and the logout, by a user of their own.
        let (_, leaving) = app.user("leaving@example.com").await;
        run.user = leaving;
        run.call("erase_account", None).await;
        run.user = run.operator.clone();
        run.call("logout", None).await;

        let left: Vec<&String> = run
            .operations
            .keys()
            .filter(|id| !run.done.contains(*id))
            .collect();
        assert!(left.is_empty(), "operations not exercised: {left:?}");
        assert!(run.mismatches.is_empty(), "{}", run.mismatches.join("\n\n"));
    })
    .await;
}

/// The reads, while the account holds positions, orders and a subscription; the cancel of a
/// resting order. `{id}` is an order of the account (the document's example id is nobody's).
async fn reads(run: &mut Run<'_>) {
    let resting = run
        .app
        .create_order(
            &run.user,
            Uuid::new_v4(),
            &Order::limit("AAPL", "150.00").buy().qty("1").gtc().json(),
        )
        .await;
    assert_eq!(resting.status, StatusCode::CREATED, "{}", resting.text);
    let id = resting.id();
    let ids: Vec<String> = run
        .operations
        .iter()
        .filter(|(_, op)| op.method == Method::GET)
        .map(|(id, _)| id.clone())
        .collect();
    // The audit trail read is of the account's own user.
    let user_id: i32 = run
        .app
        .scalar_where("select id from users where email = $1", examples::EMAIL)
        .await;
    for op in ids {
        if op == "stream_trade_updates" {
            stream_opens(run).await;
            continue;
        }
        let path = run.operations[&op].path.clone();
        let path = if op == "list_audit" {
            Some(format!("{path}?user_id={user_id}"))
        } else {
            path.contains("/orders/0")
                .then(|| format!("/api/trading/orders/{id}"))
        };
        run.call(&op, path).await;
    }
    run.call("cancel_order", Some(format!("/api/trading/orders/{id}")))
        .await;
}

/// The stream never ends, so it is only opened: `200`, `text/event-stream` (its events are
/// checked in `trading::stream`).
async fn stream_opens(run: &mut Run<'_>) {
    let request = axum::http::Request::get("/api/trading/stream")
        .header("authorization", format!("Bearer {}", run.user))
        .body(axum::body::Body::empty())
        .expect("request");
    let response = tower::ServiceExt::oneshot(run.app.router.clone(), request)
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "{:?}",
        response.headers()
    );
    run.done.insert("stream_trade_updates".to_owned());
}
