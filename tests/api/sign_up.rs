//! Sign-up and sessions through HTTP: magic links read back from the outbox, one user and one
//! session however often a link is verified, logout, login links only for known addresses,
//! rate limits (per address in-process, per IP on a real server), the waitlist, and no
//! credential in `idempotency_keys`.

use axum::http::{Method, StatusCode};
use raptor_api::codes::ErrorCode;
use raptor_api::{ApiConfig, AuthLimits};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::task::JoinSet;
use uuid::Uuid;

use crate::helpers::{assert_problem, post_http, send, Call, Options, Order, TestApp};

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
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn sign_up_trade_and_log_out(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let registered = app.register("Ada@Example.com").await;
        assert_eq!(
            registered.status,
            StatusCode::ACCEPTED,
            "{}",
            registered.text
        );
        assert_eq!(registered.body["status"], "accepted");
        let link = app.outbox_token("ada@example.com", "verify_email").await;
        // Only the hash is stored, with purpose and a 24 h expiry.
        let stored: (String, bool) = sqlx::query_as(
            "select purpose,
                expires_at between now() + interval '23 hours' and now() + interval '25 hours'
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

        let first = app.verify(&link).await;
        assert_eq!(first.status, StatusCode::OK, "{}", first.text);
        assert_eq!(first.header("cache-control"), Some("no-store"));
        let user_id = first.body["user_id"].as_i64().expect("user_id");
        let token = first.body["token"].as_str().expect("token").to_owned();
        assert!(token.starts_with("rpt_"));
        assert_eq!(
            app.count(
                "select count(*) from api_tokens \
                 where kind = 'session' and expires_at > now() + interval '29 days'"
            )
            .await,
            1,
            "the session expires after the TTL"
        );

        app.quote("AAPL", "189.00", "190.00").await;
        let one_share = Order::market("AAPL").buy_to_open().qty("1").day().json();
        let order = app.create_order(&token, Uuid::new_v4(), &one_share).await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        let account = app.account(&token).await;
        assert_eq!(account.status, StatusCode::OK, "{}", account.text);
        assert_eq!(account.body["cash"], "99810.00");

        // A retry after a lost response: 200, the same user and the same session (whichever
        // answer the app keeps works), no second user, account or session.
        let again = app.verify(&link).await;
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
        assert_eq!(app.audit_count("user.registered").await, 1);
        assert_eq!(app.audit_count("session.created").await, 1);
        assert_eq!(
            app.count(
                "select count(*) from audit_log
              where context::text ilike '%ada@%' or context::text like '%rpt_%'
                 or context::text like '%rpl_%'"
            )
            .await,
            0,
            "no address or token in audit rows"
        );
        let still = app.account(&token).await;
        assert_eq!(
            still.status,
            StatusCode::OK,
            "the first answer's session works"
        );
        let (_, other_session) = app.user("someone-else@example.com").await;

        let logout = app.logout(&token).await;
        assert_eq!(logout.status, StatusCode::NO_CONTENT, "{}", logout.text);
        let after = app.account(&token).await;
        assert_eq!(after.status, StatusCode::UNAUTHORIZED);
        let logout_again = app.logout(&token).await;
        assert_eq!(logout_again.status, StatusCode::UNAUTHORIZED);
        let other = app.account(&other_session).await;
        assert_eq!(other.status, StatusCode::OK, "only that session ended");
        // Logging out ends the link's grace: it no longer signs anyone in.
        let after_logout = app.verify(&link).await;
        assert_problem(
            &after_logout,
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidToken,
        );

        for token in ["rpl_unknown", "", &"x".repeat(10_000)] {
            let unknown = app.verify(token).await;
            assert_problem(&unknown, StatusCode::BAD_REQUEST, ErrorCode::InvalidToken);
        }
    })
    .await;
}

/// A double submit of a login link (concurrent verifications) and a retry that reaches another
/// replica with the same `RAPTOR_SESSION_KEY`: every answer is the same working session.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn every_verification_of_a_link_answers_one_session(pool: PgPool) {
    let key = raptor_api::sessions::SessionKey::random();
    let options = || Options {
        api: ApiConfig {
            session_key: key.clone(),
            ..ApiConfig::default()
        },
        ..Options::default()
    };
    TestApp::run(&pool, options(), async |app| {
        let replica = app.replica(options()).await;
        let (user_id, _) = app.user("double@example.com").await;
        let login = app.login("double@example.com").await;
        assert_eq!(login.status, StatusCode::ACCEPTED);
        let link = app.outbox_token("double@example.com", "login_link").await;

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
        let from_replica = replica.verify(&link).await;
        assert_eq!(from_replica.status, StatusCode::OK, "{}", from_replica.text);
        tokens.insert(
            from_replica.body["token"]
                .as_str()
                .expect("token")
                .to_owned(),
        );
        assert_eq!(tokens.len(), 1, "one session: {tokens:?}");
        let token = tokens.into_iter().next().expect("token");
        let account = app.account(&token).await;
        assert_eq!(account.status, StatusCode::OK, "{}", account.text);
        // The user's own session from `users create`, and the link's one.
        assert_eq!(
            app.count_where(
                "select count(*) from api_tokens where user_id = $1",
                user_id
            )
            .await,
            2
        );
    })
    .await;
}

/// An expired link, and a used one past the repeat grace, are `400 invalid_token`.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn expired_and_spent_links_are_refused(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        app.register("late@example.com").await;
        let link = app.outbox_token("late@example.com", "verify_email").await;
        app.execute("update auth_link_tokens set expires_at = now() - interval '1 second'")
            .await;
        let expired = app.verify(&link).await;
        assert_problem(&expired, StatusCode::BAD_REQUEST, ErrorCode::InvalidToken);
        assert_eq!(app.count("select count(*) from users").await, 0);

        app.register("spent@example.com").await;
        let link = app.outbox_token("spent@example.com", "verify_email").await;
        assert_eq!(app.verify(&link).await.status, StatusCode::OK);
        app.execute(
            "update auth_link_tokens set used_at = now() - interval '16 minutes' \
             where used_at is not null",
        )
        .await;
        let spent = app.verify(&link).await;
        assert_problem(&spent, StatusCode::BAD_REQUEST, ErrorCode::InvalidToken);
    })
    .await;
}

/// Two sign-up links for one address, each verified several times concurrently: one user.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn one_user_per_address_under_concurrent_verification(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        assert_eq!(
            app.register("twice@example.com").await.status,
            StatusCode::ACCEPTED
        );
        let first = app.outbox_token("twice@example.com", "verify_email").await;
        assert_eq!(
            app.register("TWICE@example.com").await.status,
            StatusCode::ACCEPTED
        );
        let second = app.outbox_token("twice@example.com", "verify_email").await;
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
    })
    .await;
}

/// Login queues a link only for a known address; register for a known address sends a login
/// link, not a second sign-up. Every answer is the same 202.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn login_links_only_for_known_addresses(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, _) = app.user("known@example.com").await;

        let known = app.login("Known@Example.com").await;
        let unknown = app.login("nobody@example.com").await;
        assert_eq!(known.status, StatusCode::ACCEPTED, "{}", known.text);
        assert_eq!(unknown.status, StatusCode::ACCEPTED, "{}", unknown.text);
        assert_eq!(known.body, unknown.body, "no account enumeration");
        app.outbox_token("known@example.com", "login_link").await;
        // Both answers were sent before any work; give the unknown address's work time to finish.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert_eq!(
            app.count_where(
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
        let link = app.outbox_token("known@example.com", "login_link").await;
        let session = app.verify(&link).await;
        assert_eq!(session.status, StatusCode::OK, "{}", session.text);
        assert_eq!(session.body["user_id"].as_i64(), Some(i64::from(user_id)));

        let again = app.register("known@example.com").await;
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

        let bad = app.login("not an address").await;
        assert_problem(
            &bad,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidEmail,
        );
        let bad = app.register("a@localhost").await;
        assert_problem(
            &bad,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidEmail,
        );
    })
    .await;
}

/// The (N+1)th register for one address within the hour is `429` with `Retry-After`, in any
/// letter case; other addresses are unaffected.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn register_is_rate_limited_per_address(pool: PgPool) {
    TestApp::run(&pool, limits(2, 1000), async |app| {
        assert_eq!(
            app.register("rl@example.com").await.status,
            StatusCode::ACCEPTED
        );
        assert_eq!(
            app.register("RL@example.com").await.status,
            StatusCode::ACCEPTED
        );
        let limited = app.register("rl@EXAMPLE.com").await;
        assert_problem(
            &limited,
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
        );
        let retry_after: u64 = limited
            .header("retry-after")
            .expect("Retry-After")
            .parse()
            .expect("seconds");
        assert!((1..=3600).contains(&retry_after), "{retry_after}");
        let login = app.login("rl@example.com").await;
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
            app.register("other@example.com").await.status,
            StatusCode::ACCEPTED
        );
    })
    .await;
}

/// Per client IP, on a real server (the peer address comes from the connection).
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn register_is_rate_limited_per_ip(pool: PgPool) {
    TestApp::run(&pool, limits(1000, 3), async |app| {
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
                assert_problem(
                    &response,
                    StatusCode::TOO_MANY_REQUESTS,
                    ErrorCode::RateLimited,
                );
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
    })
    .await;
}

/// 20 concurrent signups of one address in two letter cases: one row, every answer 202.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn waitlist_signups_are_unique_per_address(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let mut set = JoinSet::new();
        for i in 0..20 {
            let router = app.router.clone();
            let email = if i % 2 == 0 { "A@x.com" } else { "a@X.com" };
            set.spawn(async move {
                send(
                    router,
                    Call::new(Method::POST, "/api/waitlist/signup")
                        .json(&json!({ "email": email })),
                )
                .await
            });
        }
        while let Some(response) = set.join_next().await {
            let response = response.expect("join");
            assert_eq!(response.status, StatusCode::ACCEPTED, "{}", response.text);
        }
        assert_eq!(app.count("select count(*) from waitlist_signups").await, 1);
        assert_eq!(app.audit_count("waitlist.joined").await, 1);
        let again = app.join_waitlist(&json!({ "email": "a@x.com" })).await;
        assert_eq!(again.status, StatusCode::ACCEPTED);

        for body in [
            json!({ "email": "nope" }),
            json!({ "email": "" }),
            json!({ "email": "a@x.com", "extra": 1 }),
        ] {
            let bad = app.join_waitlist(&body).await;
            assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        }
        let bad = app.join_waitlist(&json!({ "email": "nope" })).await;
        assert_problem(
            &bad,
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidEmail,
        );
        assert_eq!(app.count("select count(*) from waitlist_signups").await, 1);
    })
    .await;
}

/// After the whole journey with keys sent everywhere, no session or link token is stored in
/// `idempotency_keys`, and the auth routes left no key rows at all.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn no_credential_in_idempotency_keys(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        app.quote("AAPL", "189.00", "190.00").await;
        let keyed = |path: &str, body: Value| {
            Call::new(Method::POST, path)
                .json(&body)
                .key(Uuid::new_v4())
        };
        // Asks for a link (keyed), reads it from the outbox and verifies it (keyed).
        let sign_in = async |path: &str, kind: &str| {
            app.send(keyed(path, json!({ "email": "j@example.com" })))
                .await;
            let link = app.outbox_token("j@example.com", kind).await;
            let session = app
                .send(keyed(
                    "/api/auth/register/verify-with-token",
                    json!({ "token": link }),
                ))
                .await;
            assert_eq!(session.status, StatusCode::OK, "{}", session.text);
            session
        };
        let session = sign_in("/api/auth/register", "verify_email").await;
        let token = session.body["token"].as_str().expect("token").to_owned();
        sign_in("/api/auth/login", "login_link").await;
        let one_share = Order::market("AAPL").buy_to_open().qty("1").day().json();
        let order = app.create_order(&token, Uuid::new_v4(), &one_share).await;
        assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
        let profile = app
            .patch_profile(&token, Uuid::new_v4(), &json!({ "display_name": "J" }))
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
            app.count(
                "select count(*) from idempotency_keys where scope_endpoint like '%/api/auth/%'"
            )
            .await,
            0
        );
    })
    .await;
}
