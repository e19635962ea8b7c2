//! What a claim answers when the idempotency store is locked, busy or cannot be connected to
//! (docs/idempotency.md, "Tiers"): a fail-open (Tier 2) route runs without dedup only when no
//! connection to the store can be made at all; a busy pool, a locked row or table and a
//! statement timeout are 409 or 503 on every tier, so a key that exists never runs again.

use raptor_api::codes::ErrorCode;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::helpers::{assert_problem, label, peers, send, Call, Options, TestApp, TestResponse};

/// A business pool of 4 (so a store pool of 2) and the default 2-second store timeout: small
/// enough for a dozen waiting claims to saturate the store pool.
fn small_pool() -> Options {
    Options {
        pool_size: 4,
        ..Options::default().store_timeout(Duration::from_millis(2000))
    }
}

/// Sends `copies` copies of one call at once; the answers.
async fn at_once(app: &TestApp, copies: usize, call: impl Fn() -> Call) -> Vec<TestResponse> {
    let mut set = JoinSet::new();
    for _ in 0..copies {
        set.spawn(send(app.router.clone(), call()));
    }
    set.join_all().await
}

/// Every answer is a refusal that says "retry": never a fresh execution.
fn assert_all_refused(answers: &[TestResponse], what: &str) {
    for answer in answers {
        assert_ne!(
            answer.header("idempotent-replayed"),
            Some("false"),
            "{what}: a fresh execution: {} {}",
            answer.status,
            answer.text
        );
        assert!(
            matches!(
                (answer.status, answer.body["error"].as_str()),
                (StatusCode::CONFLICT, Some("idempotency_in_flight"))
                    | (
                        StatusCode::SERVICE_UNAVAILABLE,
                        Some("idempotency_store_unavailable")
                    )
            ),
            "{what}: {} {}",
            answer.status,
            answer.text
        );
        assert!(answer.header("retry-after").is_some(), "{what}");
    }
}

/// A completed Tier 2 key whose row a slow transaction holds, retried by 12 clients twice
/// each while the store pool (2 connections) is saturated by the waiting claims: every answer
/// is 409 or 503, none a fresh execution; once the lock is gone the key replays.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn busy_store_never_reruns_a_completed_tier2_key(pool: PgPool) {
    TestApp::run(&pool, small_pool(), async |app| {
        let (_, token) = app.user("busy@example.com").await;
        let key = Uuid::new_v4();
        let body = label("busy-once");
        let call = || {
            Call::new(Method::POST, "/probe/open")
                .token(&token)
                .key(key)
                .json(&body)
        };
        let first = app.send(call()).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

        let holder = app.lock_key_row(key).await;
        let started = Instant::now();
        let mut answers = at_once(app, 12, call).await;
        answers.extend(at_once(app, 12, call).await);
        let took = started.elapsed();
        holder.rollback().await.expect("unlock");

        assert_all_refused(&answers, "locked row, busy pool");
        assert!(took < Duration::from_secs(6), "answered after {took:?}");
        assert_eq!(
            app.probe_items("busy-once").await,
            1,
            "the handler ran once"
        );

        let replay = app.send(call()).await;
        assert_eq!(replay.status, StatusCode::CREATED, "{}", replay.text);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.probe_items("busy-once").await, 1);
    })
    .await;
}

/// The same reproduction on `PATCH /api/account/profile`: while the row is locked no retry
/// runs the patch (409 or 503); the profile's audit row stays the one of the first execution.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn busy_store_never_reruns_a_profile_patch(pool: PgPool) {
    TestApp::run(&pool, small_pool(), async |app| {
        let (user_id, token) = app.user("busy-profile@example.com").await;
        let key = Uuid::new_v4();
        let body = json!({ "display_name": "Busy" });
        let call = || {
            Call::new(Method::PATCH, "/api/account/profile")
                .token(&token)
                .key(key)
                .json(&body)
        };
        let first = app.send(call()).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        let updated_at = |app: &TestApp| {
            let pool = app.pool.clone();
            async move {
                sqlx::query_scalar::<_, chrono::DateTime<chrono::Utc>>(
                    "select updated_at from users where id = $1",
                )
                .bind(user_id)
                .fetch_one(&pool)
                .await
                .expect("updated_at")
            }
        };
        let before = updated_at(app).await;

        let holder = app.lock_key_row(key).await;
        let mut answers = at_once(app, 12, call).await;
        answers.extend(at_once(app, 12, call).await);
        holder.rollback().await.expect("unlock");

        assert_all_refused(&answers, "profile, locked row, busy pool");
        assert_eq!(
            updated_at(app).await,
            before,
            "the profile was not written again"
        );
        assert_eq!(app.audit_count("profile.updated").await, 1);
    })
    .await;
}

/// Every connection of the store pool in use, and no lock anywhere: a new Tier 2 key is
/// refused with 503 within the store timeout (the store is up, only busy), not run untracked;
/// once a connection is free the same key runs, tracked.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn saturated_store_pool_refuses_tier2(pool: PgPool) {
    TestApp::run(&pool, small_pool(), async |app| {
        let (_, token) = app.user("saturated@example.com").await;
        let store = app.state.idempotency.store_pool().clone();
        let size = store.options().get_max_connections();
        let mut held = Vec::new();
        for _ in 0..size {
            held.push(store.acquire().await.expect("a store connection"));
        }

        let key = Uuid::new_v4();
        let body = label("saturated");
        let started = Instant::now();
        let refused = app.post("/probe/open", &token, key, &body).await;
        let took = started.elapsed();
        assert_problem(
            &refused,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IdempotencyStoreUnavailable,
        );
        assert!(refused.header("retry-after").is_some());
        assert!(
            took < Duration::from_millis(2000),
            "answered after {took:?}"
        );
        assert_eq!(app.probe_items("saturated").await, 0, "not run untracked");

        drop(held);
        let ran = app.post("/probe/open", &token, key, &body).await;
        assert_eq!(ran.status, StatusCode::CREATED, "{}", ran.text);
        assert_ne!(ran.body["lineage"], serde_json::Value::Null, "tracked");
        assert_eq!(app.probe_items("saturated").await, 1);
    })
    .await;
}

/// A table lock on `idempotency_keys` (the store answers nothing in time, but it was reached):
/// both tiers refuse within the store timeout, neither runs.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn locked_key_table_refuses_on_every_tier(pool: PgPool) {
    let options = Options::default().store_timeout(Duration::from_millis(300));
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("locked@example.com").await;
        // Warm the flag cache and the pool before taking the lock.
        let warm = app
            .post("/probe/items", &token, Uuid::new_v4(), &label("warm"))
            .await;
        assert_eq!(warm.status, StatusCode::CREATED);

        let locker = app
            .lock("lock table idempotency_keys in access exclusive mode")
            .await;
        let mut answers = Vec::new();
        for (path, label) in [("/probe/items", "closed"), ("/probe/open", "open")] {
            let started = Instant::now();
            let answer = app
                .post(path, &token, Uuid::new_v4(), &json!({ "label": label }))
                .await;
            let took = started.elapsed();
            assert!(took < Duration::from_millis(1300), "{path} after {took:?}");
            answers.push(answer);
        }
        locker.rollback().await.expect("unlock");
        assert_all_refused(&answers, "table lock");
        assert_eq!(app.probe_items("closed").await, 0);
        assert_eq!(
            app.probe_items("open").await,
            0,
            "the fail-open tier did not run"
        );
    })
    .await;
}

/// A store whose role cannot log in (authentication fails at once): no connection can be made,
/// so the fail-open tier runs untracked and the fail-closed tier refuses.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn store_that_refuses_the_login_fails_open(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let nobody = (*pool.connect_options())
            .clone()
            .username("raptor_no_such_role");
        let store = PgPoolOptions::new()
            .max_connections(2)
            .connect_lazy_with(nobody);
        let router = app.with_store(store);
        let (_, token) = app.user("no-login@example.com").await;
        let post = |path: &str, label: &str| {
            send(
                router.clone(),
                Call::new(Method::POST, path)
                    .token(&token)
                    .key(Uuid::new_v4())
                    .json(&json!({ "label": label })),
            )
        };
        let started = Instant::now();
        let open = post("/probe/open", "no-login-open").await;
        let closed = post("/probe/items", "no-login-closed").await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(open.status, StatusCode::CREATED, "{}", open.text);
        assert_eq!(open.body["lineage"], serde_json::Value::Null, "untracked");
        assert_eq!(
            closed.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            closed.text
        );
        assert_eq!(app.probe_items("no-login-open").await, 1);
        assert_eq!(app.probe_items("no-login-closed").await, 0);
    })
    .await;
}

/// A store pool like production's (half a business pool of 4, the default 2-second store
/// timeout: a 500 ms acquire), whose connections go to 127.0.0.1:`port`.
fn store_at(app: &TestApp, port: u16) -> PgPool {
    let timeout = Duration::from_millis(2000);
    let options = (*app.pool.connect_options())
        .clone()
        .host("127.0.0.1")
        .port(port);
    raptor_db::pool::store_pool(4, raptor_db::pool::store_options(options, timeout), timeout)
}

/// Through `router`, whose store is `what`: a completed Tier 2 key retried with another body
/// and a new Tier 2 key are both `503 idempotency_store_unavailable` with `Retry-After`, and
/// neither runs; the retry keeps the key's first answer for when the store is back.
async fn fails_closed_on_both_tiers(app: &TestApp, router: axum::Router, what: &str) {
    let (_, token) = app
        .user(&format!("{}@example.com", what.replace(' ', "-")))
        .await;
    let key = Uuid::new_v4();
    let first = app
        .post("/probe/open", &token, key, &label(&format!("{what}-first")))
        .await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
    let call = |key: Uuid, label: &str| {
        send(
            router.clone(),
            Call::new(Method::POST, "/probe/open")
                .token(&token)
                .key(key)
                .json(&json!({ "label": label })),
        )
    };
    let started = Instant::now();
    let retried = call(key, &format!("{what}-other-body")).await;
    let fresh = call(Uuid::new_v4(), &format!("{what}-fresh")).await;
    for (answer, which) in [(&retried, "the completed key"), (&fresh, "a new key")] {
        assert_problem(
            answer,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IdempotencyStoreUnavailable,
        );
        assert!(answer.header("retry-after").is_some(), "{what}: {which}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{what}: answered within the store timeouts"
    );
    assert_eq!(
        app.probe_items(&format!("{what}-other-body")).await,
        0,
        "{what}"
    );
    assert_eq!(app.probe_items(&format!("{what}-fresh")).await, 0, "{what}");
    // The store is back: the completed key is still a mismatch for the other body.
    let mismatch = app
        .post(
            "/probe/open",
            &token,
            key,
            &label(&format!("{what}-other-body")),
        )
        .await;
    assert_problem(
        &mismatch,
        StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::IdempotencyKeyBodyMismatch,
    );
}

/// A pooler at `max_client_conn` refuses every connection with `08P01`: the store answered,
/// so a Tier 2 route must not run untracked (it did: the completed key ran again with another
/// body, 201 where the store would have said 422).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_full_pooler_is_not_an_unreachable_store(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let port = peers::full_pooler().await;
        let router = app.with_store(store_at(app, port));
        fails_closed_on_both_tiers(app, router, "full pooler").await;
    })
    .await;
}

/// A store whose every answer comes 700 ms late: the pool's acquire (a quarter of the store
/// timeout) and the probe connection both run out. Slow is not unreachable: 503 on every tier.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_slow_store_is_not_an_unreachable_store(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let options = app.pool.connect_options();
        let upstream = (options.get_host().to_owned(), options.get_port());
        let port = peers::slow_proxy(upstream, Duration::from_millis(700)).await;
        let router = app.with_store(store_at(app, port));
        fails_closed_on_both_tiers(app, router, "slow store").await;
    })
    .await;
}

/// A store that accepts connections and never answers: the probe gets no answer in time,
/// which says nothing about the key. 503 on every tier.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_store_that_never_answers_is_not_an_unreachable_store(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let port = peers::silent_listener().await;
        let router = app.with_store(store_at(app, port));
        fails_closed_on_both_tiers(app, router, "silent store").await;
    })
    .await;
}

/// A refusal whose key row cannot be completed (the completion statement fails: here a
/// trigger refuses it, as a timeout or a lost connection would) is not answered: the key is
/// released and the answer is `503` with `Retry-After`, because an unstored `422` could be
/// contradicted by the retry. The retry runs, and its refusal is stored and replayed.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_refusal_that_cannot_be_stored_is_503(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        for statement in [
            "create function refuse_completion() returns trigger language plpgsql as
             $$ begin
                  if new.status = 'completed' and new.response_code = 422 then
                    raise exception 'completion refused' using errcode = '57014';
                  end if;
                  return new;
                end $$",
            "create trigger refuse_completion before update on idempotency_keys
             for each row execute function refuse_completion()",
        ] {
            sqlx::query(statement)
                .execute(&app.pool)
                .await
                .expect(statement);
        }
        let (_, token) = app.user("unstored@example.com").await;
        let key = Uuid::new_v4();
        let body = json!({ "label": "unstored", "outcome": "refuse" });
        let call = || {
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(key)
                .json(&body)
        };
        let answer = app.send(call()).await;
        assert_problem(
            &answer,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IdempotencyStoreUnavailable,
        );
        assert!(answer.header("retry-after").is_some());
        app.wait_for_key_status(key, "released", Duration::from_secs(3))
            .await;

        sqlx::query("drop trigger refuse_completion on idempotency_keys")
            .execute(&app.pool)
            .await
            .expect("drop trigger");
        let retry = app.send(call()).await;
        assert_eq!(
            retry.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            retry.text
        );
        assert_eq!(retry.header("idempotent-replayed"), Some("false"));
        let replay = app.send(call()).await;
        assert_eq!(
            replay.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{}",
            replay.text
        );
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(
            app.probe_items("unstored").await,
            0,
            "every insert rolled back"
        );
    })
    .await;
}

/// A key whose row another transaction holds locked (an original completing slowly) is in
/// flight: the claim's lock wait runs out on the server (55P03, classified busy) and the answer
/// is `409 idempotency_in_flight` with a one-second `Retry-After`, on both tiers: the store
/// answered, so it is neither unavailable (503) nor run again.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_locked_key_row_is_in_flight_not_unavailable(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("row-locked@example.com").await;
        for (path, name) in [("/probe/items", "row-closed"), ("/probe/open", "row-open")] {
            let key = Uuid::new_v4();
            let body = label(name);
            let first = app.post(path, &token, key, &body).await;
            assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
            let holder = app
                .lock_where(
                    "select 1 from idempotency_keys where idem_key = $1 for update",
                    key.to_string(),
                )
                .await;
            let retry = app.post(path, &token, key, &body).await;
            holder.rollback().await.expect("unlock");
            assert_problem(&retry, StatusCode::CONFLICT, ErrorCode::IdempotencyInFlight);
            assert_eq!(retry.body["retry_after_ms"], 1000, "{path}: {}", retry.text);
            assert_eq!(app.probe_items(name).await, 1, "{path}: executed once");
        }
    })
    .await;
}

/// A deferred constraint trigger on the probe table that runs at COMMIT: for rows labelled
/// `refused-at-commit` it raises (the COMMIT fails on its own), for `lost-at-commit` it sleeps
/// so the test can end the backend in the middle of the COMMIT.
async fn trigger_at_commit(pool: &PgPool) {
    for statement in [
        "create or replace function probe_at_commit() returns trigger language plpgsql as $$
         begin
           if new.label = 'refused-at-commit' then
             raise exception 'refused at commit' using errcode = 'P0001';
           elsif new.label = 'lost-at-commit' then
             perform pg_sleep(30);
           end if;
           return null;
         end $$",
        "create constraint trigger probe_at_commit after insert on probe_items
         deferrable initially deferred for each row execute function probe_at_commit()",
    ] {
        sqlx::query(statement)
            .execute(pool)
            .await
            .expect("commit trigger");
    }
}

/// A COMMIT that fails for another reason than a lost connection (here a deferred constraint
/// the business writes break): nothing committed, the answer is `500 internal` as JSON, and the
/// key fails, so a retry with it is refused rather than run.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_commit_that_fails_fails_the_key(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        trigger_at_commit(&app.pool).await;
        let (_, token) = app.user("commit-refused@example.com").await;
        let key = Uuid::new_v4();
        let body = label("refused-at-commit");
        let failed = app.post("/probe/items", &token, key, &body).await;
        assert_problem(
            &failed,
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
        );
        assert_eq!(failed.header("idempotent-replayed"), Some("false"));
        assert_eq!(app.probe_items("refused-at-commit").await, 0);
        assert_eq!(app.key_status(key).await.as_deref(), Some("failed"));
        let retry = app.post("/probe/items", &token, key, &body).await;
        assert_problem(
            &retry,
            StatusCode::CONFLICT,
            ErrorCode::IdempotencyPreviousFailed,
        );
    })
    .await;
}

/// The connection is lost during the COMMIT (the backend is ended while the COMMIT runs, as when
/// Postgres restarts): its outcome is unknown to the service, so it releases the key (fenced on
/// `in_flight`, a no-op had the COMMIT landed) and answers `503` with `Retry-After`. Here the
/// COMMIT did not land, so the retry with the same key executes, once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_commit_whose_connection_is_lost_releases_the_key(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        trigger_at_commit(&app.pool).await;
        let (_, token) = app.user("commit-lost@example.com").await;
        let key = Uuid::new_v4();
        let body = label("lost-at-commit");
        let call = Call::new(Method::POST, "/probe/items")
            .token(&token)
            .key(key)
            .json(&body);
        let attempt = tokio::spawn(send(app.router.clone(), call));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ended: Option<bool> = sqlx::query_scalar(
                "select pg_terminate_backend(pid) from pg_stat_activity
                  where datname = current_database() and query = 'COMMIT'
                    and state = 'active' and wait_event = 'PgSleep'",
            )
            .fetch_optional(&app.pool)
            .await
            .expect("pg_stat_activity");
            if ended == Some(true) {
                break;
            }
            assert!(Instant::now() < deadline, "the COMMIT never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let lost = attempt.await.expect("join");
        assert_problem(
            &lost,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IdempotencyStoreUnavailable,
        );
        assert!(lost.header("retry-after").is_some(), "{}", lost.text);
        assert_eq!(app.probe_items("lost-at-commit").await, 0);
        assert_eq!(app.key_status(key).await.as_deref(), Some("released"));
        sqlx::query("drop trigger probe_at_commit on probe_items")
            .execute(&app.pool)
            .await
            .expect("drop trigger");
        let retry = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(retry.header("idempotent-replayed"), Some("false"));
        assert_eq!(app.probe_items("lost-at-commit").await, 1, "executed once");
    })
    .await;
}

/// The claim statement itself fails with an error that is neither a lock wait nor a lost
/// connection (here a trigger on the key table raises): the store answered but could not claim,
/// so the answer is `503 idempotency_store_unavailable` with `Retry-After`, not "in flight",
/// and nothing runs, on both tiers.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_claim_statement_that_fails_is_store_unavailable(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("claim-fails@example.com").await;
        for statement in [
            "create function refuse_claims() returns trigger language plpgsql as
             $$ begin raise exception 'no claims today' using errcode = 'P0001'; end $$",
            "create trigger refuse_claims before insert on idempotency_keys
             for each row execute function refuse_claims()",
        ] {
            sqlx::query(statement)
                .execute(&app.pool)
                .await
                .expect("trigger");
        }
        for (path, name) in [
            ("/probe/items", "claim-closed"),
            ("/probe/open", "claim-open"),
        ] {
            let refused = app.post(path, &token, Uuid::new_v4(), &label(name)).await;
            assert_problem(
                &refused,
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::IdempotencyStoreUnavailable,
            );
            assert!(refused.header("retry-after").is_some(), "{path}");
            assert_eq!(app.probe_items(name).await, 0, "{path}: nothing ran");
        }
    })
    .await;
}
