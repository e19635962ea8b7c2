//! Billing through HTTP against a fake Stripe: Tier 2 idempotency of the
//! Stripe-calling routes, the forwarded Idempotency-Key, error mapping, the webhook's signature
//! and dedup, cancellation and mirror-sync.

use raptor_api::codes::ErrorCode;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use raptor_api::{ApiConfig, BillingConfig};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::fake_stripe::{FakeStripe, Mode, SECRET_KEY};
use crate::helpers::{
    assert_problem, count, post_http, send, test_now, Call, Options, Order, TestApp, TestResponse,
};

const WEBHOOK_SECRET: &str = "whsec_test_fake";
const CHECKOUT: &str = "/api/billing/checkout-sessions";
const PORTAL: &str = "/api/billing/portal-sessions";
const CANCEL: &str = "/api/billing/subscription/cancel";
const SYNC: &str = "/api/billing/mirror-sync";
const WEBHOOK: &str = "/api/billing/webhooks/stripe";

fn billing(fake: &FakeStripe, timeout: Duration) -> Options {
    Options {
        api: ApiConfig {
            billing: BillingConfig {
                api_base: fake.base(),
                secret_key: Some(SECRET_KEY.into()),
                webhook_secret: Some(WEBHOOK_SECRET.into()),
                timeout,
                ..BillingConfig::default()
            },
            ..ApiConfig::default()
        },
        ..Options::default()
    }
}

/// Runs `body` with an app whose billing talks to a fresh fake Stripe (5 s timeout).
async fn run_with_fake(pool: &PgPool, body: impl AsyncFnOnce(&TestApp, &FakeStripe)) {
    let fake = FakeStripe::start().await;
    let options = billing(&fake, Duration::from_secs(5));
    TestApp::run(pool, options, async |app| body(app, &fake).await).await;
}

fn checkout_body() -> Value {
    json!({
        "price_id": "price_premium_monthly",
        "success_url": "https://app.example.com/billing/success",
        "cancel_url": "https://app.example.com/billing",
    })
}

fn forwarded_keys(fake: &FakeStripe, path: &str) -> Vec<String> {
    fake.requests_to(path)
        .into_iter()
        .map(|r| {
            r.idempotency_key
                .expect("every Stripe call carries an Idempotency-Key")
        })
        .collect()
}

fn subscription_event(id: &str, kind: &str, created: i64, status: &str, cancel: bool) -> Value {
    json!({
        "id": id, "object": "event", "type": kind, "created": created, "livemode": false,
        "data": { "object": {
            "id": "sub_hook1", "object": "subscription", "customer": "cus_hook1",
            "status": status, "cancel_at_period_end": cancel, "canceled_at": null,
            "items": { "object": "list", "data": [
                { "price": { "id": "price_premium_monthly" }, "current_period_end": created + 2_592_000 }
            ]},
        }},
    })
}

async fn deliver(app: &TestApp, event: &Value, timestamp: i64) -> TestResponse {
    let body = serde_json::to_vec(event).expect("json");
    let signature = raptor_api::billing::signature_header(WEBHOOK_SECRET, timestamp, &body);
    app.send(
        Call::new(Method::POST, WEBHOOK)
            .header("stripe-signature", &signature)
            .raw(body, Some("application/json")),
    )
    .await
}

/// A running (renewing) subscription of `user_id`, in the mirror only.
async fn active_subscription(app: &TestApp, user_id: i32, subscription: &str, customer: &str) {
    sqlx::query(
        "insert into billing_subscriptions
            (stripe_subscription_id, stripe_customer_id, user_id, status, source_at)
         values ($2, $3, $1, 'active', now())",
    )
    .bind(user_id)
    .bind(subscription)
    .bind(customer)
    .execute(&app.pool)
    .await
    .expect("mirror row");
}

async fn link_customer(app: &TestApp, user_id: i32, customer: &str) {
    sqlx::query("insert into billing_customers (user_id, stripe_customer_id) values ($1, $2)")
        .bind(user_id)
        .bind(customer)
        .execute(&app.pool)
        .await
        .expect("customer");
}

/// 16 concurrent duplicate checkouts: one execution, one Stripe checkout call, replays return the
/// same session; the forwarded key is derived, stable per key, distinct per operation and per
/// client key.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn concurrent_checkouts_execute_once_and_replay(pool: PgPool) {
    run_with_fake(&pool, async |app, fake| {
        let (user_id, token) = app.user("buyer@example.com").await;
        let server = app.spawn().await;
        let key = Uuid::new_v4();
        let mut set = JoinSet::new();
        for _ in 0..16 {
            set.spawn(post_http(
                server.client.clone(),
                server.url(CHECKOUT),
                token.clone(),
                Some(key),
                checkout_body(),
            ));
        }
        let mut sessions = HashSet::new();
        while let Some(response) = set.join_next().await {
            let response = response.expect("join");
            match response.status {
                StatusCode::CREATED => {
                    sessions.insert(response.body["id"].as_str().expect("id").to_owned());
                }
                StatusCode::CONFLICT => {
                    assert_problem(
                        &response,
                        StatusCode::CONFLICT,
                        ErrorCode::IdempotencyInFlight,
                    );
                }
                other => panic!("unexpected {other}: {}", response.text),
            }
        }
        assert_eq!(sessions.len(), 1, "one session id across all 201s");
        let session_id = sessions.into_iter().next().expect("session");
        assert!(session_id.starts_with("cs_test_"));

        let checkout_calls = fake.requests_to("/v1/checkout/sessions");
        assert_eq!(checkout_calls.len(), 1, "Stripe saw one checkout call");
        assert_eq!(fake.requests_to("/v1/customers").len(), 1);
        let call = &checkout_calls[0];
        assert_eq!(call.authorization.as_deref(), Some("Bearer sk_test_fake"));
        // Every call names the API version it was written for.
        for call in fake.requests() {
            assert_eq!(
                call.stripe_version.as_deref(),
                Some(raptor_api::billing::STRIPE_API_VERSION),
                "{}",
                call.path
            );
        }
        assert_eq!(call.field("mode"), Some("subscription"));
        assert_eq!(
            call.field("line_items[0][price]"),
            Some("price_premium_monthly")
        );
        assert_eq!(call.field("line_items[0][quantity]"), Some("1"));
        assert_eq!(
            call.field("client_reference_id"),
            Some(user_id.to_string().as_str())
        );
        assert!(call
            .field("customer")
            .is_some_and(|c| c.starts_with("cus_")));
        assert_eq!(
            fake.requests_to("/v1/customers")[0].field("metadata[user_id]"),
            Some(user_id.to_string().as_str())
        );

        // The forwarded keys: not the client's key, one per operation.
        let customer_key = forwarded_keys(fake, "/v1/customers").remove(0);
        let checkout_key = forwarded_keys(fake, "/v1/checkout/sessions").remove(0);
        assert_ne!(checkout_key, key.to_string());
        assert_ne!(customer_key, key.to_string());
        assert_ne!(customer_key, checkout_key);

        // A later replay: same session, marked, no new Stripe call.
        let replay = server.post(CHECKOUT, &token, key, &checkout_body()).await;
        assert_eq!(replay.status, StatusCode::CREATED, "{}", replay.text);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body["id"], session_id.as_str());
        assert_eq!(fake.requests_to("/v1/checkout/sessions").len(), 1);
        assert_eq!(app.audit_count("billing.checkout_session.created").await, 1);
        assert_eq!(app.audit_count("billing.customer.created").await, 1);
        assert_eq!(app.count("select count(*) from billing_customers").await, 1);

        // Another client key: a new session under a new derived key; the customer is reused.
        let other = server
            .post(CHECKOUT, &token, Uuid::new_v4(), &checkout_body())
            .await;
        assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
        assert_eq!(other.header("idempotent-replayed"), Some("false"));
        assert_ne!(other.body["id"], session_id.as_str());
        let keys = forwarded_keys(fake, "/v1/checkout/sessions");
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
        assert_eq!(fake.requests_to("/v1/customers").len(), 1);
        server.stop().await;
    })
    .await;
}

/// Stripe rate-limits: 503 with Retry-After, nothing committed, the key released;
/// the retry with the same key executes and forwards the same derived keys, so Stripe replays
/// the customer it already created instead of creating a second one.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn retry_after_release_forwards_the_same_keys(pool: PgPool) {
    run_with_fake(&pool, async |app, fake| {
        let (_, token) = app.user("limited@example.com").await;
        fake.set_mode(
            "/v1/checkout/sessions",
            Mode::Fail {
                status: 429,
                body: json!({
                    "error": { "type": "rate_limit_error", "message": "Too many requests" }
                }),
                times: 1,
            },
        );
        let key = Uuid::new_v4();
        let limited = app.post(CHECKOUT, &token, key, &checkout_body()).await;
        assert_problem(
            &limited,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StripeUnavailable,
        );
        assert_eq!(limited.header("retry-after"), Some("2"));
        assert_eq!(app.count("select count(*) from billing_customers").await, 0);
        assert_eq!(app.audit_count("billing.customer.created").await, 0);
        assert_eq!(app.key_status(key).await.as_deref(), Some("released"));

        let retry = app.post(CHECKOUT, &token, key, &checkout_body()).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        let customer_keys = forwarded_keys(fake, "/v1/customers");
        assert_eq!(customer_keys.len(), 2);
        assert_eq!(customer_keys[0], customer_keys[1], "same lineage, same key");
        let checkout_keys = forwarded_keys(fake, "/v1/checkout/sessions");
        assert_eq!(checkout_keys.len(), 2);
        assert_eq!(checkout_keys[0], checkout_keys[1]);
        // Stripe replayed the first customer: one customer id, recorded once.
        let customer: String = app
            .scalar("select stripe_customer_id from billing_customers")
            .await;
        assert_eq!(customer, "cus_fake0001");
        assert_eq!(app.key_status(key).await.as_deref(), Some("completed"));
    })
    .await;
}

/// The idempotency store is unreachable: Tier 2 fails open, executes, and counts it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn store_unreachable_fails_open(pool: PgPool) {
    let fake = FakeStripe::start().await;
    let options = Options {
        unreachable_store: true,
        ..billing(&fake, Duration::from_secs(5))
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("open@example.com").await;
        let key = Uuid::new_v4();
        let response = app.post(CHECKOUT, &token, key, &checkout_body()).await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        assert!(response.body["url"].as_str().is_some());
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
        assert_eq!(app.count("select count(*) from billing_customers").await, 1);
        // Untracked, but the forwarded key is derived from the client's key (never the
        // key itself): the client's retry while the store is still down sends Stripe the
        // same key, and Stripe replays the session instead of making a second one.
        let retry = app.post(CHECKOUT, &token, key, &checkout_body()).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(retry.body["id"], response.body["id"], "the same session");
        let forwarded = forwarded_keys(&fake, "/v1/checkout/sessions");
        assert_eq!(forwarded.len(), 2);
        assert_eq!(forwarded[0], forwarded[1]);
        assert_ne!(forwarded[0], key.to_string());
        assert_eq!(fake.created("/v1/checkout/sessions"), 1);
        // Without a client key there is no retry identity: a fresh random key each time.
        let keyless = app.post(CHECKOUT, &token, None, &checkout_body()).await;
        assert_eq!(keyless.status, StatusCode::CREATED, "{}", keyless.text);
        let forwarded = forwarded_keys(&fake, "/v1/checkout/sessions");
        assert_ne!(forwarded[2], forwarded[0]);

        let metrics = app.metrics().await;
        let needle = format!("endpoint=\"POST {CHECKOUT}\",outcome=\"fail_open\"");
        assert!(
            metrics.contains(&needle),
            "{needle} missing from:\n{metrics}"
        );
    })
    .await;
}

/// Stripe stalls past its timeout: 504 well within the request timeout, nothing
/// committed here. Stripe went on and created the session, so the outcome is unknown: the key
/// is released (not failed), and the client's retry with the same key forwards the same
/// Stripe key, so Stripe replays the session it made instead of making a second one.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn stripe_timeout_is_504_and_the_retry_is_deduplicated_at_stripe(pool: PgPool) {
    let fake = FakeStripe::start().await;
    let options = billing(&fake, Duration::from_millis(300));
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("slow@example.com").await;
        fake.set_mode(
            "/v1/checkout/sessions",
            Mode::Stall(Duration::from_millis(800)),
        );
        let key = Uuid::new_v4();
        let timed_out = [
            ("operation", "create_checkout_session"),
            ("outcome", "timeout"),
        ];
        let stripe_calls = "raptor_stripe_request_duration_seconds_count";
        let before = count(&app.metrics().await, stripe_calls, &timed_out);
        let started = Instant::now();
        let response = app.post(CHECKOUT, &token, key, &checkout_body()).await;
        let took = started.elapsed();
        // Counted by operation and outcome (other tests of this process may add theirs).
        let metrics = app.metrics().await;
        assert!(
            count(&metrics, stripe_calls, &timed_out) >= before + 1.0,
            "{metrics}"
        );
        assert!(
            count(
                &metrics,
                stripe_calls,
                &[("operation", "create_customer"), ("outcome", "ok")]
            ) >= 1.0
        );
        assert_problem(
            &response,
            StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::StripeTimeout,
        );
        assert!(took < Duration::from_secs(2), "answered after {took:?}");
        // The customer was created at Stripe and inserted in our transaction: rolled back.
        assert_eq!(fake.requests_to("/v1/customers").len(), 1);
        assert_eq!(app.count("select count(*) from billing_customers").await, 0);
        assert_eq!(
            app.count("select count(*) from audit_log where action like 'billing.%'")
                .await,
            0
        );
        assert_eq!(app.key_status(key).await.as_deref(), Some("released"));

        // Stripe finishes the stalled call (it keeps executing when the client gave up), then
        // answers normally again; the client retries with the same key.
        tokio::time::sleep(Duration::from_millis(900)).await;
        fake.set_mode(
            "/v1/checkout/sessions",
            Mode::Fail {
                status: 500,
                body: json!({}),
                times: 0,
            },
        );
        let retry = app.post(CHECKOUT, &token, key, &checkout_body()).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(retry.header("idempotent-replayed"), Some("false"));
        let keys = forwarded_keys(&fake, "/v1/checkout/sessions");
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0], keys[1], "the retry sent Stripe the same key");
        assert_eq!(
            fake.created("/v1/checkout/sessions"),
            1,
            "Stripe made one session"
        );
        assert_eq!(app.key_status(key).await.as_deref(), Some("completed"));
        assert_eq!(app.audit_count("billing.checkout_session.created").await, 1);

        // A key given up on: the client's next key forwards another Stripe key, but the customer
        // key follows the user, so Stripe replays the customer it created the first time.
        let fresh_user_key = Uuid::new_v4();
        let (_, other_token) = app.user("slow-again@example.com").await;
        fake.set_mode("/v1/customers", Mode::Stall(Duration::from_millis(800)));
        let lost = app
            .post(CHECKOUT, &other_token, fresh_user_key, &checkout_body())
            .await;
        assert_eq!(lost.status, StatusCode::GATEWAY_TIMEOUT, "{}", lost.text);
        tokio::time::sleep(Duration::from_millis(900)).await;
        fake.set_mode(
            "/v1/customers",
            Mode::Fail {
                status: 500,
                body: json!({}),
                times: 0,
            },
        );
        let fresh = app
            .post(CHECKOUT, &other_token, Uuid::new_v4(), &checkout_body())
            .await;
        assert_eq!(fresh.status, StatusCode::CREATED, "{}", fresh.text);
        // The first user's two calls (the stalled one and the retry's), then this user's two.
        let customer_calls = fake.requests_to("/v1/customers");
        assert_eq!(customer_calls.len(), 4);
        assert_eq!(
            customer_calls[2].idempotency_key, customer_calls[3].idempotency_key,
            "one customer at Stripe"
        );
        assert_eq!(fake.created("/v1/customers"), 2, "one per user");
        assert_eq!(app.count("select count(*) from billing_customers").await, 2);
    })
    .await;
}

/// The portal URL signs the user into their billing: it is never stored for replay.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn portal_urls_are_not_stored(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (_, token) = app.user("portal@example.com").await;
        let key = Uuid::new_v4();
        let body = json!({ "return_url": "https://app.example.com/settings" });
        let first = app.post(PORTAL, &token, key, &body).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
        let url = first.body["url"].as_str().expect("url").to_owned();
        let stored = app
            .count(
                "select count(*) from idempotency_keys \
                 where response_body::text like '%billing.stripe.com%'",
            )
            .await;
        assert_eq!(stored, 0, "no portal URL in idempotency_keys");
        let replay = app.post(PORTAL, &token, key, &body).await;
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body["body_stored"], false, "{}", replay.text);
        assert!(!replay.text.contains(&url));
    })
    .await;
}

/// The portal keeps no success body (the URL is a credential), but a refusal holds none: it is
/// stored and replayed in full, as a problem (with its `error` and media type), not as the bare
/// "not stored" marker.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn portal_refusals_replay_in_full(pool: PgPool) {
    run_with_fake(&pool, async |app, fake| {
        let (_, token) = app.user("portal-refused@example.com").await;
        let key = Uuid::new_v4();
        let body = json!({ "return_url": "ftp://app.example.com/settings" });
        let first = app.post(PORTAL, &token, key, &body).await;
        assert_problem(
            &first,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidBillingRequest,
        );
        let replay = app.post(PORTAL, &token, key, &body).await;
        assert_problem(
            &replay,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidBillingRequest,
        );
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body["idempotency_replayed"], true);
        assert!(fake.requests_to("/v1/billing_portal/sessions").is_empty());
    })
    .await;
}

/// A user whose subscription is running cannot start a second one through checkout.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn checkout_refuses_a_second_subscription(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (user_id, token) = app.user("subscribed@example.com").await;
        active_subscription(app, user_id, "sub_running", "cus_running").await;
        let second = app
            .post(CHECKOUT, &token, Uuid::new_v4(), &checkout_body())
            .await;
        assert_problem(&second, StatusCode::CONFLICT, ErrorCode::SubscriptionActive);
    })
    .await;
}

/// Stripe refuses (400): a clear 422 carrying Stripe's message, never the secret key;
/// Stripe failing (500) is a 502; bad input is refused before any Stripe call.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn stripe_errors_map_to_clear_codes(pool: PgPool) {
    run_with_fake(&pool, async |app, fake| {
        let (_, token) = app.user("rejected@example.com").await;

        let invalid = app
        .post(
            CHECKOUT,
            &token,
            Uuid::new_v4(),
            &json!({ "price_id": "", "success_url": "ftp://x", "cancel_url": "https://a.example" }),
        )
        .await;
        assert_problem(
            &invalid,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidBillingRequest,
        );
        let bad_url = app
            .post(
                PORTAL,
                &token,
                None,
                &json!({ "return_url": "javascript:alert(1)" }),
            )
            .await;
        assert_eq!(
            bad_url.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            bad_url.text
        );
        assert!(fake.requests().is_empty(), "no Stripe call for bad input");

        fake.set_mode(
            "/v1/checkout/sessions",
            Mode::Fail {
                status: 400,
                body: json!({ "error": {
                    "type": "invalid_request_error", "code": "resource_missing",
                    "message": "No such price: 'price_nope'", "param": "line_items[0][price]",
                }}),
                times: 1,
            },
        );
        let rejected = app
            .post(
                CHECKOUT,
                &token,
                Uuid::new_v4(),
                &json!({
                    "price_id": "price_nope",
                    "success_url": "https://app.example.com/ok",
                    "cancel_url": "https://app.example.com/back",
                }),
            )
            .await;
        assert_problem(
            &rejected,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::BillingRequestRejected,
        );
        let message = rejected.body["message"].as_str().expect("message");
        assert!(message.contains("No such price"), "{message}");
        assert!(message.contains("line_items[0][price]"), "{message}");
        assert!(!rejected.text.contains(SECRET_KEY));

        fake.set_mode(
            "/v1/billing_portal/sessions",
            Mode::Fail {
                status: 500,
                body: json!({ "error": { "type": "api_error", "message": "boom" } }),
                times: 1,
            },
        );
        let settings = json!({ "return_url": "https://app.example.com/settings" });
        let failed = app.post(PORTAL, &token, Uuid::new_v4(), &settings).await;
        assert_problem(
            &failed,
            StatusCode::BAD_GATEWAY,
            ErrorCode::StripeUnavailable,
        );
        assert!(!failed.text.contains(SECRET_KEY));

        // Then the portal works, reusing the customer the rejected checkout recorded.
        let portal = app.post(PORTAL, &token, Uuid::new_v4(), &settings).await;
        assert_eq!(portal.status, StatusCode::CREATED, "{}", portal.text);
        assert!(portal.body["url"]
            .as_str()
            .is_some_and(|u| u.starts_with("https://billing.stripe.com/")));
        assert_eq!(fake.requests_to("/v1/customers").len(), 1);
        assert_eq!(app.audit_count("billing.portal_session.created").await, 1);
    })
    .await;
}

/// Without a secret key: 503 billing_not_configured before any key row; trading still runs.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn without_secret_key_billing_is_not_configured(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("nobill@example.com").await;
        for (path, body) in [
            (CHECKOUT, checkout_body()),
            (PORTAL, json!({ "return_url": "https://app.example.com" })),
            (CANCEL, json!({})),
        ] {
            let response = app.post(path, &token, Uuid::new_v4(), &body).await;
            assert_problem(
                &response,
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::BillingNotConfigured,
            );
            assert_eq!(
                response.header("retry-after"),
                None,
                "retrying does not configure billing"
            );
        }
        let webhook = app
            .send(
                Call::new(Method::POST, WEBHOOK)
                    .header("stripe-signature", "t=1,v1=00")
                    .raw(b"{}".to_vec(), Some("application/json")),
            )
            .await;
        assert_problem(
            &webhook,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BillingNotConfigured,
        );
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);

        let reset = app.reset_account(&token, Uuid::new_v4()).await;
        assert_eq!(reset.status, StatusCode::OK, "{}", reset.text);
        let account = app.account(&token).await;
        assert_eq!(account.status, StatusCode::OK);
    })
    .await;
}

/// One webhook event delivered 5 times concurrently: all 2xx, recorded and applied once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn webhook_concurrent_deliveries_apply_once(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (user_id, _) = app.user("hooked@example.com").await;
        link_customer(app, user_id, "cus_hook1").await;
        let now = test_now().timestamp();
        let event = subscription_event(
            "evt_1",
            "customer.subscription.created",
            now,
            "active",
            false,
        );
        let body = serde_json::to_vec(&event).expect("json");
        let signature = raptor_api::billing::signature_header(WEBHOOK_SECRET, now, &body);
        let events = "raptor_stripe_webhook_events_total";
        let created = |outcome| {
            [
                ("type", "customer.subscription.created"),
                ("outcome", outcome),
            ]
        };
        let before = app.metrics().await;
        let mut set = JoinSet::new();
        for _ in 0..5 {
            set.spawn(send(
                app.router.clone(),
                Call::new(Method::POST, WEBHOOK)
                    .header("stripe-signature", &signature)
                    .raw(body.clone(), Some("application/json")),
            ));
        }
        let mut fresh = 0;
        while let Some(response) = set.join_next().await {
            let response = response.expect("join");
            assert_eq!(response.status, StatusCode::OK, "{}", response.text);
            assert_eq!(response.body["received"], true);
            if response.body["duplicate"] == false {
                fresh += 1;
            }
        }
        assert_eq!(fresh, 1, "exactly one delivery applied the event");
        // By type and outcome (other tests of this process may add theirs).
        let after = app.metrics().await;
        let delta = |outcome| {
            count(&after, events, &created(outcome)) - count(&before, events, &created(outcome))
        };
        assert!(delta("processed") >= 1.0, "{after}");
        assert!(delta("duplicate") >= 4.0, "{after}");
        assert_eq!(
            app.count("select count(*) from processed_stripe_events")
                .await,
            1
        );
        assert_eq!(app.audit_count("billing.webhook.applied").await, 1);
        let (owner, status, price): (Option<i32>, String, Option<String>) = sqlx::query_as(
            "select user_id, status, price_id from billing_subscriptions \
             where stripe_subscription_id = 'sub_hook1'",
        )
        .fetch_one(&app.pool)
        .await
        .expect("mirror");
        assert_eq!(owner, Some(user_id));
        assert_eq!(status, "active");
        assert_eq!(price.as_deref(), Some("price_premium_monthly"));
        let applied: bool = app
            .scalar("select applied from processed_stripe_events where event_id = 'evt_1'")
            .await;
        assert!(applied);
    })
    .await;
}

/// Webhooks with bad, stale or missing signatures and unparsable payloads: 400, nothing written.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn webhook_refuses_unsigned_stale_and_malformed(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let now = test_now().timestamp();
        let event = subscription_event(
            "evt_bad",
            "customer.subscription.updated",
            now,
            "active",
            false,
        );
        let body = serde_json::to_vec(&event).expect("json");

        let wrong_secret = raptor_api::billing::signature_header("whsec_other", now, &body);
        let stale = raptor_api::billing::signature_header(WEBHOOK_SECRET, now - 301, &body);
        let future = raptor_api::billing::signature_header(WEBHOOK_SECRET, now + 301, &body);
        let tampered = raptor_api::billing::signature_header(WEBHOOK_SECRET, now, b"{}");
        let events = "raptor_stripe_webhook_events_total";
        let refused = |outcome| [("type", "unknown"), ("outcome", outcome)];
        let before = app.metrics().await;
        for signature in [
            Some(wrong_secret.as_str()),
            Some(stale.as_str()),
            Some(future.as_str()),
            Some(tampered.as_str()),
            Some("garbage"),
            Some("t=abc,v1=zz"),
            None,
        ] {
            let mut call =
                Call::new(Method::POST, WEBHOOK).raw(body.clone(), Some("application/json"));
            if let Some(signature) = signature {
                call = call.header("stripe-signature", signature);
            }
            let response = app.send(call).await;
            assert_problem(
                &response,
                StatusCode::BAD_REQUEST,
                ErrorCode::InvalidSignature,
            );
        }
        // Correctly signed, but not an event.
        let garbage = b"not json".to_vec();
        let signature = raptor_api::billing::signature_header(WEBHOOK_SECRET, now, &garbage);
        let response = app
            .send(
                Call::new(Method::POST, WEBHOOK)
                    .header("stripe-signature", &signature)
                    .raw(garbage, Some("application/json")),
            )
            .await;
        assert_problem(
            &response,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidPayload,
        );
        // A signature that does not verify is counted apart from a payload that is not an
        // event (other tests of this process may add theirs).
        let after = app.metrics().await;
        let delta = |outcome| {
            count(&after, events, &refused(outcome)) - count(&before, events, &refused(outcome))
        };
        assert!(delta("bad_signature") >= 7.0, "{after}");
        assert!(delta("rejected") >= 1.0, "{after}");

        assert_eq!(
            app.count("select count(*) from processed_stripe_events")
                .await,
            0
        );
        assert_eq!(
            app.count("select count(*) from billing_subscriptions")
                .await,
            0
        );
        assert_eq!(
            app.count("select count(*) from audit_log where action like 'billing.%'")
                .await,
            0
        );
    })
    .await;
}

/// Out-of-order webhook events never roll the mirror back; unknown types are recorded and
/// acknowledged; a completed checkout links the customer to its user.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn webhook_ignores_older_events_and_records_unknown_types(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (user_id, _) = app.user("ordered@example.com").await;
        let now = test_now().timestamp();

        // The subscription arrives before we know whose customer it is.
        let newer = subscription_event(
            "evt_new",
            "customer.subscription.updated",
            now - 10,
            "past_due",
            true,
        );
        let response = deliver(app, &newer, now).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        let older = subscription_event(
            "evt_old",
            "customer.subscription.updated",
            now - 60,
            "active",
            false,
        );
        let response = deliver(app, &older, now).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        assert_eq!(response.body["duplicate"], false);
        let (status, cancel, owner): (String, bool, Option<i32>) = sqlx::query_as(
            "select status, cancel_at_period_end, user_id from billing_subscriptions",
        )
        .fetch_one(&app.pool)
        .await
        .expect("mirror");
        assert_eq!(
            (status.as_str(), cancel),
            ("past_due", true),
            "older event changed nothing"
        );
        assert_eq!(owner, None);
        let applied: Vec<(String, bool)> = sqlx::query_as(
            "select event_id, applied from processed_stripe_events order by event_id",
        )
        .fetch_all(&app.pool)
        .await
        .expect("events");
        assert_eq!(
            applied,
            vec![("evt_new".to_owned(), true), ("evt_old".to_owned(), false)]
        );
        assert_eq!(app.audit_count("billing.webhook.applied").await, 1);

        let unknown = json!({
            "id": "evt_unknown", "object": "event", "type": "invoice.paid", "created": now,
            "data": { "object": { "id": "in_1", "object": "invoice" } },
        });
        let response = deliver(app, &unknown, now).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        let recorded: bool = app
            .scalar("select applied from processed_stripe_events where event_id = 'evt_unknown'")
            .await;
        assert!(!recorded);

        let completed = json!({
            "id": "evt_checkout", "object": "event", "type": "checkout.session.completed",
            "created": now,
            "data": { "object": {
                "id": "cs_test_1", "object": "checkout.session", "customer": "cus_hook1",
                "subscription": "sub_hook1", "client_reference_id": user_id.to_string(),
            }},
        });
        let response = deliver(app, &completed, now).await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        let owner: Option<i32> = app
            .scalar("select user_id from billing_subscriptions")
            .await;
        assert_eq!(owner, Some(user_id));
        // Redelivered: acknowledged as a duplicate, nothing more.
        let again = deliver(app, &completed, now).await;
        assert_eq!(again.body["duplicate"], true);
        assert_eq!(app.audit_count("billing.webhook.applied").await, 2);
    })
    .await;
}

/// Cancel at period end: the mirror comes back with `cancel_at_period_end: true`; no
/// subscription is 404.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cancel_subscription_at_period_end(pool: PgPool) {
    run_with_fake(&pool, async |app, fake| {
        let (user_id, token) = app.user("leaving@example.com").await;
        let (_, stranger) = app.user("stranger@example.com").await;
        let none = app
            .post(CANCEL, &stranger, Uuid::new_v4(), &json!({}))
            .await;
        assert_eq!(none.status, StatusCode::NOT_FOUND, "{}", none.text);

        link_customer(app, user_id, "cus_leave").await;
        let period_end = test_now().timestamp() + 86_400;
        fake.add_subscription(
            "sub_leave",
            "cus_leave",
            "price_premium_monthly",
            period_end,
        );
        let now = test_now().timestamp();
        let mut created = subscription_event(
            "evt_c1",
            "customer.subscription.created",
            now - 100,
            "active",
            false,
        );
        created["data"]["object"]["id"] = json!("sub_leave");
        created["data"]["object"]["customer"] = json!("cus_leave");
        assert_eq!(deliver(app, &created, now).await.status, StatusCode::OK);

        let key = Uuid::new_v4();
        let canceled = app
            .send(Call::new(Method::POST, CANCEL).token(&token).key(key))
            .await;
        assert_eq!(canceled.status, StatusCode::OK, "{}", canceled.text);
        assert_eq!(canceled.body["stripe_subscription_id"], "sub_leave");
        assert_eq!(canceled.body["cancel_at_period_end"], true);
        assert_eq!(canceled.body["status"], "active");
        assert_eq!(canceled.body["user_id"], user_id);
        assert!(canceled.body["current_period_end"].as_str().is_some());
        let calls = fake.requests_to("/v1/subscriptions/sub_leave");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].field("cancel_at_period_end"), Some("true"));
        assert_ne!(
            calls[0].idempotency_key.as_deref(),
            Some(key.to_string().as_str())
        );
        let stored: bool = app
            .scalar(
                "select cancel_at_period_end from billing_subscriptions \
                 where stripe_subscription_id = 'sub_leave'",
            )
            .await;
        assert!(stored);
        assert_eq!(
            app.audit_count("billing.subscription.cancel_requested")
                .await,
            1
        );

        let replay = app
            .send(Call::new(Method::POST, CANCEL).token(&token).key(key))
            .await;
        assert_eq!(replay.status, StatusCode::OK);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(fake.requests_to("/v1/subscriptions/sub_leave").len(), 1);
    })
    .await;
}

/// Mirror-sync: operators and services upsert one row; users are refused.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn mirror_sync_upserts_for_operators_and_services(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (user_id, user) = app.user("subscriber@example.com").await;
        let (_, operator) = app.operator("ops@example.com").await;
        let service = app.service_token("billing-reconciler").await;
        link_customer(app, user_id, "cus_sync").await;
        let body = |status: &str, cancel: bool| {
            json!({
                "stripe_subscription_id": "sub_sync", "stripe_customer_id": "cus_sync",
                "status": status, "price_id": "price_premium_monthly",
                "current_period_end": "2027-01-01T00:00:00Z", "cancel_at_period_end": cancel,
            })
        };
        let first = app
            .post(SYNC, &operator, None, &body("active", false))
            .await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        assert_eq!(first.body["user_id"], user_id, "resolved from the customer");
        assert_eq!(first.body["current_period_end"], "2027-01-01T00:00:00Z");
        let second = app
            .post(SYNC, &service, None, &body("past_due", true))
            .await;
        assert_eq!(second.status, StatusCode::OK, "{}", second.text);
        assert_eq!(second.body["status"], "past_due");
        assert_eq!(second.body["cancel_at_period_end"], true);
        assert_eq!(
            app.count("select count(*) from billing_subscriptions")
                .await,
            1
        );
        assert_eq!(app.audit_count("billing.subscription.synced").await, 2);

        let refused = app.post(SYNC, &user, None, &body("canceled", false)).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.text);
        let invalid = app.post(SYNC, &operator, None, &body("bogus", false)).await;
        assert_problem(
            &invalid,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidSubscription,
        );
        let mut orphan = body("active", false);
        orphan["user_id"] = json!(999_999);
        let orphan = app.post(SYNC, &operator, None, &orphan).await;
        assert_eq!(
            orphan.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            orphan.text
        );
        let status: String = app.scalar("select status from billing_subscriptions").await;
        assert_eq!(status, "past_due");
    })
    .await;
}

/// While Stripe is slow, Stripe-calling requests hold pooled connections: past
/// `RAPTOR_BILLING_CONCURRENCY` of them, the next is refused at once with `503 billing_busy`
/// (its key released, so its retry runs), and trading goes on.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn billing_concurrency_is_bounded(pool: PgPool) {
    let fake = FakeStripe::start().await;
    let mut options = billing(&fake, Duration::from_secs(2));
    options.api.billing.concurrency = 1;
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("busy-billing@example.com").await;
        fake.set_mode("/v1/customers", Mode::Stall(Duration::from_millis(800)));
        let slow = {
            let router = app.router.clone();
            let call = Call::new(Method::POST, CHECKOUT)
                .token(&token)
                .key(Uuid::new_v4())
                .json(&checkout_body());
            tokio::spawn(async move { send(router, call).await })
        };
        // The first request holds the one permit once Stripe has its call (and stalls it): a
        // fixed sleep here failed on a loaded machine, the first not yet at Stripe.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while fake.requests_to("/v1/customers").is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "the first call never reached Stripe"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let busy_key = Uuid::new_v4();
        let busy = app.post(CHECKOUT, &token, busy_key, &checkout_body()).await;
        assert_problem(
            &busy,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::BillingBusy,
        );
        assert!(busy.header("retry-after").is_some());
        assert_eq!(
            app.key_status(busy_key).await.as_deref(),
            Some("released"),
            "a retryable 503: the key is released"
        );
        app.quote("AAPL", "189.00", "190.00").await;
        let order = app
            .create_order(
                &token,
                Uuid::new_v4(),
                &Order::market("AAPL").buy().qty("1").json(),
            )
            .await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        let first = slow.await.expect("join");
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    })
    .await;
}

/// Erasure refuses while a subscription still renews (it would go on charging a person the
/// service no longer knows); once it is set to end, erasure proceeds.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn erasure_waits_for_a_renewing_subscription(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (user_id, token) = app.user("renewing@example.com").await;
        active_subscription(app, user_id, "sub_renewing", "cus_renewing").await;
        let refused = app.erase(&token).await;
        assert_problem(
            &refused,
            StatusCode::CONFLICT,
            ErrorCode::SubscriptionActive,
        );
        assert_eq!(app.count("select count(*) from users").await, 1);
        app.execute("update billing_subscriptions set cancel_at_period_end = true")
            .await;
        let erased = app.erase(&token).await;
        assert_eq!(erased.status, StatusCode::OK, "{}", erased.text);
        assert_eq!(
            app.count("select count(*) from billing_subscriptions")
                .await,
            0
        );
    })
    .await;
}

/// After an erasure, Stripe goes on sending events about the erased user's customer (here the
/// period-end cancellation and a completed checkout naming the old user id): each is
/// acknowledged and recorded, and nothing of it is mirrored back.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn events_for_an_erased_customer_are_not_mirrored(pool: PgPool) {
    run_with_fake(&pool, async |app, _| {
        let (user_id, token) = app.user("erased-billing@example.com").await;
        link_customer(app, user_id, "cus_hook1").await;
        let now = test_now().timestamp();
        let created = subscription_event(
            "evt_before",
            "customer.subscription.created",
            now - 100,
            "active",
            true,
        );
        assert_eq!(deliver(app, &created, now).await.status, StatusCode::OK);
        assert_eq!(
            app.count("select count(*) from billing_subscriptions")
                .await,
            1
        );
        let erased = app.erase(&token).await;
        assert_eq!(erased.status, StatusCode::OK, "{}", erased.text);
        assert_eq!(
            app.count("select count(*) from billing_subscriptions")
                .await,
            0
        );
        let stored: String = app
            .scalar("select encode(customer_hash, 'hex') from erased_stripe_customers")
            .await;
        assert!(!stored.contains("cus_hook1"), "only a hash is kept");

        let deleted = subscription_event(
            "evt_after",
            "customer.subscription.deleted",
            now,
            "canceled",
            true,
        );
        let completed = json!({
            "id": "evt_checkout_after", "object": "event", "type": "checkout.session.completed",
            "created": now,
            "data": { "object": {
                "id": "cs_test_after", "object": "checkout.session", "customer": "cus_hook1",
                "subscription": "sub_hook1", "client_reference_id": user_id.to_string(),
            }},
        });
        for event in [&deleted, &completed] {
            let response = deliver(app, event, now).await;
            assert_eq!(response.status, StatusCode::OK, "{}", response.text);
            assert_eq!(response.body["received"], true);
        }
        assert_eq!(
            app.count("select count(*) from billing_subscriptions")
                .await,
            0,
            "nothing mirrored back"
        );
        assert_eq!(app.count("select count(*) from billing_customers").await, 0);
        let recorded: Vec<(String, bool)> = sqlx::query_as(
            "select event_id, applied from processed_stripe_events
          where event_id in ('evt_after', 'evt_checkout_after') order by event_id",
        )
        .fetch_all(&app.pool)
        .await
        .expect("recorded");
        assert_eq!(
            recorded,
            vec![
                ("evt_after".to_owned(), false),
                ("evt_checkout_after".to_owned(), false)
            ]
        );
    })
    .await;
}

/// `GET /api/billing/subscription` answers the caller's mirror (the running one over an older
/// canceled one, whatever their order), without Stripe configured; a user without one, or
/// whose only subscription is another user's, gets `404 not_found`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn the_subscription_reads_from_the_mirror(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("subscriber@example.com").await;
        let (_, other) = app.user("nobody@example.com").await;
        let missing = app.get("/api/billing/subscription", &token).await;
        assert_problem(&missing, StatusCode::NOT_FOUND, ErrorCode::NotFound);

        active_subscription(app, user_id, "sub_running", "cus_reader").await;
        app.execute_where(
            "update billing_subscriptions
                set price_id = 'price_pro', current_period_end = '2027-01-01T00:00:00Z',
                    cancel_at_period_end = true, source_at = now() - interval '1 day'
              where user_id = $1",
            user_id,
        )
        .await;
        sqlx::query(
            "insert into billing_subscriptions
                (stripe_subscription_id, stripe_customer_id, user_id, status, source_at)
             values ('sub_old', 'cus_reader', $1, 'canceled', now())",
        )
        .bind(user_id)
        .execute(&app.pool)
        .await
        .expect("older row");

        let read = app.get("/api/billing/subscription", &token).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.text);
        assert_eq!(read.body["stripe_subscription_id"], "sub_running");
        assert_eq!(read.body["status"], "active");
        assert_eq!(read.body["price_id"], "price_pro");
        assert_eq!(read.body["current_period_end"], "2027-01-01T00:00:00Z");
        assert_eq!(read.body["cancel_at_period_end"], true);

        let stranger = app.get("/api/billing/subscription", &other).await;
        assert_problem(&stranger, StatusCode::NOT_FOUND, ErrorCode::NotFound);
    })
    .await;
}

/// The checkout's and the portal's URLs are what the document says (`format: uri`,
/// `maxLength: 2048`): an absolute http(s) URL of at most 2048 characters. A relative URL, a
/// bare host, another scheme or one character too many is `422 invalid_billing_request` with no
/// Stripe call; 2048 characters exactly are accepted.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn billing_urls_are_absolute_http_urls_of_at_most_2048_characters(pool: PgPool) {
    run_with_fake(&pool, async |app, fake| {
        let (_, token) = app.user("urls@example.com").await;
        let longest = format!("https://app.example.com/{}", "x".repeat(2048 - 24));
        assert_eq!(longest.len(), 2048);
        let too_long = format!("{longest}y");
        for bad in [
            "/billing/success",
            "app.example.com/billing",
            "ftp://app.example.com/billing",
            "mailto:billing@example.com",
            too_long.as_str(),
        ] {
            for (field, path) in [
                ("success_url", CHECKOUT),
                ("cancel_url", CHECKOUT),
                ("return_url", PORTAL),
            ] {
                let mut body = if path == CHECKOUT {
                    checkout_body()
                } else {
                    json!({ "return_url": "https://app.example.com/settings" })
                };
                body[field] = json!(bad);
                let refused = app.post(path, &token, Uuid::new_v4(), &body).await;
                assert_problem(
                    &refused,
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidBillingRequest,
                );
            }
        }
        assert!(fake.requests().is_empty(), "no Stripe call for a bad URL");

        let mut body = checkout_body();
        body["success_url"] = json!(longest);
        let accepted = app.post(CHECKOUT, &token, Uuid::new_v4(), &body).await;
        assert_eq!(accepted.status, StatusCode::CREATED, "{}", accepted.text);
        let portal = app
            .post(
                PORTAL,
                &token,
                Uuid::new_v4(),
                &json!({ "return_url": longest }),
            )
            .await;
        assert_eq!(portal.status, StatusCode::CREATED, "{}", portal.text);
    })
    .await;
}
