//! GDPR: the export of everything the service holds on a user (streamed for a large account),
//! and an erasure that leaves no reference to them.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::{assert_problem, label, Call, Options, Order, TestApp};
use raptor_api::codes::ErrorCode;

/// 6,000 audit rows of 200-odd bytes for `user_id`: an export larger than the chunks the server
/// writes ahead of its reader.
async fn bulk_audit_rows(app: &TestApp, user_id: i32) {
    app.execute_where(
        "insert into audit_log (user_id, action, context)
         select $1, 'bulk.row', jsonb_build_object('n', g, 'pad', repeat('x', 200))
           from generate_series(1, 6000) g",
        user_id,
    )
    .await;
}

/// A large account's export is streamed in chunks (no `Content-Length`, many body frames,
/// none larger than the server's chunk size plus one row), and is one whole JSON document with
/// every row.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn gdpr_export_of_a_large_account_is_streamed(pool: PgPool) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("large@example.com").await;
        bulk_audit_rows(app, user_id).await;
        let request = axum::http::Request::builder()
            .uri("/api/account/export")
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::empty())
            .expect("request");
        let response = app.router.clone().oneshot(request).await.expect("response");
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.headers().get("content-length").is_none(),
            "not buffered whole: {:?}",
            response.headers()
        );
        let mut body = response.into_body();
        let (mut frames, mut largest, mut bytes) = (0, 0, Vec::new());
        while let Some(frame) = body.frame().await {
            let data = frame.expect("frame").into_data().expect("data");
            frames += 1;
            largest = largest.max(data.len());
            bytes.extend_from_slice(&data);
        }
        assert!(frames > 10, "{frames} frames for {} bytes", bytes.len());
        assert!(largest < 128 * 1024, "a frame of {largest} bytes");
        let export: Value = serde_json::from_slice(&bytes).expect("one JSON document");
        assert_eq!(export["user"]["email"], "large@example.com");
        let audit = export["audit_log"].as_array().expect("audit rows");
        assert_eq!(
            audit
                .iter()
                .filter(|row| row["action"] == "bulk.row")
                .count(),
            6000
        );
        assert_eq!(export["account"].as_array().map(Vec::len), Some(1));
        assert!(export["billing_customer"].is_null());
    })
    .await;
}

/// The export lists the user's idempotency keys, and the erasure removes them with the rest.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn gdpr_export_includes_idempotency_keys_and_erasure_removes_them(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        let (user_id, token) = app.user("gdpr@example.com").await;
        app.post("/probe/items", &token, Uuid::new_v4(), &label("mine"))
            .await;
        let export = app.export(&token).await;
        assert_eq!(export.status, StatusCode::OK, "{}", export.text);
        assert_eq!(export.body["user"]["email"], "gdpr@example.com");
        assert_eq!(
            export.body["idempotency_keys"].as_array().map(Vec::len),
            Some(1)
        );
        let erased = app.erase(&token).await;
        assert_eq!(erased.status, StatusCode::OK, "{}", erased.text);
        for table in [
            "idempotency_keys where scope_user_id",
            "audit_log where user_id",
            "users where id",
            "paper_accounts where user_id",
        ] {
            let n = app
                .count_where(&format!("select count(*) from {table} = $1"), user_id)
                .await;
            assert_eq!(n, 0, "{table}");
        }
    })
    .await;
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
        let n = app
            .count_where(
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
        let n = app
            .count_where(
                &format!("select count(*) from {table} where lower(email) = lower($1)"),
                email,
            )
            .await;
        if n > 0 {
            found.push(format!("{table}.email: {n}"));
        }
    }
    let n = app
        .count_where("select count(*) from users where id = $1", user_id)
        .await;
    if n > 0 {
        found.push("users.id".into());
    }
    found
}

/// Two users with orders, fills, keys, profile, waitlist, outbox, billing rows, and operator
/// rows naming one of them. The export holds exactly the victim's data; the erasure removes
/// every reference to them and nothing of the other user.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn erasure_leaves_no_trace(pool: PgPool) {
    TestApp::run(&pool, Options::default(), async |app| {
        app.quote("AAPL", "189.00", "190.00").await;
        let one_share = Order::market("AAPL").buy_to_open().qty("1").day().json();
        let mut users = Vec::new();
        for email in ["Victim@example.com", "bystander@example.com"] {
            let waitlist = app.join_waitlist(&json!({ "email": email })).await;
            assert_eq!(waitlist.status, StatusCode::ACCEPTED);
            let (user_id, token) = app.sign_up(email).await;
            // A login link too, and an unused one.
            app.login(email).await;
            let order = app.create_order(&token, Uuid::new_v4(), &one_share).await;
            assert_eq!(order.status, StatusCode::CREATED, "{}", order.text);
            let patched = app.patch_profile(
            &token,
            Uuid::new_v4(),
            &json!({ "display_name": format!("name of {email}"), "time_zone": "Europe/Paris" }),
        )
        .await;
            assert_eq!(patched.status, StatusCode::OK, "{}", patched.text);
            app.execute_where(
                "insert into billing_customers (user_id, stripe_customer_id) \
                 values ($1, 'cus_' || $1)",
                user_id,
            )
            .await;
            app.execute_where(
                "insert into billing_subscriptions
                    (stripe_subscription_id, stripe_customer_id, user_id, status, source_at)
             values ('sub_' || $1, 'cus_' || $1, $1, 'active', now()),
                    ('sub_orphan_' || $1, 'cus_' || $1, null, 'active', now())",
                user_id,
            )
            .await;
            users.push((
                user_id,
                token,
                order.body["id"].as_str().expect("id").to_owned(),
            ));
        }
        let (victim, victim_token, victim_order) = users[0].clone();
        let (bystander, bystander_token, bystander_order) = users[1].clone();
        // Operator-owned rows that name the victim.
        app.execute_where(
            "update quotes set updated_by = $1 where symbol = 'AAPL'",
            victim,
        )
        .await;
        app.execute_where(
            "insert into feature_flags (name, enabled, updated_by) values ('SOME_FLAG', true, $1)",
            victim,
        )
        .await;
        assert!(
            !references_to(app, victim, "victim@example.com")
                .await
                .is_empty(),
            "the check itself sees the victim"
        );

        let export = app.export(&victim_token).await;
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
        app.execute_where(
            "update billing_subscriptions set status = 'canceled' where user_id = $1",
            victim,
        )
        .await;
        let erased = app
            .send(Call::new(Method::POST, "/api/account/erasure").token(&victim_token))
            .await;
        assert_eq!(erased.status, StatusCode::OK, "{}", erased.text);
        assert_eq!(
            references_to(app, victim, "victim@example.com").await,
            Vec::<String>::new()
        );
        let erased_row: Value = app
            .scalar("select context from audit_log where action = 'user.erased'")
            .await;
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
            app.account(&victim_token).await.status,
            StatusCode::UNAUTHORIZED
        );

        // The bystander is untouched, and the operator rows survive without the reference.
        assert_eq!(app.account(&bystander_token).await.status, StatusCode::OK);
        let left = references_to(app, bystander, "bystander@example.com").await;
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
        app.count_where(
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
    })
    .await;
}

/// An export holds a connection and a snapshot while its reader takes its time, so exports are
/// bounded: one per user, and per process a quarter of the business pool (one of a pool of 4).
/// Past either bound the answer is `429 rate_limited` with `Retry-After`; every other request
/// still gets its connection; a place is given back when its reader goes away.
#[sqlx::test(migrator = "crate::helpers::MIGRATOR")]
async fn exports_are_bounded_per_user_and_per_process(pool: PgPool) {
    use tower::ServiceExt;

    let options = Options {
        pool_size: 4,
        ..Options::default()
    };
    TestApp::run(&pool, options, async |app| {
        let (user_id, token) = app.user("holder@example.com").await;
        bulk_audit_rows(app, user_id).await;
        let request = axum::http::Request::builder()
            .uri("/api/account/export")
            .header("authorization", format!("Bearer {token}"))
            .body(axum::body::Body::empty())
            .expect("request");
        let held = app.router.clone().oneshot(request).await.expect("response");
        assert_eq!(held.status(), StatusCode::OK);

        let again = app.export(&token).await;
        assert_problem(
            &again,
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
        );
        assert!(again.header("retry-after").is_some());
        let (_, other) = app.user("other@example.com").await;
        let elsewhere = app.export(&other).await;
        assert_problem(
            &elsewhere,
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::RateLimited,
        );
        for _ in 0..8 {
            let account = app.account(&other).await;
            assert_eq!(account.status, StatusCode::OK, "{}", account.text);
        }

        drop(held);
        let started = std::time::Instant::now();
        loop {
            let export = app.export(&other).await;
            if export.status == StatusCode::OK {
                assert_eq!(export.body["user"]["email"], "other@example.com");
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "the place was not given back: {} {}",
                export.status,
                export.text
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await;
}
