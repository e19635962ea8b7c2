//! Sign-up, sessions, waitlist, profile and GDPR, through HTTP on real Postgres: magic links
//! read back from the outbox, rate limits (per address in-process, per IP on a real server),
//! concurrent duplicates, keyed profile replays, and an erasure that leaves no trace.

use axum::http::{Method, StatusCode};
use raptor_api::{ApiConfig, AuthLimits};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::helpers::{post_http, send, Call, Options, TestApp, TestResponse};

async fn post_json(app: &TestApp, path: &str, body: &Value) -> TestResponse {
    app.send(Call::new(Method::POST, path).json(body)).await
}

async fn register(app: &TestApp, email: &str) -> TestResponse {
    post_json(app, "/api/auth/register", &json!({ "email": email })).await
}

async fn verify(app: &TestApp, token: &str) -> TestResponse {
    post_json(
        app,
        "/api/auth/register/verify-with-token",
        &json!({ "token": token }),
    )
    .await
}

/// The link token of the newest outbox message of `kind` to `email` (the mailer's view).
async fn outbox_token(app: &TestApp, email: &str, kind: &str) -> String {
    // Login links are queued after the answer: wait (bounded) for the message.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let body: String = loop {
        let body: Option<String> = sqlx::query_scalar(
            "select body from email_outbox where lower(email) = lower($1) and kind = $2
              order by id desc limit 1",
        )
        .bind(email)
        .bind(kind)
        .fetch_optional(&app.pool)
        .await
        .expect("outbox query");
        if let Some(body) = body {
            break body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {kind} message for {email}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let start = body.find("rpl_").expect("a link token in the message");
    body[start..start + 4 + 64].to_owned()
}

/// Signs up `email` through HTTP: register, read the link, verify. The user id and session.
async fn sign_up(app: &TestApp, email: &str) -> (i32, String) {
    let registered = register(app, email).await;
    assert_eq!(
        registered.status,
        StatusCode::ACCEPTED,
        "{}",
        registered.text
    );
    let verified = verify(app, &outbox_token(app, email, "verify_email").await).await;
    assert_eq!(verified.status, StatusCode::OK, "{}", verified.text);
    let user_id = verified.body["user_id"].as_i64().expect("user_id");
    let token = verified.body["token"].as_str().expect("token").to_owned();
    (i32::try_from(user_id).expect("i32"), token)
}

async fn count_where(app: &TestApp, sql: &str, id: i32) -> i64 {
    sqlx::query_scalar(sql)
        .bind(id)
        .fetch_one(&app.pool)
        .await
        .expect("count")
}

fn buy(symbol: &str) -> Value {
    json!({ "symbol": symbol, "qty": "1", "side": "buy", "type": "market",
            "time_in_force": "day", "position_intent": "buy_to_open" })
}

async fn patch_profile(
    app: &TestApp,
    token: &str,
    key: Option<Uuid>,
    body: &Value,
) -> TestResponse {
    let mut call = Call::new(Method::PATCH, "/api/account/profile")
        .token(token)
        .json(body);
    if let Some(key) = key {
        call = call.key(key);
    }
    app.send(call).await
}

fn limits(per_email_per_hour: u32, per_ip_per_minute: u32) -> Options {
    Options {
        api: ApiConfig {
            auth_limits: AuthLimits {
                per_email_per_hour,
                per_ip_per_minute,
            },
            ..ApiConfig::default()
        },
        ..Options::default()
    }
}

/// Register, verify, trade and read the account, all over HTTP; a repeated verification is the
/// same user and the same session; logout revokes exactly that session and ends the link's
/// grace.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn sign_up_trade_and_log_out(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let registered = register(&app, "Ada@Example.com").await;
    assert_eq!(
        registered.status,
        StatusCode::ACCEPTED,
        "{}",
        registered.text
    );
    assert_eq!(registered.body["status"], "accepted");
    let link = outbox_token(&app, "ada@example.com", "verify_email").await;
    // Only the hash is stored, with purpose and a 24 h expiry.
    let stored: (String, bool) = sqlx::query_as(
        "select purpose, expires_at between now() + interval '23 hours' and now() + interval '25 hours'
           from auth_link_tokens where token_hash = $1",
    )
    .bind(raptor_api::auth::hash_token(&link))
    .fetch_one(&app.pool)
    .await
    .expect("link row by hash");
    assert_eq!(stored, ("register".to_owned(), true));
    assert_eq!(
        app.count("select count(*) from users").await,
        0,
        "no user before verification"
    );

    let first = verify(&app, &link).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    assert_eq!(first.header("cache-control"), Some("no-store"));
    let user_id = first.body["user_id"].as_i64().expect("user_id");
    let token = first.body["token"].as_str().expect("token").to_owned();
    assert!(token.starts_with("rpt_"));
    assert_eq!(
        app.count("select count(*) from api_tokens where kind = 'session' and expires_at > now() + interval '29 days'")
            .await,
        1,
        "the session expires after the TTL"
    );

    app.quote("AAPL", "189.00", "190.00").await;
    let order = app
        .post(
            "/api/trading/orders",
            &token,
            Some(Uuid::new_v4()),
            &buy("AAPL"),
        )
        .await;
    assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
    let account = app.get("/api/trading/account", &token).await;
    assert_eq!(account.status, StatusCode::OK, "{}", account.text);
    assert_eq!(account.body["cash"], "99810.00");

    // A retry after a lost response: 200, the same user and the same session (whichever
    // answer the app keeps works), no second user, account or session.
    let again = verify(&app, &link).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.body["user_id"].as_i64(), Some(user_id));
    assert_eq!(again.body["token"].as_str(), Some(token.as_str()));
    assert_eq!(app.count("select count(*) from users").await, 1);
    assert_eq!(app.count("select count(*) from paper_accounts").await, 1);
    assert_eq!(
        app.count("select count(*) from api_tokens where kind = 'session'")
            .await,
        1
    );
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'user.registered'")
            .await,
        1
    );
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'session.created'")
            .await,
        1
    );
    assert_eq!(
        app.count(
            "select count(*) from audit_log
              where context::text ilike '%ada@%' or context::text like '%rpt_%' or context::text like '%rpl_%'"
        )
        .await,
        0,
        "no address or token in audit rows"
    );
    let still = app.get("/api/trading/account", &token).await;
    assert_eq!(
        still.status,
        StatusCode::OK,
        "the first answer's session works"
    );
    let (_, other_session) = app.user("someone-else@example.com").await;

    let logout = app
        .send(Call::new(Method::POST, "/api/auth/logout").token(&token))
        .await;
    assert_eq!(logout.status, StatusCode::NO_CONTENT, "{}", logout.text);
    let after = app.get("/api/trading/account", &token).await;
    assert_eq!(after.status, StatusCode::UNAUTHORIZED);
    let logout_again = app
        .send(Call::new(Method::POST, "/api/auth/logout").token(&token))
        .await;
    assert_eq!(logout_again.status, StatusCode::UNAUTHORIZED);
    let other = app.get("/api/trading/account", &other_session).await;
    assert_eq!(other.status, StatusCode::OK, "only that session ended");
    // Logging out ends the link's grace: it no longer signs anyone in.
    let after_logout = verify(&app, &link).await;
    assert_eq!(
        after_logout.status,
        StatusCode::BAD_REQUEST,
        "{}",
        after_logout.text
    );
    assert_eq!(after_logout.body["error"], "invalid_token");

    for token in ["rpl_unknown", "", &"x".repeat(10_000)] {
        let unknown = verify(&app, token).await;
        assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{}", unknown.text);
        assert_eq!(unknown.body["error"], "invalid_token");
    }
    app.close().await;
}

/// A double submit of a login link (concurrent verifications) and a retry that reaches another
/// replica with the same `RAPTOR_SESSION_KEY`: every answer is the same working session.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn every_verification_of_a_link_answers_one_session(pool: PgPool) {
    let key = raptor_api::sessions::SessionKey::random();
    let options = || Options {
        api: ApiConfig {
            session_key: key.clone(),
            ..ApiConfig::default()
        },
        ..Options::default()
    };
    let app = TestApp::with(&pool, options()).await;
    let replica = TestApp::with(&pool, options()).await;
    let (user_id, _) = app.user("double@example.com").await;
    let login = post_json(
        &app,
        "/api/auth/login",
        &json!({ "email": "double@example.com" }),
    )
    .await;
    assert_eq!(login.status, StatusCode::ACCEPTED);
    let link = outbox_token(&app, "double@example.com", "login_link").await;

    let mut set = JoinSet::new();
    for _ in 0..5 {
        let router = app.router.clone();
        let body = json!({ "token": link });
        set.spawn(send(
            router,
            Call::new(Method::POST, "/api/auth/register/verify-with-token").json(&body),
        ));
    }
    let mut tokens = std::collections::HashSet::new();
    for answer in set.join_all().await {
        assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
        assert_eq!(answer.body["user_id"].as_i64(), Some(i64::from(user_id)));
        tokens.insert(answer.body["token"].as_str().expect("token").to_owned());
    }
    let from_replica = verify(&replica, &link).await;
    assert_eq!(from_replica.status, StatusCode::OK, "{}", from_replica.text);
    tokens.insert(
        from_replica.body["token"]
            .as_str()
            .expect("token")
            .to_owned(),
    );
    assert_eq!(tokens.len(), 1, "one session: {tokens:?}");
    let token = tokens.into_iter().next().expect("token");
    let account = app.get("/api/trading/account", &token).await;
    assert_eq!(account.status, StatusCode::OK, "{}", account.text);
    // The user's own session from `users create`, and the link's one.
    assert_eq!(
        count_where(
            &app,
            "select count(*) from api_tokens where user_id = $1",
            user_id
        )
        .await,
        2
    );
    replica.close().await;
    app.close().await;
}

/// An expired link, and a used one past the repeat grace, are `400 invalid_token`.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn expired_and_spent_links_are_refused(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    register(&app, "late@example.com").await;
    let link = outbox_token(&app, "late@example.com", "verify_email").await;
    sqlx::query("update auth_link_tokens set expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .expect("expire");
    let expired = verify(&app, &link).await;
    assert_eq!(expired.status, StatusCode::BAD_REQUEST, "{}", expired.text);
    assert_eq!(expired.body["error"], "invalid_token");
    assert_eq!(app.count("select count(*) from users").await, 0);

    register(&app, "spent@example.com").await;
    let link = outbox_token(&app, "spent@example.com", "verify_email").await;
    assert_eq!(verify(&app, &link).await.status, StatusCode::OK);
    sqlx::query(
        "update auth_link_tokens set used_at = now() - interval '16 minutes' where used_at is not null",
    )
    .execute(&app.pool)
    .await
    .expect("age the first use");
    let spent = verify(&app, &link).await;
    assert_eq!(spent.status, StatusCode::BAD_REQUEST, "{}", spent.text);
    assert_eq!(spent.body["error"], "invalid_token");
    app.close().await;
}

/// Two sign-up links for one address, each verified several times concurrently: one user.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn one_user_per_address_under_concurrent_verification(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    assert_eq!(
        register(&app, "twice@example.com").await.status,
        StatusCode::ACCEPTED
    );
    let first = outbox_token(&app, "twice@example.com", "verify_email").await;
    assert_eq!(
        register(&app, "TWICE@example.com").await.status,
        StatusCode::ACCEPTED
    );
    let second = outbox_token(&app, "twice@example.com", "verify_email").await;
    assert_ne!(first, second);

    let mut set = JoinSet::new();
    for i in 0..10 {
        let router = app.router.clone();
        let token = if i % 2 == 0 { &first } else { &second }.clone();
        set.spawn(async move {
            send(
                router,
                Call::new(Method::POST, "/api/auth/register/verify-with-token")
                    .json(&json!({ "token": token })),
            )
            .await
        });
    }
    let mut users = Vec::new();
    while let Some(response) = set.join_next().await {
        let response = response.expect("join");
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        users.push(response.body["user_id"].as_i64().expect("user_id"));
    }
    users.dedup();
    assert_eq!(users.len(), 1, "every verification signs in the same user");
    assert_eq!(app.count("select count(*) from users").await, 1);
    assert_eq!(app.count("select count(*) from paper_accounts").await, 1);
    // Ten verifications of two links: each link keeps only the session it issued last.
    assert_eq!(app.count("select count(*) from api_tokens").await, 2);
    app.close().await;
}

/// Login queues a link only for a known address; register for a known address sends a login
/// link, not a second sign-up. Every answer is the same 202.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn login_links_only_for_known_addresses(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (user_id, _) = app.user("known@example.com").await;

    let known = post_json(
        &app,
        "/api/auth/login",
        &json!({ "email": "Known@Example.com" }),
    )
    .await;
    let unknown = post_json(
        &app,
        "/api/auth/login",
        &json!({ "email": "nobody@example.com" }),
    )
    .await;
    assert_eq!(known.status, StatusCode::ACCEPTED, "{}", known.text);
    assert_eq!(unknown.status, StatusCode::ACCEPTED, "{}", unknown.text);
    assert_eq!(known.body, unknown.body, "no account enumeration");
    outbox_token(&app, "known@example.com", "login_link").await;
    // Both answers were sent before any work; give the unknown address's work time to finish.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        count_where(
            &app,
            "select count(*) from email_outbox where kind = 'login_link' and user_id = $1",
            user_id
        )
        .await,
        1
    );
    assert_eq!(
        app.count("select count(*) from email_outbox where email ilike 'nobody@%'")
            .await
            + app
                .count("select count(*) from auth_link_tokens where email ilike 'nobody@%'")
                .await,
        0,
        "nothing written for an unknown address"
    );
    let link = outbox_token(&app, "known@example.com", "login_link").await;
    let session = verify(&app, &link).await;
    assert_eq!(session.status, StatusCode::OK, "{}", session.text);
    assert_eq!(session.body["user_id"].as_i64(), Some(i64::from(user_id)));

    let again = register(&app, "known@example.com").await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(again.body, unknown.body);
    assert_eq!(
        app.count("select count(*) from email_outbox where kind = 'verify_email'")
            .await,
        0
    );
    assert_eq!(
        app.count("select count(*) from email_outbox where kind = 'login_link'")
            .await,
        2
    );
    assert_eq!(app.count("select count(*) from users").await, 1);

    let bad = post_json(
        &app,
        "/api/auth/login",
        &json!({ "email": "not an address" }),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.body["error"], "invalid_email");
    let bad = register(&app, "a@localhost").await;
    assert_eq!(bad.body["error"], "invalid_email");
    app.close().await;
}

/// The (N+1)th register for one address within the hour is `429` with `Retry-After`, in any
/// letter case; other addresses are unaffected.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn register_is_rate_limited_per_address(pool: PgPool) {
    let app = TestApp::with(&pool, limits(2, 1000)).await;
    assert_eq!(
        register(&app, "rl@example.com").await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        register(&app, "RL@example.com").await.status,
        StatusCode::ACCEPTED
    );
    let limited = register(&app, "rl@EXAMPLE.com").await;
    assert_eq!(
        limited.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        limited.text
    );
    assert_eq!(limited.body["error"], "rate_limited");
    let retry_after: u64 = limited
        .header("retry-after")
        .expect("Retry-After")
        .parse()
        .expect("seconds");
    assert!((1..=3600).contains(&retry_after), "{retry_after}");
    let login = post_json(
        &app,
        "/api/auth/login",
        &json!({ "email": "rl@example.com" }),
    )
    .await;
    assert_eq!(
        login.status,
        StatusCode::TOO_MANY_REQUESTS,
        "login shares the budget"
    );
    assert_eq!(
        app.count("select count(*) from email_outbox").await,
        2,
        "a limited request writes nothing"
    );
    assert_eq!(
        register(&app, "other@example.com").await.status,
        StatusCode::ACCEPTED
    );
    app.close().await;
}

/// Per client IP, on a real server (the peer address comes from the connection).
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn register_is_rate_limited_per_ip(pool: PgPool) {
    let app = TestApp::with(&pool, limits(1000, 3)).await;
    let server = app.spawn().await;
    let mut statuses = Vec::new();
    for i in 0..4 {
        let response = post_http(
            server.client.clone(),
            server.url("/api/auth/register"),
            String::new(),
            None,
            json!({ "email": format!("ip{i}@example.com") }),
        )
        .await;
        if response.status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(response.body["error"], "rate_limited");
            assert!(response.header("retry-after").is_some());
        }
        statuses.push(response.status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::ACCEPTED,
            StatusCode::ACCEPTED,
            StatusCode::ACCEPTED,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
    server.stop().await;
    app.close().await;
}

/// 20 concurrent signups of one address in two letter cases: one row, every answer 202.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn waitlist_signups_are_unique_per_address(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let mut set = JoinSet::new();
    for i in 0..20 {
        let router = app.router.clone();
        let email = if i % 2 == 0 { "A@x.com" } else { "a@X.com" };
        set.spawn(async move {
            send(
                router,
                Call::new(Method::POST, "/api/waitlist/signup").json(&json!({ "email": email })),
            )
            .await
        });
    }
    while let Some(response) = set.join_next().await {
        let response = response.expect("join");
        assert_eq!(response.status, StatusCode::ACCEPTED, "{}", response.text);
    }
    assert_eq!(app.count("select count(*) from waitlist_signups").await, 1);
    assert_eq!(
        app.count("select count(*) from audit_log where action = 'waitlist.joined'")
            .await,
        1
    );
    let again = post_json(&app, "/api/waitlist/signup", &json!({ "email": "a@x.com" })).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);

    for body in [
        json!({ "email": "nope" }),
        json!({ "email": "" }),
        json!({ "email": "a@x.com", "extra": 1 }),
    ] {
        let bad = post_json(&app, "/api/waitlist/signup", &body).await;
        assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    }
    let bad = post_json(&app, "/api/waitlist/signup", &json!({ "email": "nope" })).await;
    assert_eq!(bad.body["error"], "invalid_email");
    assert_eq!(app.count("select count(*) from waitlist_signups").await, 1);
    app.close().await;
}

/// Patch, validation codes, `null` clears, unknown fields, a keyed retry runs again (nothing stored), audit of field names.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn profile_patch(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    let (user_id, token) = app.user("pro@example.com").await;
    let read = app.get("/api/account/profile", &token).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.text);
    assert_eq!(read.body["email"], "pro@example.com");
    assert_eq!(read.body["display_name"], Value::Null);
    assert_eq!(read.body["marketing_opt_in"], false);

    let key = Uuid::new_v4();
    let body = json!({ "display_name": "  Ada L.  ", "time_zone": "America/New_York",
                       "marketing_opt_in": true });
    let patched = patch_profile(&app, &token, Some(key), &body).await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
    assert_eq!(patched.header("idempotent-replayed"), Some("false"));
    assert_eq!(patched.body["user_id"].as_i64(), Some(i64::from(user_id)));
    assert_eq!(patched.body["display_name"], "Ada L.");
    assert_eq!(patched.body["time_zone"], "America/New_York");
    assert_eq!(patched.body["marketing_opt_in"], true);
    let stored: (Option<String>, Option<String>, bool) =
        sqlx::query_as("select display_name, time_zone, marketing_opt_in from users where id = $1")
            .bind(user_id)
            .fetch_one(&app.pool)
            .await
            .expect("user");
    assert_eq!(
        stored,
        (Some("Ada L.".into()), Some("America/New_York".into()), true)
    );

    // The answer is personal data: nothing of it is stored on the key row, and the retry runs
    // the patch again, which changes nothing the first run did not (no second audit row) and
    // answers the profile as it is.
    let (body_kept, headers_kept, status): (Option<Value>, Option<Value>, String) = sqlx::query_as(
        "select response_body, response_headers, status from idempotency_keys
              where idem_key = $1",
    )
    .bind(key.to_string())
    .fetch_one(&app.pool)
    .await
    .expect("key row");
    assert_eq!((body_kept, headers_kept), (None, None), "nothing stored");
    assert_eq!(status, "completed");
    let again = patch_profile(&app, &token, Some(key), &body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert_eq!(again.header("idempotent-replayed"), Some("false"));
    assert_eq!(again.body, patched.body);
    // Another body with the same key is still a mismatch.
    let other = patch_profile(&app, &token, Some(key), &json!({ "display_name": "Eve" })).await;
    assert_eq!(
        other.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        other.text
    );
    assert_eq!(other.body["error"], "idempotency_key_body_mismatch");
    let audit: Vec<Value> = sqlx::query_scalar(
        "select context from audit_log where action = 'profile.updated' order by id",
    )
    .fetch_all(&app.pool)
    .await
    .expect("audit");
    assert_eq!(
        audit,
        [json!({ "fields": ["display_name", "time_zone", "marketing_opt_in"] })],
        "one row for the execution, naming fields only"
    );

    for (body, code) in [
        (
            json!({ "display_name": "x".repeat(65) }),
            "invalid_display_name",
        ),
        (
            json!({ "display_name": "tab\there" }),
            "invalid_display_name",
        ),
        (json!({ "time_zone": "Mars/Olympus" }), "invalid_time_zone"),
        (json!({ "time_zone": "" }), "invalid_time_zone"),
        (
            json!({ "marketing_opt_in": null }),
            "invalid_marketing_opt_in",
        ),
        (json!({ "marketing_opt_in": "yes" }), "invalid_body"),
        (json!({ "email": "evil@example.com" }), "invalid_body"),
    ] {
        let refused = patch_profile(&app, &token, None, &body).await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            refused.text
        );
        assert_eq!(refused.body["error"], code, "{body}");
    }
    let ok = patch_profile(
        &app,
        &token,
        None,
        &json!({ "display_name": "é".repeat(64) }),
    )
    .await;
    assert_eq!(ok.status, StatusCode::OK, "64 characters fit: {}", ok.text);

    let cleared = patch_profile(
        &app,
        &token,
        Some(Uuid::new_v4()),
        &json!({ "display_name": null, "time_zone": null }),
    )
    .await;
    assert_eq!(cleared.status, StatusCode::OK, "{}", cleared.text);
    assert_eq!(cleared.body["display_name"], Value::Null);
    assert_eq!(cleared.body["time_zone"], Value::Null);
    assert_eq!(
        cleared.body["marketing_opt_in"], true,
        "absent is untouched"
    );
    let read = app.get("/api/account/profile", &token).await;
    assert_eq!(read.body, cleared.body);
    app.close().await;
}

/// After the whole journey with keys sent everywhere, no session or link token is stored in
/// `idempotency_keys`, and the auth routes left no key rows at all.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn no_credential_in_idempotency_keys(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    app.quote("AAPL", "189.00", "190.00").await;
    let keyed = |path: &str, body: Value| {
        Call::new(Method::POST, path)
            .json(&body)
            .key(Uuid::new_v4())
    };
    app.send(keyed(
        "/api/auth/register",
        json!({ "email": "j@example.com" }),
    ))
    .await;
    let link = outbox_token(&app, "j@example.com", "verify_email").await;
    let session = app
        .send(keyed(
            "/api/auth/register/verify-with-token",
            json!({ "token": link }),
        ))
        .await;
    assert_eq!(session.status, StatusCode::OK, "{}", session.text);
    let token = session.body["token"].as_str().expect("token").to_owned();
    app.send(keyed(
        "/api/auth/login",
        json!({ "email": "j@example.com" }),
    ))
    .await;
    let link = outbox_token(&app, "j@example.com", "login_link").await;
    let login = app
        .send(keyed(
            "/api/auth/register/verify-with-token",
            json!({ "token": link }),
        ))
        .await;
    assert_eq!(login.status, StatusCode::OK, "{}", login.text);
    let order = app
        .post(
            "/api/trading/orders",
            &token,
            Some(Uuid::new_v4()),
            &buy("AAPL"),
        )
        .await;
    assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
    let profile = patch_profile(
        &app,
        &token,
        Some(Uuid::new_v4()),
        &json!({ "display_name": "J" }),
    )
    .await;
    assert_eq!(profile.status, StatusCode::OK, "{}", profile.text);
    app.send(
        Call::new(Method::POST, "/api/auth/logout")
            .token(&token)
            .key(Uuid::new_v4()),
    )
    .await;

    assert_eq!(
        app.count("select count(*) from idempotency_keys").await,
        2,
        "the order and the profile patch only"
    );
    assert_eq!(
        app.count(
            "select count(*) from idempotency_keys
              where response_body::text like '%rpt_%' or response_body::text like '%rpl_%'"
        )
        .await,
        0
    );
    assert_eq!(
        app.count("select count(*) from idempotency_keys where scope_endpoint like '%/api/auth/%'")
            .await,
        0
    );
    app.close().await;
}

/// Columns that can name a user, in every table of the schema.
async fn user_columns(app: &TestApp) -> Vec<(String, String)> {
    sqlx::query_as(
        // Columns named for a user, and every column with a foreign key to users(id), so a new
        // reference cannot escape the check by its name.
        "select table_name::text, column_name::text from information_schema.columns
          where table_schema = 'public'
            and column_name in ('user_id', 'scope_user_id', 'updated_by')
         union
         select c.conrelid::regclass::text, a.attname::text
           from pg_constraint c
           join pg_attribute a on a.attrelid = c.conrelid and a.attnum = any(c.conkey)
          where c.contype = 'f' and c.confrelid = 'users'::regclass
          order by 1, 2",
    )
    .fetch_all(&app.pool)
    .await
    .expect("columns")
}

async fn references_to(app: &TestApp, user_id: i32, email: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (table, column) in user_columns(app).await {
        let n = count_where(
            app,
            &format!("select count(*) from {table} where {column} = $1"),
            user_id,
        )
        .await;
        if n > 0 {
            found.push(format!("{table}.{column}: {n}"));
        }
    }
    for table in [
        "users",
        "waitlist_signups",
        "email_outbox",
        "auth_link_tokens",
    ] {
        let n: i64 = sqlx::query_scalar(&format!(
            "select count(*) from {table} where lower(email) = lower($1)"
        ))
        .bind(email)
        .fetch_one(&app.pool)
        .await
        .expect("count by email");
        if n > 0 {
            found.push(format!("{table}.email: {n}"));
        }
    }
    let n = count_where(app, "select count(*) from users where id = $1", user_id).await;
    if n > 0 {
        found.push("users.id".into());
    }
    found
}

/// Two users with orders, fills, keys, profile, waitlist, outbox, billing rows, and operator
/// rows naming one of them. The export holds exactly the victim's data; the erasure removes
/// every reference to them and nothing of the other user.
#[sqlx::test(migrator = "raptor_db::MIGRATOR")]
async fn erasure_leaves_no_trace(pool: PgPool) {
    let app = TestApp::new(&pool).await;
    app.quote("AAPL", "189.00", "190.00").await;
    let mut users = Vec::new();
    for email in ["Victim@example.com", "bystander@example.com"] {
        let waitlist = post_json(&app, "/api/waitlist/signup", &json!({ "email": email })).await;
        assert_eq!(waitlist.status, StatusCode::ACCEPTED);
        let (user_id, token) = sign_up(&app, email).await;
        // A login link too, and an unused one.
        post_json(&app, "/api/auth/login", &json!({ "email": email })).await;
        let order = app
            .post(
                "/api/trading/orders",
                &token,
                Some(Uuid::new_v4()),
                &buy("AAPL"),
            )
            .await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        let patched = patch_profile(
            &app,
            &token,
            Some(Uuid::new_v4()),
            &json!({ "display_name": format!("name of {email}"), "time_zone": "Europe/Paris" }),
        )
        .await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
        sqlx::query(
            "insert into billing_customers (user_id, stripe_customer_id) values ($1, 'cus_' || $1)",
        )
        .bind(user_id)
        .execute(&app.pool)
        .await
        .expect("customer");
        sqlx::query(
            "insert into billing_subscriptions
                    (stripe_subscription_id, stripe_customer_id, user_id, status, source_at)
             values ('sub_' || $1, 'cus_' || $1, $1, 'active', now()),
                    ('sub_orphan_' || $1, 'cus_' || $1, null, 'active', now())",
        )
        .bind(user_id)
        .execute(&app.pool)
        .await
        .expect("subscriptions");
        users.push((
            user_id,
            token,
            order.body["id"].as_str().expect("id").to_owned(),
        ));
    }
    let (victim, victim_token, victim_order) = users[0].clone();
    let (bystander, bystander_token, bystander_order) = users[1].clone();
    // Operator-owned rows that name the victim.
    sqlx::query("update quotes set updated_by = $1 where symbol = 'AAPL'")
        .bind(victim)
        .execute(&app.pool)
        .await
        .expect("quote");
    sqlx::query(
        "insert into feature_flags (name, enabled, updated_by) values ('SOME_FLAG', true, $1)",
    )
    .bind(victim)
    .execute(&app.pool)
    .await
    .expect("flag");
    assert!(
        !references_to(&app, victim, "victim@example.com")
            .await
            .is_empty(),
        "the check itself sees the victim"
    );

    let export = app.get("/api/account/export", &victim_token).await;
    assert_eq!(export.status, StatusCode::OK, "{}", export.text);
    let data = &export.body;
    assert_eq!(data["user"]["id"].as_i64(), Some(i64::from(victim)));
    assert_eq!(
        data["profile"]["display_name"],
        "name of Victim@example.com"
    );
    assert_eq!(data["orders"].as_array().map(Vec::len), Some(1));
    assert_eq!(data["orders"][0]["id"], victim_order.as_str());
    assert_eq!(data["order_legs"].as_array().map(Vec::len), Some(1));
    assert_eq!(data["order_legs"][0]["order_id"], victim_order.as_str());
    assert_eq!(data["fills"].as_array().map(Vec::len), Some(1));
    assert_eq!(data["fills"][0]["order_id"], victim_order.as_str());
    assert_eq!(data["idempotency_keys"].as_array().map(Vec::len), Some(2));
    assert_eq!(data["waitlist"].as_array().map(Vec::len), Some(1));
    assert_eq!(data["email_outbox"].as_array().map(Vec::len), Some(2));
    assert_eq!(data["sign_in_links"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        data["billing_customer"]["stripe_customer_id"],
        format!("cus_{victim}")
    );
    assert_eq!(
        data["billing_subscriptions"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(!export.text.contains("bystander"), "nobody else's data");
    assert!(!export.text.contains(&bystander_order));
    assert!(
        !export.text.contains("rpl_") && !export.text.contains("rpt_"),
        "no credentials"
    );

    // A renewing subscription blocks erasure (billing tests cover that); this one has ended.
    sqlx::query("update billing_subscriptions set status = 'canceled' where user_id = $1")
        .bind(victim)
        .execute(&app.pool)
        .await
        .expect("end the subscription");
    let erased = app
        .send(Call::new(Method::POST, "/api/account/erasure").token(&victim_token))
        .await;
    assert_eq!(erased.status, StatusCode::OK, "{}", erased.text);
    assert_eq!(
        references_to(&app, victim, "victim@example.com").await,
        Vec::<String>::new()
    );
    let erased_row: Value =
        sqlx::query_scalar("select context from audit_log where action = 'user.erased'")
            .fetch_one(&app.pool)
            .await
            .expect("erasure audit row");
    let text = erased_row.to_string();
    assert!(
        erased_row.get("user_id").is_none() && !text.to_lowercase().contains("victim"),
        "{text}"
    );
    assert_eq!(
        app.count(
            "select count(*) from audit_log where action = 'user.erased' and user_id is null"
        )
        .await,
        1
    );
    assert_eq!(
        app.get("/api/trading/account", &victim_token).await.status,
        StatusCode::UNAUTHORIZED
    );

    // The bystander is untouched, and the operator rows survive without the reference.
    assert_eq!(
        app.get("/api/trading/account", &bystander_token)
            .await
            .status,
        StatusCode::OK
    );
    let left = references_to(&app, bystander, "bystander@example.com").await;
    for expected in [
        "users.email: 1",
        "waitlist_signups.email: 1",
        "email_outbox.email: 2",
        "auth_link_tokens.email: 2",
        "paper_orders.user_id: 1",
        "paper_fills.user_id: 1",
        "idempotency_keys.scope_user_id: 2",
        "billing_customers.user_id: 1",
        "billing_subscriptions.user_id: 1",
    ] {
        assert!(left.iter().any(|l| l == expected), "{expected} in {left:?}");
    }
    assert_eq!(
        count_where(
            &app,
            "select count(*) from billing_subscriptions where stripe_customer_id = 'cus_' || $1",
            bystander
        )
        .await,
        2
    );
    assert_eq!(
        app.count("select count(*) from quotes where symbol = 'AAPL' and updated_by is null")
            .await,
        1
    );
    assert_eq!(
        app.count(
            "select count(*) from feature_flags where name = 'SOME_FLAG' and updated_by is null"
        )
        .await,
        1
    );
    app.close().await;
}
