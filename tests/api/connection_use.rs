//! How an instrumented request uses the business pool: the connection its token lookup used
//! is kept for its transaction (one checkout per request, not two), but never while the request
//! waits: not while the client still sends the body, not while the claim waits on the store,
//! not while a write waits for its account's permit. Each test gives the app a pool so small
//! that a connection held while waiting would starve the request that must get through.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request, StatusCode};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tower::ServiceExt;
use uuid::Uuid;

use crate::helpers::{label, send, Call, Options, Order, TestApp};

/// A request still waiting for its answer.
type Pending<T> = tokio::task::JoinHandle<T>;

/// Asserts `pending` has not answered yet.
fn still_waiting<T>(pending: &Pending<T>, what: &str) {
    assert!(!pending.is_finished(), "{what} answered already");
}

/// Another keyed request of the same user is served (needs a connection of the pool).
async fn served_meanwhile(app: &TestApp, token: &str) {
    let other = app
        .send(
            Call::new(Method::POST, "/probe/items")
                .token(token)
                .key(Uuid::new_v4())
                .json(&label("meanwhile")),
        )
        .await;
    assert_eq!(other.status, StatusCode::CREATED, "{}", other.text);
}

/// A keyed request whose client sent the headers and then stalls in the middle of the body
/// holds no connection: on a one-connection pool another request is served meanwhile, and the
/// stalled one completes once its body arrives.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_request_whose_body_is_still_arriving_holds_no_connection(pool: sqlx::PgPool) {
    let options = Options {
        pool_size: 1,
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("slow-body@example.com").await;
        let (parts, chunks) = mpsc::channel::<Bytes>(1);
        let body = Body::from_stream(
            futures_util::stream::unfold(chunks, |mut chunks| async move {
                chunks.recv().await.map(|chunk| (chunk, chunks))
            })
            .map(Ok::<_, Infallible>),
        );
        let request = Request::builder()
            .method(Method::POST)
            .uri("/probe/items")
            .header("authorization", format!("Bearer {token}"))
            .header("idempotency-key", Uuid::new_v4().to_string())
            .header("content-type", "application/json")
            .body(body)
            .expect("request");
        let router = app.router.clone();
        let slow = tokio::spawn(async move { router.oneshot(request).await });
        parts
            .send(Bytes::from_static(b"{\"label\": "))
            .await
            .expect("first half");
        tokio::time::sleep(Duration::from_millis(200)).await;

        served_meanwhile(app, &token).await;
        still_waiting(&slow, "the request with half a body");

        parts
            .send(Bytes::from_static(b"\"at last\"}"))
            .await
            .expect("second half");
        drop(parts);
        let answer = slow.await.expect("task").expect("infallible");
        assert_eq!(answer.status(), StatusCode::CREATED);
        assert_eq!(app.probe_items("at last").await, 1);
    })
    .await;
}

/// A retry whose claim waits on a key row locked by a slow original lets go of the connection
/// its authentication kept: on a one-connection pool an unrelated request is served while the
/// retry still waits, and the retry then answers `409 idempotency_in_flight`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_claim_that_waits_holds_no_connection(pool: sqlx::PgPool) {
    let options = Options {
        pool_size: 1,
        ..Options::default().store_timeout(Duration::from_secs(4))
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("waiting-claim@example.com").await;
        let key = Uuid::new_v4();
        let call = || {
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(key)
                .json(&label("locked"))
        };
        let first = app.send(call()).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

        let holder = app.lock_key_row(key).await;
        let retry = tokio::spawn(send(app.router.clone(), call()));
        tokio::time::sleep(Duration::from_millis(200)).await;
        served_meanwhile(app, &token).await;
        still_waiting(&retry, "the retry of the locked key");

        let retry = retry.await.expect("task");
        holder.rollback().await.expect("unlock");
        assert_eq!(retry.status, StatusCode::CONFLICT, "{}", retry.text);
        assert_eq!(retry.body["error"], "idempotency_in_flight");
        assert_eq!(app.probe_items("locked").await, 1, "the original ran once");
    })
    .await;
}

/// A write waiting for its account's permit (another write on the account is under way) lets
/// go of the connection its authentication kept: with two connections, one held by the write
/// under way, a read is served while the second write waits; both writes then go through.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_write_waiting_for_its_account_holds_no_connection(pool: sqlx::PgPool) {
    let mut options = Options {
        pool_size: 2,
        ..Options::default()
    };
    options.api.account_write_concurrency = 1;
    options.api.account_write_wait = Duration::from_secs(20);
    TestApp::run(&pool, options, async |app| {
        let (user_id, token) = app.user("busy-account@example.com").await;
        app.quote("AAPL", "189.90", "190.10").await;
        let order = || Order::market("AAPL").buy().qty("1").day().json();
        // The first write blocks inside its transaction (on its connection, with the permit).
        let holder = app
            .lock_where(
                "select 1 from paper_accounts where user_id = $1 for update",
                user_id,
            )
            .await;
        let call = |key: Uuid| {
            Call::new(Method::POST, "/api/trading/orders")
                .token(&token)
                .key(key)
                .json(&order())
        };
        let first = tokio::spawn(send(app.router.clone(), call(Uuid::new_v4())));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let second = tokio::spawn(send(app.router.clone(), call(Uuid::new_v4())));
        tokio::time::sleep(Duration::from_millis(300)).await;

        let read = app.profile(&token).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.text);
        still_waiting(&first, "the first write");
        still_waiting(&second, "the second write");

        holder.rollback().await.expect("unlock");
        for write in [first, second] {
            let answer = write.await.expect("task");
            assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.text);
        }
    })
    .await;
}
