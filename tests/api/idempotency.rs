//! The Idempotency-Key mechanism (docs/idempotency.md), through HTTP on the probe routes.

use raptor_api::codes::ErrorCode;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::helpers::{
    assert_problem, label, post_http, post_http_with, send, Call, Options, Order, TestApp,
    IDEMPOTENCY_FLAG,
};
use crate::probe::{FORGE_HEADER, SLEEP_HEADER, SQLSTATE_HEADER, UNAVAILABLE_HEADER};

/// A stale threshold of one second.
fn fast_stale() -> Options {
    Options::default().stale_after(Duration::from_secs(1))
}

/// 64 concurrent duplicates against a real server, 20 rounds: each round executes exactly once,
/// the others replay it or are `409 idempotency_in_flight`, and a later retry replays it.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn concurrent_duplicates_execute_exactly_once(pool: PgPool) {
    let options = Options {
        pool_size: 24,
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("racer@example.com").await;
        let server = app.spawn().await;
        for round in 0..20 {
            let key = Uuid::new_v4();
            let label = format!("round-{round}");
            let body = json!({ "label": label });
            let mut set = JoinSet::new();
            for _ in 0..64 {
                set.spawn(post_http_with(
                    server.client.clone(),
                    server.url("/probe/items"),
                    token.clone(),
                    Some(key),
                    body.clone(),
                    vec![(SLEEP_HEADER, "25".to_owned())],
                ));
            }
            let (mut fresh, mut replays, mut in_flight) = (Vec::new(), 0, 0);
            while let Some(response) = set.join_next().await {
                let response = response.expect("join");
                assert!(!response.status.is_server_error(), "5xx: {}", response.text);
                match (response.status, response.header("idempotent-replayed")) {
                    (StatusCode::CREATED, Some("false")) => fresh.push(response),
                    (StatusCode::CREATED, Some("true")) => {
                        assert_eq!(response.body["idempotency_replayed"], true);
                        replays += 1;
                    }
                    (StatusCode::CONFLICT, _) => {
                        assert_problem(
                            &response,
                            StatusCode::CONFLICT,
                            ErrorCode::IdempotencyInFlight,
                        );
                        assert_eq!(response.header("retry-after"), Some("5"));
                        in_flight += 1;
                    }
                    other => panic!("unexpected answer {other:?}: {}", response.text),
                }
            }
            assert_eq!(fresh.len(), 1, "round {round}: exactly one execution");
            assert_eq!(1 + replays + in_flight, 64);
            assert_eq!(
                app.probe_items(&label).await,
                1,
                "round {round}: one business row"
            );
            let audited = app
                .count_where(
                    "select count(*) from audit_log \
                     where action = 'probe.created' and context->>'label' = $1",
                    &label,
                )
                .await;
            assert_eq!(audited, 1, "round {round}: one business audit row");
            // A later retry replays the one execution.
            let later = server.post("/probe/items", &token, key, &body).await;
            assert_eq!(later.status, StatusCode::CREATED);
            assert_eq!(later.body_without_marker(), fresh[0].body);
        }
        server.stop().await;
    })
    .await;
}

/// A key is scoped to its principal and route, and bound to its request: another body, or
/// another concrete path of the route, is a mismatch (key order and whitespace do not count);
/// another user or route executes anew; service principals share one scope.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn scope_and_fingerprint(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, alice) = app.user("alice@example.com").await;
        let (_, bob) = app.user("bob@example.com").await;
        let key = Uuid::new_v4();
        let body = label("a");

        let first = app.post("/probe/items", &alice, key, &body).await;
        assert_eq!(first.status, StatusCode::CREATED);

        let other_body = app.post("/probe/items", &alice, key, &label("b")).await;
        assert_problem(
            &other_body,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::IdempotencyKeyBodyMismatch,
        );

        // Same key and body on two concrete paths of one route template: a mismatch, not a replay.
        let slot_key = Uuid::new_v4();
        let slot_a = app.post("/probe/items/AAPL", &alice, slot_key, &body).await;
        assert_eq!(slot_a.status, StatusCode::CREATED);
        let slot_b = app.post("/probe/items/MSFT", &alice, slot_key, &body).await;
        assert_problem(
            &slot_b,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::IdempotencyKeyBodyMismatch,
        );

        // Key order and whitespace in the body do not matter.
        let reordered = app
            .send(
                Call::new(Method::POST, "/probe/items")
                    .token(&alice)
                    .key(key)
                    .raw(br#"{ "label" :  "a" }"#.to_vec(), Some("application/json")),
            )
            .await;
        assert_eq!(reordered.header("idempotent-replayed"), Some("true"));

        let by_bob = app.post("/probe/items", &bob, key, &body).await;
        assert_eq!(by_bob.status, StatusCode::CREATED);
        assert_eq!(by_bob.header("idempotent-replayed"), Some("false"));

        let other_route = app.post("/probe/other", &alice, key, &body).await;
        assert_eq!(other_route.status, StatusCode::CREATED);
        assert_eq!(other_route.header("idempotent-replayed"), Some("false"));

        // Two service principals (scope_user_id NULL) with one key: one execution.
        let svc_a = app.service_token("billing-sync").await;
        let svc_b = app.service_token("ops-tool").await;
        let service_key = Uuid::new_v4();
        let s1 = app
            .post("/probe/items", &svc_a, service_key, &label("svc"))
            .await;
        let s2 = app
            .post("/probe/items", &svc_b, service_key, &label("svc"))
            .await;
        assert_eq!(s1.header("idempotent-replayed"), Some("false"));
        assert_eq!(s2.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.probe_items("svc").await, 1);

        assert_eq!(
            app.probe_items("a").await,
            4,
            "alice, slot AAPL, bob, other route"
        );
        assert_eq!(app.probe_items("b").await, 0);
    })
    .await;
}

/// A replay returns the stored response (status, body, `Location`), marked and audited; a
/// business rejection is stored and replayed too.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn replay_returns_the_stored_response(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("r@example.com").await;
        let key = Uuid::new_v4();
        let body = label("replayed");
        let original = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(original.status, StatusCode::CREATED);
        assert_eq!(original.header("idempotent-replayed"), Some("false"));
        let location = original.header("location").expect("location").to_owned();

        let replay = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.header("location"), Some(location.as_str()));
        assert_eq!(replay.header("content-type"), Some("application/json"));
        assert_eq!(replay.body["idempotency_replayed"], true);
        assert_eq!(replay.body_without_marker(), original.body);
        assert_eq!(app.probe_items("replayed").await, 1);
        assert_eq!(app.audit_count("probe.created").await, 1);
        assert_eq!(app.audit_count("idempotency_replay").await, 1);
        let context: Value = app
            .scalar("select context from audit_log where action = 'idempotency_replay'")
            .await;
        assert_eq!(context["response_code"], 201);
        assert!(context["idempotency_key_id"].is_i64());
        assert_eq!(context["request_hash"].as_str().map(str::len), Some(64));

        // A business rejection (403) is completed and replays as 403.
        let reject_key = Uuid::new_v4();
        let reject = json!({ "label": "no", "outcome": "reject" });
        let rejected = app.post("/probe/items", &token, reject_key, &reject).await;
        assert_problem(
            &rejected,
            StatusCode::FORBIDDEN,
            ErrorCode::InsufficientBuyingPower,
        );
        assert_eq!(
            app.key_status(reject_key).await.as_deref(),
            Some("completed")
        );
        let again = app.post("/probe/items", &token, reject_key, &reject).await;
        assert_eq!(again.status, StatusCode::FORBIDDEN);
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(again.body_without_marker(), rejected.body_without_marker());
        assert_eq!(app.audit_count("probe.rejected").await, 1);
    })
    .await;
}

/// A key row is always in one of its four states: the database refuses any other status (the
/// `idempotency_key_status` domain), so no statement can leave a key in a state the claim
/// does not know.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_key_row_takes_only_the_four_states(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("states@example.com").await;
        let key = Uuid::new_v4();
        let created = app
            .post("/probe/items", &token, key, &label("states"))
            .await;
        assert_eq!(created.status, StatusCode::CREATED);
        for status in ["in_flight", "failed", "released", "completed"] {
            sqlx::query("update idempotency_keys set status = $1 where idem_key = $2")
                .bind(status)
                .bind(key.to_string())
                .execute(&app.pool)
                .await
                .unwrap_or_else(|err| panic!("{status}: {err}"));
        }
        for status in ["complete", "done", ""] {
            let refused =
                sqlx::query("update idempotency_keys set status = $1 where idem_key = $2")
                    .bind(status)
                    .bind(key.to_string())
                    .execute(&app.pool)
                    .await
                    .expect_err("an unknown status is refused");
            let refused = refused.as_database_error().expect("a database error");
            assert_eq!(
                refused.code().as_deref(),
                Some("23514"),
                "{status}: {refused}"
            );
            assert_eq!(refused.constraint(), Some("idempotency_key_status_check"));
        }
        assert_eq!(app.key_status(key).await.as_deref(), Some("completed"));
    })
    .await;
}

/// A handler held past the stale threshold is fenced off: a duplicate releases it, the next
/// retry executes, and exactly one execution commits.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn stale_attempt_is_fenced_off(pool: PgPool) {
    TestApp::run(&pool, fast_stale(), async |app| {
        assert_fenced_off(app, "/probe/items", "fenced").await;
        assert_eq!(app.audit_count("probe.created").await, 1);
    })
    .await;
}

/// The same when the handler's own statement writes the completion: the stale attempt's
/// statement completes nothing, and the whole transaction rolls back.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn stale_attempt_completing_in_its_own_statement_is_fenced_off(pool: PgPool) {
    TestApp::run(&pool, fast_stale(), async |app| {
        assert_fenced_off(app, "/probe/inline", "fenced-inline").await;
    })
    .await;
}

/// An attempt on `path` sleeps past the 1 s stale threshold; a duplicate releases it, a retry
/// executes, the first is answered 409 with nothing committed, and the retry replays.
async fn assert_fenced_off(app: &TestApp, path: &str, name: &str) {
    let (_, token) = app.user(&format!("{name}@example.com")).await;
    let key = Uuid::new_v4();
    let body = label(name);
    let router = app.router.clone();
    let call = Call::new(Method::POST, path)
        .token(&token)
        .key(key)
        .header(SLEEP_HEADER, "1800")
        .json(&body);
    let first = tokio::spawn(send(router, call));

    // Past the 1 s threshold the duplicate releases the abandoned (still running) attempt...
    let releaser = release_after_threshold(app, path, &token, key, &body).await;
    assert_eq!(releaser.header("retry-after"), Some("0"));

    // ...and the next retry claims it and executes while the first still sleeps.
    let third = app.post(path, &token, key, &body).await;
    let first = first.await.expect("join");
    assert_eq!(
        first.status,
        StatusCode::CONFLICT,
        "fenced attempt: {}",
        first.text
    );
    assert_eq!(third.status, StatusCode::CREATED, "{}", third.text);
    assert_eq!(third.header("idempotent-replayed"), Some("false"));
    assert_eq!(
        app.probe_items(name).await,
        1,
        "exactly one execution committed"
    );
    let replay = app.post(path, &token, key, &body).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.body_without_marker(), third.body);
}

/// Waits past the 1 s stale threshold, then sends a duplicate of `key`, which must release the
/// abandoned attempt: 409 in flight, "retry now" (`retry_after_ms` 0).
async fn release_after_threshold(
    app: &TestApp,
    path: &str,
    token: &str,
    key: Uuid,
    body: &Value,
) -> crate::helpers::TestResponse {
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let releaser = app.post(path, token, key, body).await;
    assert_problem(
        &releaser,
        StatusCode::CONFLICT,
        ErrorCode::IdempotencyInFlight,
    );
    assert_eq!(releaser.body["retry_after_ms"], 0);
    releaser
}

/// The fence itself: the stale attempt resumes while its successor still holds the key
/// in flight (the model's `no-fence` counterexample). Its completion must match nothing, even
/// though the row is `in_flight` again: only the attempt token tells the two apart. The stale
/// attempt is answered 409 with nothing committed; the successor's answer is the one stored.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_stale_attempt_never_completes_its_successors_claim(pool: PgPool) {
    TestApp::run(&pool, fast_stale(), async |app| {
        for (path, name) in [("/probe/items", "succ"), ("/probe/inline", "succ-inline")] {
            assert_successor_keeps_the_key(app, path, name).await;
        }
    })
    .await;
}

/// An attempt on `path` sleeps past the 1 s threshold; a duplicate releases it; a successor
/// claims the key and sleeps longer, so it is still in flight when the first wakes.
async fn assert_successor_keeps_the_key(app: &TestApp, path: &str, name: &str) {
    let (_, token) = app.user(&format!("{name}@example.com")).await;
    let key = Uuid::new_v4();
    let body = label(name);
    let slow = |sleep_ms: &str| {
        Call::new(Method::POST, path)
            .token(&token)
            .key(key)
            .header(SLEEP_HEADER, sleep_ms)
            .json(&body)
    };
    let first = tokio::spawn(send(app.router.clone(), slow("2500")));
    release_after_threshold(app, path, &token, key, &body).await;
    // The successor claims the released row and is still sleeping when the first wakes (at
    // 2.5 s) and reaches its completion.
    let successor = tokio::spawn(send(app.router.clone(), slow("2500")));
    let first = first.await.expect("join");
    assert_eq!(
        app.key_status(key).await.as_deref(),
        Some("in_flight"),
        "the successor still holds the key"
    );
    let successor = successor.await.expect("join");
    assert_eq!(
        first.status,
        StatusCode::CONFLICT,
        "the stale attempt completed its successor's claim: {}",
        first.text
    );
    assert_eq!(successor.status, StatusCode::CREATED, "{}", successor.text);
    assert_eq!(app.probe_items(name).await, 1, "exactly one execution");
    let replay = app.post(path, &token, key, &body).await;
    assert_eq!(replay.status, StatusCode::CREATED, "{}", replay.text);
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    assert_eq!(replay.body_without_marker(), successor.body);
}

/// A 500 rolls back and marks the key failed, so a retry is refused; a panic too.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn server_errors_roll_back_and_fail_the_key(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("f@example.com").await;
        let key = Uuid::new_v4();
        let body = json!({ "label": "doomed", "outcome": "fail" });
        let failed = app.post("/probe/items", &token, key, &body).await;
        assert_problem(
            &failed,
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
        );
        assert!(
            !failed.text.contains("forced failure"),
            "internal details leaked: {}",
            failed.text
        );
        assert_eq!(app.probe_items("doomed").await, 0);
        assert_eq!(app.audit_count("probe.created").await, 0);
        assert_eq!(app.key_status(key).await.as_deref(), Some("failed"));
        let retry = app.post("/probe/items", &token, key, &body).await;
        assert_problem(
            &retry,
            StatusCode::CONFLICT,
            ErrorCode::IdempotencyPreviousFailed,
        );

        let panic_key = Uuid::new_v4();
        let panicked = app
            .post(
                "/probe/items",
                &token,
                panic_key,
                &json!({ "label": "boom", "outcome": "panic" }),
            )
            .await;
        assert_problem(
            &panicked,
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
        );
        assert_eq!(app.probe_items("boom").await, 0);
        // The panic path settles the key from the claim's drop guard, asynchronously.
        app.wait_for_key_status(panic_key, "failed", Duration::from_secs(3))
            .await;
    })
    .await;
}

/// The kill switch, flipped at run time by an operator, reaches another process within a
/// second; while it is off, requests pass through untracked.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn kill_switch_flips_at_run_time(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let other_process = app.replica(Options::default()).await;
        let (_, operator) = app.operator("ops@example.com").await;
        let (_, token) = app.user("u@example.com").await;

        let user_try = app.set_flag(&token, IDEMPOTENCY_FLAG, false).await;
        assert_eq!(user_try.status, StatusCode::FORBIDDEN);
        // Prime the other process's cache with "on".
        let primed = other_process
            .post("/probe/items", &token, Uuid::new_v4(), &label("prime"))
            .await;
        assert_eq!(primed.header("idempotent-replayed"), Some("false"));

        let off = app.set_flag(&operator, IDEMPOTENCY_FLAG, false).await;
        assert_eq!(off.status, StatusCode::OK, "{}", off.text);
        assert_eq!(off.body["enabled"], false);
        let key = Uuid::new_v4();
        for _ in 0..2 {
            let r = app.post("/probe/items", &token, key, &label("twice")).await;
            assert_eq!(r.status, StatusCode::CREATED);
            assert!(
                r.header("idempotent-replayed").is_none(),
                "passthrough carries no marker"
            );
        }
        assert_eq!(app.probe_items("twice").await, 2);
        assert_eq!(
            app.key_status(key).await,
            None,
            "passthrough writes no key row"
        );

        tokio::time::sleep(Duration::from_millis(1000)).await;
        let elsewhere_key = Uuid::new_v4();
        for _ in 0..2 {
            other_process
                .post("/probe/items", &token, elsewhere_key, &label("elsewhere"))
                .await;
        }
        assert_eq!(
            app.probe_items("elsewhere").await,
            2,
            "the other process saw the flip within a second"
        );

        let on = app.set_flag(&operator, IDEMPOTENCY_FLAG, true).await;
        assert_eq!(on.status, StatusCode::OK);
        let key = Uuid::new_v4();
        let a = app.post("/probe/items", &token, key, &label("once")).await;
        let b = app.post("/probe/items", &token, key, &label("once")).await;
        assert_eq!(a.header("idempotent-replayed"), Some("false"));
        assert_eq!(b.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.probe_items("once").await, 1);

        let unknown = app.set_flag(&operator, "NOPE", true).await;
        assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    })
    .await;
}

/// A kill-switch flip whose transaction does not commit is not applied, even locally.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_flag_flip_that_rolls_back_is_not_applied(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, operator) = app.operator("ops@example.com").await;
        // The audit write of the flip fails, so its transaction rolls back.
        let mut blocker = pool.begin().await.expect("begin");
        sqlx::query(
            "create function no_flag_audit() returns trigger language plpgsql as
         $$ begin if new.action = 'flag.set' then raise exception 'audit refused'; end if;
                   return new; end $$",
        )
        .execute(&mut *blocker)
        .await
        .expect("function");
        sqlx::query(
            "create trigger no_flag_audit before insert on audit_log
         for each row execute function no_flag_audit()",
        )
        .execute(&mut *blocker)
        .await
        .expect("trigger");
        blocker.commit().await.expect("commit");
        let flip = app.set_flag(&operator, IDEMPOTENCY_FLAG, false).await;
        assert_eq!(
            flip.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{}",
            flip.text
        );
        assert!(app.state.idempotency.enabled().await, "not applied locally");
        assert_eq!(app.count("select count(*) from feature_flags").await, 0);
    })
    .await;
}

/// Malformed keys are refused before anything is written; a quoted or upper-case UUID is
/// accepted and stored lower-case.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn malformed_keys_are_refused(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("k@example.com").await;
        let long = "a".repeat(300);
        let body = label("never");
        let bad: Vec<Vec<String>> = vec![
            vec![String::new()],
            vec!["all".into()],
            vec![long],
            vec!["not-a-uuid-at-all-not-a-uuid-at-all!".into()],
            vec!["6f9619ff8b86d011b42d00c04fc964ff".into()],
            vec!["\"definitely-not-a-uuid\"".into()],
            vec![Uuid::new_v4().to_string(), Uuid::new_v4().to_string()],
        ];
        for keys in bad {
            let mut call = Call::new(Method::POST, "/probe/items")
                .token(&token)
                .json(&body);
            for key in &keys {
                call = call.key(key);
            }
            let response = app.send(call).await;
            assert_problem(
                &response,
                StatusCode::BAD_REQUEST,
                ErrorCode::IdempotencyKeyInvalid,
            );
        }
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
        assert_eq!(app.probe_items("never").await, 0);

        // Accepted forms: quoted sf-string, upper case; stored lower-case.
        let key = Uuid::new_v4();
        let quoted = app
            .send(
                Call::new(Method::POST, "/probe/items")
                    .token(&token)
                    .key(format!("\"{}\"", key.to_string().to_uppercase()))
                    .json(&label("quoted")),
            )
            .await;
        assert_eq!(quoted.status, StatusCode::CREATED);
        assert_eq!(app.key_status(key).await.as_deref(), Some("completed"));
    })
    .await;
}

/// A malformed key is 400 even while the kill switch is off.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn malformed_key_is_refused_with_the_kill_switch_off(pool: PgPool) {
    let mut options = Options::default();
    options.idempotency.flag_default = false;
    TestApp::run(&pool, options, async |app| {
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
            assert_problem(
                &answer,
                StatusCode::BAD_REQUEST,
                ErrorCode::IdempotencyKeyInvalid,
            );
        }
    })
    .await;
}

/// Cleanup deletes exactly the expired rows, in batches, while requests run.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cleanup_removes_exactly_the_expired_rows(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("c@example.com").await;
        app.execute_where(
            "insert into idempotency_keys
                (idem_key, scope_user_id, scope_endpoint, request_hash, status, attempt, expires_at)
             select gen_random_uuid()::text, $1, 'POST /probe/items', 'h',
                    (array['completed','failed','in_flight'])[1 + i % 3], gen_random_uuid(),
                    case when i <= 45 then now() - interval '1 minute'
                         else now() + interval '1 day' end
               from generate_series(1, 60) as i",
            user_id,
        )
        .await;

        let server = app.spawn().await;
        let mut set = JoinSet::new();
        for i in 0..20 {
            set.spawn(post_http(
                server.client.clone(),
                server.url("/probe/items"),
                token.clone(),
                Some(Uuid::new_v4()),
                json!({ "label": format!("live-{i}") }),
            ));
        }
        let deleted = raptor_idempotency::cleanup::delete_expired(&app.pool, 7)
            .await
            .expect("cleanup");
        while let Some(response) = set.join_next().await {
            assert_eq!(response.expect("join").status, StatusCode::CREATED);
        }
        assert_eq!(deleted, 45);
        assert_eq!(
            app.count("select count(*) from idempotency_keys where expires_at < now()")
                .await,
            0
        );
        assert_eq!(
            app.count("select count(*) from idempotency_keys").await,
            15 + 20
        );
        server.stop().await;
    })
    .await;
}

/// An expired row is treated as absent: the same key executes again.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn expired_key_is_claimed_anew(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("e@example.com").await;
        let key = Uuid::new_v4();
        let body = label("again");
        assert_eq!(
            app.post("/probe/items", &token, key, &body).await.status,
            StatusCode::CREATED
        );
        app.expire_keys().await;
        let second = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(second.header("idempotent-replayed"), Some("false"));
        assert_eq!(app.probe_items("again").await, 2);
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 1);
    })
    .await;
}

/// A process killed while its handler holds the claim leaves no business rows; after the stale
/// threshold the key executes exactly once (the killed process is `crash_child_server`).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn crashed_process_leaves_nothing_and_the_key_executes_once(pool: PgPool) {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};

    TestApp::run(&pool, fast_stale(), async |app| {
        let (_, token) = app.user("crash@example.com").await;
        let url = crate::helpers::database_url(&pool);
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "idempotency::crash_child_server",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("RAPTOR_CRASH_CHILD_DATABASE_URL", &url)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child server");
        let stdout = child.stdout.take().expect("stdout");
        let port = tokio::task::spawn_blocking(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .find_map(|line| line.split("LISTENING ").nth(1).map(|p| p.trim().to_owned()))
        })
        .await
        .expect("join")
        .expect("child printed its port");

        let key = Uuid::new_v4();
        let body = label("crash");
        let doomed = tokio::spawn(post_http_with(
            reqwest::Client::new(),
            format!("http://127.0.0.1:{port}/probe/items"),
            token.clone(),
            Some(key),
            body.clone(),
            vec![(SLEEP_HEADER, "60000".to_owned())],
        ));
        // Wait until the child holds the claim and has written (uncommitted) its business row.
        let deadline = Instant::now() + Duration::from_secs(10);
        while app.key_status(key).await.as_deref() != Some("in_flight") {
            assert!(Instant::now() < deadline, "child never claimed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        child.kill().expect("kill -9");
        child.wait().expect("reap");
        doomed.abort();

        assert_eq!(
            app.probe_items("crash").await,
            0,
            "the killed attempt left no business rows"
        );
        let early = app.post("/probe/items", &token, key, &body).await;
        assert_problem(&early, StatusCode::CONFLICT, ErrorCode::IdempotencyInFlight);
        assert_eq!(early.body["retry_after_ms"], 5000);

        tokio::time::sleep(Duration::from_millis(1100)).await;
        let released = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(released.status, StatusCode::CONFLICT, "{}", released.text);
        assert_eq!(released.body["retry_after_ms"], 0);
        let executed = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(executed.status, StatusCode::CREATED, "{}", executed.text);
        assert_eq!(executed.header("idempotent-replayed"), Some("false"));
        let replayed = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.probe_items("crash").await, 1, "exactly one execution");
    })
    .await;
}

/// Child half of the crash test: serves the probe routes until killed. Runs only when the
/// parent sets RAPTOR_CRASH_CHILD_DATABASE_URL.
#[tokio::test]
#[ignore = "spawned by crashed_process_leaves_nothing_and_the_key_executes_once"]
async fn crash_child_server() {
    let Ok(url) = std::env::var("RAPTOR_CRASH_CHILD_DATABASE_URL") else {
        return;
    };
    let pool = PgPool::connect(&url).await.expect("child pool");
    TestApp::run(&pool, Options::default(), async |app| {
        let server = app.spawn().await;
        println!("LISTENING {}", server.addr.port());
        tokio::time::sleep(Duration::from_secs(120)).await;
        server.stop().await;
    })
    .await;
}

/// Per-route options: required key, body not stored, TTL.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn route_options_required_key_and_unstored_body(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("strict@example.com").await;
        let body = label("private");
        let missing = app.post("/probe/strict", &token, None, &body).await;
        assert_problem(
            &missing,
            StatusCode::BAD_REQUEST,
            ErrorCode::IdempotencyKeyRequired,
        );
        assert_eq!(app.probe_items("private").await, 0);

        let key = Uuid::new_v4();
        let first = app.post("/probe/strict", &token, key, &body).await;
        assert_eq!(first.status, StatusCode::CREATED);
        assert_eq!(first.body["label"], "private");
        let stored: (Option<Value>, i16, f64) = sqlx::query_as(
            "select response_body, response_code,
                extract(epoch from expires_at - created_at)::float8 from idempotency_keys",
        )
        .fetch_one(&app.pool)
        .await
        .expect("key row");
        assert_eq!(stored.0, None, "body not stored");
        assert_eq!(stored.1, 201);
        assert!(
            (stored.2 - 60.0).abs() < 1.0,
            "TTL from the policy: {}",
            stored.2
        );

        let replay = app.post("/probe/strict", &token, key, &body).await;
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.header("location"), first.header("location"));
        assert_eq!(
            replay.body,
            json!({ "body_stored": false, "idempotency_replayed": true })
        );
        assert_eq!(app.probe_items("private").await, 1, "never re-executed");
    })
    .await;
}

/// Outcomes are counted in `raptor_idempotency_requests_total`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn outcomes_are_counted(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("metrics@example.com").await;
        let key = Uuid::new_v4();
        app.post("/probe/other", &token, key, &label("m")).await;
        app.post("/probe/other", &token, key, &label("m")).await;
        app.post("/probe/other", &token, key, &label("n")).await;
        app.send(
            Call::new(Method::POST, "/probe/other")
                .token(&token)
                .key("nope")
                .json(&label("m")),
        )
        .await;
        let metrics = app.metrics().await;
        for outcome in ["miss", "replay", "mismatch", "invalid_key"] {
            let needle = format!("endpoint=\"POST /probe/other\",outcome=\"{outcome}\"");
            assert!(
                metrics.contains(&needle),
                "{needle} missing from:\n{metrics}"
            );
        }
        assert!(metrics.contains("raptor_http_request_duration_seconds_bucket"));
        assert!(metrics.contains("raptor_idempotency_claim_to_completion_seconds"));
    })
    .await;
}

/// The optional in-process cleanup schedule deletes expired keys.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cleanup_schedule_runs_in_process(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("sched@example.com").await;
        app.post("/probe/items", &token, Uuid::new_v4(), &label("old"))
            .await;
        app.post("/probe/items", &token, Uuid::new_v4(), &label("new"))
            .await;
        app.execute(
            "update idempotency_keys set expires_at = now() - interval '1 second' \
             where id = (select min(id) from idempotency_keys)",
        )
        .await;
        let task = raptor_server::spawn_cleanup(app.pool.clone(), Duration::from_millis(50));
        let deadline = Instant::now() + Duration::from_secs(3);
        while app.count("select count(*) from idempotency_keys").await != 1 {
            assert!(
                Instant::now() < deadline,
                "schedule never deleted the expired key"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        task.abort();
    })
    .await;
}

/// A slow replay audit write never turns a replay into a 503 (and never into a re-execution on
/// a fail-open route).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn slow_replay_audit_still_replays(pool: PgPool) {
    let options = Options::default().store_timeout(Duration::from_millis(300));
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("audit@example.com").await;
        let (closed_key, open_key) = (Uuid::new_v4(), Uuid::new_v4());
        let body = label("once");
        app.post("/probe/items", &token, closed_key, &body).await;
        app.post("/probe/open", &token, open_key, &body).await;

        let mut locker = pool.begin().await.expect("begin");
        sqlx::query("lock table audit_log in exclusive mode")
            .execute(&mut *locker)
            .await
            .expect("lock");
        let closed = app.post("/probe/items", &token, closed_key, &body).await;
        let open = app.post("/probe/open", &token, open_key, &body).await;
        locker.rollback().await.expect("unlock");
        assert_eq!(closed.status, StatusCode::CREATED, "{}", closed.text);
        assert_eq!(closed.header("idempotent-replayed"), Some("true"));
        assert_eq!(open.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.probe_items("once").await, 2, "no re-execution");
    })
    .await;
}

/// A store timeout of 400 ms.
fn short_store_timeout() -> Options {
    Options::default().store_timeout(Duration::from_millis(400))
}

/// A key whose row is locked by a slow completing original (held here past the store timeout)
/// is `409 idempotency_in_flight` on both tiers: the fail-open tier never runs it a second time.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn locked_key_row_is_in_flight_on_every_tier(pool: PgPool) {
    TestApp::run(&pool, short_store_timeout(), async |app| {
        let (_, token) = app.user("slow@example.com").await;
        for (path, label) in [
            ("/probe/open", "open-once"),
            ("/probe/items", "closed-once"),
        ] {
            let key = Uuid::new_v4();
            let body = json!({ "label": label });
            let first = app.post(path, &token, key, &body).await;
            assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);

            // The original's completing transaction holds the key row's lock.
            let original = app.lock_key_row(key).await;
            let started = Instant::now();
            let retry = app.post(path, &token, key, &body).await;
            let took = started.elapsed();
            original.rollback().await.expect("unlock");

            assert_problem(&retry, StatusCode::CONFLICT, ErrorCode::IdempotencyInFlight);
            assert!(retry.header("retry-after").is_some());
            assert!(
                took < Duration::from_millis(1500),
                "answered after {took:?}"
            );
            assert_eq!(
                app.probe_items(label).await,
                1,
                "{path}: the handler ran once"
            );

            // Once the lock is gone, the retry replays.
            let replay = app.post(path, &token, key, &body).await;
            assert_eq!(replay.header("idempotent-replayed"), Some("true"));
            assert_eq!(app.probe_items(label).await, 1);
        }
    })
    .await;
}

/// Only a store that cannot be reached at all sends a fail-open route on without dedup; the
/// fail-closed route refuses. The outcome is counted.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn unreachable_store_fails_open_and_closed(pool: PgPool) {
    let options = Options {
        unreachable_store: true,
        ..short_store_timeout()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("down@example.com").await;
        let open = app
            .post("/probe/open", &token, Uuid::new_v4(), &label("ran-open"))
            .await;
        assert_eq!(open.status, StatusCode::CREATED, "{}", open.text);
        assert_eq!(open.body["lineage"], Value::Null, "untracked: no key row");
        let closed = app
            .post("/probe/items", &token, Uuid::new_v4(), &label("ran-closed"))
            .await;
        assert_problem(
            &closed,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IdempotencyStoreUnavailable,
        );
        assert_eq!(app.probe_items("ran-open").await, 1);
        assert_eq!(app.probe_items("ran-closed").await, 0);
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 0);
        let metrics = app.metrics().await;
        assert!(
            metrics.contains(r#"endpoint="POST /probe/open",outcome="fail_open""#),
            "{metrics}"
        );
    })
    .await;
}

/// A key's lineage (the seed of downstream dedup ids) survives a released attempt and changes
/// when the key is reused after it expired.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn lineage_survives_release_and_changes_after_expiry(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("lineage@example.com").await;
        let key = Uuid::new_v4();
        let body = label("lineage");

        // A client that gives up mid-handler: the request is cancelled, the key released.
        let call = Call::new(Method::POST, "/probe/items")
            .token(&token)
            .key(key)
            .json(&body)
            .header(SLEEP_HEADER, "5000");
        let cancelled = tokio::time::timeout(Duration::from_millis(300), app.send(call)).await;
        assert!(cancelled.is_err(), "the slow attempt was cancelled");
        app.wait_for_key_status(key, "released", Duration::from_secs(3))
            .await;
        let released = app.lineage().await;

        let retry = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(retry.header("idempotent-replayed"), Some("false"));
        assert_eq!(
            retry.body["lineage"],
            json!(released),
            "same lineage after release"
        );
        assert_eq!(
            app.probe_items("lineage").await,
            1,
            "the cancelled attempt rolled back"
        );

        app.expire_keys().await;
        let reused = app.post("/probe/items", &token, key, &body).await;
        assert_eq!(reused.status, StatusCode::CREATED);
        assert_ne!(
            reused.body["lineage"],
            json!(released),
            "a new lifetime, a new lineage"
        );
        assert_ne!(reused.body["lineage"], Value::Null);
        assert_eq!(app.count("select count(*) from idempotency_keys").await, 1);
    })
    .await;
}

/// A 503 that tells the client to retry rolled everything back, so it releases the key: the
/// retry the client was told to make executes (once), instead of `idempotency_previous_failed`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn retryable_503_releases_the_key(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("retry503@example.com").await;
        let key = Uuid::new_v4();
        let body = label("after-503");
        let call = || {
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(key)
                .json(&body)
        };
        let unavailable = app.send(call().header(UNAVAILABLE_HEADER, "1")).await;
        assert_problem(
            &unavailable,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::DatabaseUnavailable,
        );
        assert!(unavailable.header("retry-after").is_some());
        assert_eq!(app.probe_items("after-503").await, 0, "rolled back");
        assert_eq!(app.key_status(key).await.as_deref(), Some("released"));

        // The retry the client was told to make executes, once; its retry replays.
        let retry = app.send(call()).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(retry.header("idempotent-replayed"), Some("false"));
        let again = app.send(call()).await;
        assert_eq!(again.header("idempotent-replayed"), Some("true"));
        assert_eq!(app.probe_items("after-503").await, 1);

        // A 500 still fails the key.
        let failing = Uuid::new_v4();
        let failed = app
            .post(
                "/probe/items",
                &token,
                failing,
                &json!({ "label": "after-500", "outcome": "fail" }),
            )
            .await;
        assert_eq!(failed.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(app.key_status(failing).await.as_deref(), Some("failed"));
    })
    .await;
}

/// A business transaction that waits on a lock past `lock_timeout` answers 503 with
/// `Retry-After`, rolls back and releases its key, so the retry executes once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn lock_timeout_answers_503_and_the_retry_executes(pool: PgPool) {
    let options = Options {
        db_timeouts: Some((Duration::from_millis(300), Duration::from_secs(5))),
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (_, token) = app.user("busy@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let key = Uuid::new_v4();
        let one_share = Order::market("AAPL").buy().qty("1").json();
        let holder = app.lock("select 1 from paper_accounts for update").await;
        let busy = app.create_order(&token, key, &one_share).await;
        holder.rollback().await.expect("unlock");
        assert_problem(
            &busy,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::DatabaseBusy,
        );
        assert!(busy.header("retry-after").is_some());
        assert_eq!(app.order_count().await, 0);

        let retry = app.create_order(&token, key, &one_share).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(app.order_count().await, 1);
    })
    .await;
}

/// A deadlock (40P01) or a serialization failure (40001) rolled the handler's transaction back:
/// `503 database_busy` with `Retry-After`, the key released, and the retry runs once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn deadlocks_and_serialization_failures_release_the_key(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("deadlock@example.com").await;
        for code in ["40P01", "40001"] {
            let key = Uuid::new_v4();
            let label = format!("after-{code}");
            let call = || {
                Call::new(Method::POST, "/probe/items")
                    .token(&token)
                    .key(key)
                    .json(&json!({ "label": label }))
            };
            let busy = app.send(call().header(SQLSTATE_HEADER, code)).await;
            assert_problem(
                &busy,
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::DatabaseBusy,
            );
            assert!(busy.header("retry-after").is_some());
            assert_eq!(app.probe_items(&label).await, 0, "{code}: rolled back");
            assert_eq!(app.key_status(key).await.as_deref(), Some("released"));
            let retry = app.send(call()).await;
            assert_eq!(retry.status, StatusCode::CREATED, "{code}: {}", retry.text);
            assert_eq!(app.probe_items(&label).await, 1);
        }
    })
    .await;
}

/// A request cancelled while its claim is committing leaves the key released, not in flight
/// until the stale threshold (the commit is slowed down by a deferred trigger).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn cancelled_during_the_claim_commit_releases_the_key(pool: PgPool) {
    sqlx::query(
        "create function slow_claim_commit() returns trigger language plpgsql as
         $$ begin perform pg_sleep(0.6); return null; end $$",
    )
    .execute(&pool)
    .await
    .expect("function");
    sqlx::query(
        "create constraint trigger slow_claim after insert on idempotency_keys
         deferrable initially deferred for each row execute function slow_claim_commit()",
    )
    .execute(&pool)
    .await
    .expect("trigger");
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("commit@example.com").await;
        app.quote("AAPL", "189.00", "190.00").await;
        let key = Uuid::new_v4();
        let one_share = Order::market("AAPL").buy().qty("1").json();
        let call = Call::new(Method::POST, "/api/trading/orders")
            .token(&token)
            .key(key)
            .json(&one_share);
        let gave_up = tokio::time::timeout(Duration::from_millis(250), app.send(call)).await;
        assert!(gave_up.is_err(), "cancelled while the claim commits");
        app.wait_for_key_status(key, "released", Duration::from_secs(5))
            .await;
        app.execute("drop trigger slow_claim on idempotency_keys")
            .await;
        let retry = app.create_order(&token, key, &one_share).await;
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
        assert_eq!(app.order_count().await, 1);
    })
    .await;
}

/// A refusal returned as `Err` keeps nothing the handler wrote (the insert before it rolls
/// back), and is stored on the key all the same: its retry replays it and runs nothing.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_err_refusal_keeps_no_write_and_still_replays(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("refused@example.com").await;
        let key = Uuid::new_v4();
        let call = || {
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(key)
                .json(&json!({ "label": "refused-write", "outcome": "refuse" }))
        };
        let first = app.send(call()).await;
        assert_problem(
            &first,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );
        assert_eq!(first.header("idempotent-replayed"), Some("false"));
        assert_eq!(
            app.probe_items("refused-write").await,
            0,
            "the insert rolled back"
        );
        assert_eq!(app.audit_count("probe.created").await, 0);
        assert_eq!(app.key_status(key).await.as_deref(), Some("completed"));
        let replay = app.send(call()).await;
        assert_problem(
            &replay,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidOrder,
        );
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.body_without_marker(), first.body_without_marker());
        assert_eq!(app.probe_items("refused-write").await, 0);
    })
    .await;
}

/// A released key (its attempt rolled back with a retryable 503) is free only for the same
/// request: another body with the key is `422 idempotency_key_body_mismatch`, as on any row,
/// and does not run; the same body then runs once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_released_key_with_another_body_is_a_mismatch(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("released-mismatch@example.com").await;
        let key = Uuid::new_v4();
        let call = |label: &str| {
            Call::new(Method::POST, "/probe/items")
                .token(&token)
                .key(key)
                .json(&json!({ "label": label }))
        };
        let unavailable = app
            .send(call("first-body").header(UNAVAILABLE_HEADER, "1"))
            .await;
        assert_eq!(unavailable.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(app.key_status(key).await.as_deref(), Some("released"));

        let other = app.send(call("other-body")).await;
        assert_problem(
            &other,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::IdempotencyKeyBodyMismatch,
        );
        assert_eq!(
            app.probe_items("other-body").await,
            0,
            "the other body did not run"
        );
        assert_eq!(app.key_status(key).await.as_deref(), Some("released"));

        let same = app.send(call("first-body")).await;
        assert_eq!(same.status, StatusCode::CREATED, "{}", same.text);
        assert_eq!(same.header("idempotent-replayed"), Some("false"));
        assert_eq!(app.probe_items("first-body").await, 1);
    })
    .await;
}

/// A body-less request and its retry with `{}` are the same request (the route reads both as
/// `{}`): the retry replays instead of answering `idempotency_key_body_mismatch`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn an_empty_body_and_an_empty_object_are_one_request(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("empty@example.com").await;
        let key = Uuid::new_v4();
        let first = app
            .send(
                Call::new(Method::POST, "/api/trading/account/reset")
                    .token(&token)
                    .key(key),
            )
            .await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        let retry = app.reset_account(&token, key).await;
        assert_eq!(retry.status, StatusCode::OK, "{}", retry.text);
        assert_eq!(retry.header("idempotent-replayed"), Some("true"));
        assert_eq!(
            app.audit_count("account.reset").await,
            1,
            "the reset ran once"
        );
    })
    .await;
}

/// A completion that times out waiting for the key row (duplicates lock it briefly) committed
/// nothing: the key is released (503), not failed, and the client's retry runs once.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_completion_blocked_on_the_key_row_releases_the_key(pool: PgPool) {
    TestApp::run(&pool, short_lock_timeout(), async |app| {
        assert_blocked_completion_releases(app, "/probe/items", "blocked-completion").await;
    })
    .await;
}

/// The same when the completion is part of the handler's own statement.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_completing_statement_blocked_on_the_key_row_releases_the_key(pool: PgPool) {
    TestApp::run(&pool, short_lock_timeout(), async |app| {
        assert_blocked_completion_releases(app, "/probe/inline", "blocked-inline").await;
    })
    .await;
}

/// Lock and statement timeouts of 300 ms and 5 s.
fn short_lock_timeout() -> Options {
    Options {
        db_timeouts: Some((Duration::from_millis(300), Duration::from_secs(5))),
        ..Options::default()
    }
}

/// While an attempt on `path` sleeps (its claim committed), the key row is held past the
/// completion's lock timeout: 503, nothing committed, the key released, and the retry runs once.
async fn assert_blocked_completion_releases(app: &TestApp, path: &str, name: &str) {
    let (_, token) = app.user(&format!("{name}@example.com")).await;
    let key = Uuid::new_v4();
    let body = label(name);
    let call = Call::new(Method::POST, path)
        .token(&token)
        .key(key)
        .json(&body)
        .header(SLEEP_HEADER, "400");
    let router = app.router.clone();
    let first = tokio::spawn(async move { send(router, call).await });
    let deadline = Instant::now() + Duration::from_secs(3);
    while app.key_status(key).await.is_none() {
        assert!(Instant::now() < deadline, "claim never appeared");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let holder = app.lock_key_row(key).await;
    // Held past the completion's 300 ms lock timeout, then let go (as a duplicate would), so
    // the release that follows can take the row.
    let unlock = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(900)).await;
        holder.rollback().await.expect("unlock");
    });
    let answered = first.await.expect("join");
    unlock.await.expect("join");
    assert_eq!(
        answered.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        answered.text
    );
    assert!(answered.header("retry-after").is_some());
    assert_eq!(app.probe_items(name).await, 0, "rolled back");
    assert_eq!(app.key_status(key).await.as_deref(), Some("released"));
    let retry = app.post(path, &token, key, &body).await;
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.text);
    assert_eq!(app.probe_items(name).await, 1);
}

/// A statement that leaves the completion out but selects a column of the same name is caught:
/// nothing commits (500, the key failed), so the order cannot run without its key completed.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_made_up_completion_is_refused_and_nothing_commits(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("forged@example.com").await;
        let key = Uuid::new_v4();
        let body = label("forged");
        let call = Call::new(Method::POST, "/probe/inline")
            .token(&token)
            .key(key)
            .header(FORGE_HEADER, "1")
            .json(&body);
        let answered = send(app.router.clone(), call).await;
        assert_eq!(
            answered.status,
            StatusCode::INTERNAL_SERVER_ERROR,
            "{}",
            answered.text
        );
        assert_eq!(app.probe_items("forged").await, 0, "rolled back");
        assert_eq!(app.key_status(key).await.as_deref(), Some("failed"));
    })
    .await;
}

/// An answer completed by the handler's own statement replays like one the claim completed:
/// status, body and `Location`, with the one execution committed.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_completing_statement_stores_the_answer_it_sends(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, token) = app.user("inline@example.com").await;
        let key = Uuid::new_v4();
        let body = label("inline");
        let original = app.post("/probe/inline", &token, key, &body).await;
        assert_eq!(original.status, StatusCode::CREATED, "{}", original.text);
        assert_eq!(original.header("idempotent-replayed"), Some("false"));
        assert_eq!(app.key_status(key).await.as_deref(), Some("completed"));
        let replay = app.post("/probe/inline", &token, key, &body).await;
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.header("idempotent-replayed"), Some("true"));
        assert_eq!(replay.header("location"), original.header("location"));
        assert_eq!(replay.body_without_marker(), original.body);
        assert_eq!(app.probe_items("inline").await, 1);
    })
    .await;
}

/// The kill switch reaches a replica whose store cannot be connected to: it reads the flag on
/// a connection of its own, not through the store pool, so a flip made on another replica
/// turns its fail-closed route from `503` into a passthrough within a second (before, it kept
/// the value it had, and never saw the flip).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn a_flip_reaches_a_replica_whose_store_is_unreachable(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (_, operator) = app.operator("flip-cut-off@example.com").await;
        let cut_off = app
            .replica(Options {
                unreachable_store: true,
                ..short_store_timeout()
            })
            .await;
        let before = cut_off
            .post(
                "/probe/items",
                &operator,
                Uuid::new_v4(),
                &label("before-flip"),
            )
            .await;
        assert_problem(
            &before,
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::IdempotencyStoreUnavailable,
        );

        let off = app.set_flag(&operator, IDEMPOTENCY_FLAG, false).await;
        assert_eq!(off.status, StatusCode::OK, "{}", off.text);
        let flipped = Instant::now();
        loop {
            let after = cut_off
                .post(
                    "/probe/items",
                    &operator,
                    Uuid::new_v4(),
                    &label("after-flip"),
                )
                .await;
            if after.status == StatusCode::CREATED {
                break;
            }
            assert!(
                flipped.elapsed() < Duration::from_secs(1),
                "the cut-off replica still answers {} {} a second after the flip",
                after.status,
                after.text
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(app.probe_items("before-flip").await, 0);
        assert_eq!(app.probe_items("after-flip").await, 1);
    })
    .await;
}
